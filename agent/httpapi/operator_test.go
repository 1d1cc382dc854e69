package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func TestOperatorEndpoints(t *testing.T) {
	stored := structs.DefaultAutopilotConfig()
	stored.RaftIndex = structs.RaftIndex{CreateIndex: 4, ModifyIndex: 9}
	setReq := func(c structs.AutopilotConfig, cas bool) []rpcCall {
		return []rpcCall{{structs.MethodOperatorAutopilotSetConfiguration.Name(), structs.AutopilotSetConfigRequest{Config: c, CAS: cas, WriteRequest: wr()}}}
	}
	put := func(f *fakeRPC, ok bool) { f.replies[structs.MethodOperatorAutopilotSetConfiguration.Name()] = ok }
	runCases(t, []apiCase{
		{
			name: "autopilot configuration", path: "/v1/operator/autopilot/configuration",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodOperatorAutopilotGetConfiguration.Name()] = structs.AutopilotConfigResponse{Config: stored, QueryMeta: meta(9)}
			},
			wantCode: 200, wantJSON: true,
			wantBody: `{"CleanupDeadServers":true,"LastContactThreshold":"200ms","MaxTrailingLogs":250,"MinQuorum":0,"ServerStabilizationTime":"10s",` +
				`"RedundancyZoneTag":"","DisableUpgradeMigration":false,"UpgradeVersionTag":"","CreateIndex":4,"ModifyIndex":9}`,
			wantCalls: []rpcCall{{structs.MethodOperatorAutopilotGetConfiguration.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
		{
			name: "set: missing durations are zero, the answer true", method: http.MethodPut, path: "/v1/operator/autopilot/configuration",
			body: `{"CleanupDeadServers":false,"MaxTrailingLogs":10}`, setup: func(f *fakeRPC, _ *Config) { put(f, true) },
			wantCode: 200, wantBody: "true", wantCalls: setReq(structs.AutopilotConfig{MaxTrailingLogs: 10}, false),
		},
		{
			name: "set: durations as strings or nanoseconds", method: http.MethodPut, path: "/v1/operator/autopilot/configuration",
			body: `{"LastContactThreshold":"1s","ServerStabilizationTime":5000000}`, setup: func(f *fakeRPC, _ *Config) { put(f, true) },
			wantCode: 200, wantBody: "true", wantCalls: setReq(structs.AutopilotConfig{LastContactThreshold: time.Second, ServerStabilizationTime: 5 * time.Millisecond}, false),
		},
		{
			name: "cas lost", method: http.MethodPut, path: "/v1/operator/autopilot/configuration?cas=8",
			body: `{"CleanupDeadServers":true}`, setup: func(f *fakeRPC, _ *Config) { put(f, false) },
			wantCode: 200, wantBody: "false", wantCalls: setReq(structs.AutopilotConfig{CleanupDeadServers: true, RaftIndex: structs.RaftIndex{ModifyIndex: 8}}, true),
		},
		{
			name: "cas won", method: http.MethodPut, path: "/v1/operator/autopilot/configuration?cas=9",
			body: `{}`, setup: func(f *fakeRPC, _ *Config) { put(f, true) },
			wantCode: 200, wantBody: "true", wantCalls: setReq(structs.AutopilotConfig{RaftIndex: structs.RaftIndex{ModifyIndex: 9}}, true),
		},
		{name: "bad cas", method: http.MethodPut, path: "/v1/operator/autopilot/configuration?cas=x", body: `{}`,
			wantCode: 400, wantBody: `Error parsing cas value: strconv.ParseUint: parsing "x": invalid syntax`},
		{name: "bad body", method: http.MethodPut, path: "/v1/operator/autopilot/configuration", body: `{"MaxTrailingLogs":-1}`,
			wantCode: 400, wantBody: "Error parsing autopilot config: json: cannot unmarshal number -1 into Go struct field autopilotConfigJSON.MaxTrailingLogs of type uint64"},
		{name: "bad duration", method: http.MethodPut, path: "/v1/operator/autopilot/configuration", body: `{"LastContactThreshold":"soon"}`,
			wantCode: 400, wantBody: `Error parsing autopilot config: invalid duration "soon": time: invalid duration "soon"`},
		{name: "negative duration", method: http.MethodPut, path: "/v1/operator/autopilot/configuration", body: `{"ServerStabilizationTime":"-1s"}`,
			wantCode: 400, wantBody: "Error parsing autopilot config: ServerStabilizationTime must not be negative"},
		{
			name: "autopilot state", path: "/v1/operator/autopilot/state",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodOperatorAutopilotState.Name()] = structs.AutopilotState{
					Healthy: true, Leader: "id1", Voters: []string{"id1"},
					Servers: map[string]structs.AutopilotServer{"id1": {
						ID: "id1", Name: "s1", Address: "127.0.0.1:8300", NodeStatus: "alive", Version: "1.22.0", LastTerm: 2, LastIndex: 40,
						Healthy: true, StableSince: time.Date(2026, 11, 30, 7, 0, 0, 400e6, time.UTC), Status: "leader", NodeType: "voter",
						Meta: map[string]string{"consul-network-segment": ""},
					}},
				}
			},
			wantCode: 200, wantJSON: true,
			wantBody: `{"Healthy":true,"FailureTolerance":0,"OptimisticFailureTolerance":0,"Servers":{"id1":{"ID":"id1","Name":"s1","Address":"127.0.0.1:8300",` +
				`"NodeStatus":"alive","Version":"1.22.0","LastContact":"0s","LastTerm":2,"LastIndex":40,"Healthy":true,"StableSince":"2026-11-30T07:00:00Z",` +
				`"ReadReplica":false,"Status":"leader","Meta":{"consul-network-segment":""},"NodeType":"voter"}},"Leader":"id1","Voters":["id1"]}`,
			wantCalls: []rpcCall{{structs.MethodOperatorAutopilotState.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
		{
			name: "transfer leader to a server", method: http.MethodPost, path: "/v1/operator/raft/transfer-leader?id=id2",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodOperatorRaftTransferLeader.Name()] = true },
			wantCode: 200, wantBody: `{"Success":true}`,
			wantCalls: []rpcCall{{structs.MethodOperatorRaftTransferLeader.Name(), structs.RaftTransferLeaderRequest{ID: "id2", WriteRequest: wr()}}},
		},
		{
			name: "transfer refused", method: http.MethodPost, path: "/v1/operator/raft/transfer-leader",
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodOperatorRaftTransferLeader.Name()] = structs.WireError("", "cannot transfer leadership: no other voter in the Raft configuration")
			},
			wantCode: 500, wantBody: "cannot transfer leadership: no other voter in the Raft configuration", anyCalls: true,
		},
		{name: "GET on transfer is 405", path: "/v1/operator/raft/transfer-leader", wantCode: 405, wantBody: "method GET not allowed"},
		{
			name: "usage", path: "/v1/operator/usage",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodOperatorUsage.Name()] = structs.UsageResponse{QueryMeta: meta(12), Usage: structs.ServiceUsage{
					Nodes: 2, Services: 4, ServiceInstances: 5, BillableServiceInstances: 3,
					ConnectServiceInstances: map[string]int{"connect-native": 1, "connect-proxy": 1},
				}}
			},
			wantCode: 200, wantJSON: true, wantHeaders: map[string]string{"X-Consul-Index": "12"},
			wantBody:  `{"Usage":{"` + testDC + `":{"Nodes":2,"Services":4,"ServiceInstances":5,"ConnectServiceInstances":{"connect-native":1,"connect-proxy":1},"BillableServiceInstances":3}}}`,
			wantCalls: []rpcCall{{structs.MethodOperatorUsage.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
	})
}
