package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func TestStatusAndOperator(t *testing.T) {
	dcReq := func(method string, q structs.QueryOptions) []rpcCall {
		return []rpcCall{{method, structs.DCSpecificRequest{QueryOptions: q}}}
	}
	runCases(t, []apiCase{
		{
			name: "leader", path: "/v1/status/leader",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodStatusLeader.Name()] = "127.0.0.1:8300" },
			wantCode: 200, wantBody: `"127.0.0.1:8300"`,
			// Consul sends no read headers here.
			wantHeaders: map[string]string{"Content-Type": "application/json", "X-Consul-Index": ""},
			wantCalls:   dcReq(structs.MethodStatusLeader.Name(), qo()),
		},
		{name: "no leader yet", path: "/v1/status/leader?stale", wantCode: 200, wantBody: `""`,
			wantCalls: dcReq(structs.MethodStatusLeader.Name(), structs.QueryOptions{Datacenter: testDC, AllowStale: true})},
		{
			name: "peers", path: "/v1/status/peers?dc=dc2",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodStatusPeers.Name()] = []string{"10.0.0.1:8300", "10.0.0.2:8300"}
			},
			wantCode: 200, wantBody: `["10.0.0.1:8300","10.0.0.2:8300"]`,
			wantCalls: dcReq(structs.MethodStatusPeers.Name(), structs.QueryOptions{Datacenter: "dc2"}),
		},
		{name: "no peers is []", path: "/v1/status/peers", wantCode: 200, wantBody: "[]", anyCalls: true},
		{
			name: "unknown datacenter", path: "/v1/status/peers?dc=nowhere",
			setup:    func(f *fakeRPC, _ *Config) { f.errs[structs.MethodStatusPeers.Name()] = structs.ErrNoDCPath },
			wantCode: 500, wantBody: "No path to datacenter", anyCalls: true,
		},
		{
			name: "raft configuration", path: "/v1/operator/raft/configuration",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodOperatorRaftConfig.Name()] = structs.RaftConfigurationResponse{
					Servers: []*structs.RaftServer{{ID: "id1", Node: "n1", Address: "127.0.0.1:8300", Leader: true, ProtocolVersion: "3", Voter: true, LastIndex: 12}},
					Index:   12,
				}
			},
			wantCode: 200, wantJSON: true,
			wantBody:  `{"Servers":[{"ID":"id1","Node":"n1","Address":"127.0.0.1:8300","Leader":true,"ProtocolVersion":"3","Voter":true,"LastIndex":12}],"Index":12}`,
			wantCalls: dcReq(structs.MethodOperatorRaftConfig.Name(), qo()),
		},
		{name: "PUT on status is 405", method: http.MethodPut, path: "/v1/status/leader", wantCode: 405, wantBody: "method PUT not allowed"},
		{name: "remove peer by address", method: http.MethodDelete, path: "/v1/operator/raft/peer?address=127.0.0.2:8300&dc=dc2",
			wantCode: 200, wantBody: "",
			wantCalls: []rpcCall{{structs.MethodOperatorRaftRemovePeer.Name(), structs.RaftRemovePeerRequest{Address: "127.0.0.2:8300", WriteRequest: structs.WriteRequest{Datacenter: "dc2"}}}}},
		{name: "remove peer by id", method: http.MethodDelete, path: "/v1/operator/raft/peer?id=id2", wantCode: 200,
			wantCalls: []rpcCall{{structs.MethodOperatorRaftRemovePeer.Name(), structs.RaftRemovePeerRequest{ID: "id2", WriteRequest: wr()}}}},
		{name: "remove peer, unknown", method: http.MethodDelete, path: "/v1/operator/raft/peer?id=nope",
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodOperatorRaftRemovePeer.Name()] = structs.WireError("", `id "nope" was not found in the Raft configuration`)
			},
			wantCode: 500, wantBody: `id "nope" was not found in the Raft configuration`, anyCalls: true},
		{name: "remove peer names none", method: http.MethodDelete, path: "/v1/operator/raft/peer", wantCode: 400,
			wantBody: "Must specify either ?id with the server's ID or ?address with IP:port of peer to remove"},
		{name: "remove peer names both", method: http.MethodDelete, path: "/v1/operator/raft/peer?id=a&address=b", wantCode: 400,
			wantBody: "Must specify only one of ?id or ?address"},
		{
			name: "autopilot health", path: "/v1/operator/autopilot/health",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodOperatorServerHealth.Name()] = structs.OperatorHealthReply{Healthy: true, FailureTolerance: 0, Servers: []structs.ServerHealth{{
					ID: "id1", Name: "s1", Address: "127.0.0.1:8300", SerfStatus: "alive", Version: "1.22.0", Leader: true,
					LastTerm: 2, LastIndex: 46, Healthy: true, Voter: true, StableSince: time.Date(2026, 11, 30, 7, 0, 0, 400e6, time.FixedZone("x", 3600)),
				}}}
			},
			wantCode: 200, wantJSON: true, wantHeaders: map[string]string{"X-Consul-Index": ""},
			wantBody: `{"Healthy":true,"FailureTolerance":0,"Servers":[{"ID":"id1","Name":"s1","Address":"127.0.0.1:8300","SerfStatus":"alive","Version":"1.22.0",` +
				`"Leader":true,"LastContact":"0s","LastTerm":2,"LastIndex":46,"Healthy":true,"Voter":true,"StableSince":"2026-11-30T06:00:00Z"}]}`,
			wantCalls: dcReq(structs.MethodOperatorServerHealth.Name(), qo()),
		},
		{
			name: "autopilot health, unhealthy: 429 with the body", path: "/v1/operator/autopilot/health",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodOperatorServerHealth.Name()] = structs.OperatorHealthReply{Servers: []structs.ServerHealth{{
					ID: "id2", SerfStatus: "failed", LastContact: -1, Voter: true,
				}}}
			},
			wantCode: 429, wantJSON: true,
			wantBody: `{"Healthy":false,"FailureTolerance":0,"Servers":[{"ID":"id2","Name":"","Address":"","SerfStatus":"failed","Version":"",` +
				`"Leader":false,"LastContact":"-1ns","LastTerm":0,"LastIndex":0,"Healthy":false,"Voter":true,"StableSince":"0001-01-01T00:00:00Z"}]}`,
			anyCalls: true,
		},
		{name: "GET on remove peer is 405", path: "/v1/operator/raft/peer?id=a", wantCode: 405, wantBody: "method GET not allowed"},
	})
}

func TestAgentSelf(t *testing.T) {
	runCases(t, []apiCase{
		{
			name: "minimal", path: "/v1/agent/self", wantCode: 200, wantJSON: true,
			wantBody: `{"Config":{"Datacenter":"dc1","PrimaryDatacenter":"dc1","NodeName":"node1","NodeID":"","Revision":"","Server":false,"Version":"","BuildDate":"","SessionTTLMin":10000000000},
				"DebugConfig":{"Datacenter":"dc1","NodeName":"node1","SessionTTLMin":"10s"},"Coord":null,
				"Member":{"Name":"node1","Addr":"","Port":0,"Tags":{},"Status":1,"ProtocolMin":0,"ProtocolMax":0,"ProtocolCur":0,"DelegateMin":0,"DelegateMax":0,"DelegateCur":0},
				"Stats":{},"Meta":{}}`,
		},
		{
			name: "from Self", path: "/v1/agent/self",
			setup: func(_ *fakeRPC, c *Config) {
				c.SessionTTLMin = 15 * time.Second
				c.Self = func() SelfInfo {
					return SelfInfo{
						NodeID: "0b5c6d4e-0000-4000-8000-000000000001", Server: true, Version: "1.22.0", Revision: "abc", BuildDate: "2026-01-01T00:00:00Z",
						Member: MemberInfo{Name: "node1", Addr: "127.0.0.1", Port: 8301, Tags: map[string]string{"role": "consul"}, Status: 1, ProtocolMin: 1, ProtocolMax: 5, ProtocolCur: 2},
						Meta:   map[string]string{"rack": "r1"},
						Stats:  map[string]map[string]string{"raft": {"state": "Leader"}},

						SerfAdvertiseAddrLAN: "127.0.0.1:8301", SerfBindAddrLAN: "0.0.0.0:8301",
					}
				}
			},
			wantCode: 200, wantJSON: true,
			wantBody: `{"Config":{"Datacenter":"dc1","PrimaryDatacenter":"dc1","NodeName":"node1","NodeID":"0b5c6d4e-0000-4000-8000-000000000001","Revision":"abc","Server":true,"Version":"1.22.0","BuildDate":"2026-01-01T00:00:00Z","SessionTTLMin":15000000000},
				"DebugConfig":{"Datacenter":"dc1","NodeName":"node1","SessionTTLMin":"15s","SerfAdvertiseAddrLAN":"tcp://127.0.0.1:8301","SerfBindAddrLAN":"tcp://0.0.0.0:8301"},"Coord":null,
				"Member":{"Name":"node1","Addr":"127.0.0.1","Port":8301,"Tags":{"role":"consul"},"Status":1,"ProtocolMin":1,"ProtocolMax":5,"ProtocolCur":2,"DelegateMin":0,"DelegateMax":0,"DelegateCur":0},
				"Stats":{"raft":{"state":"Leader"}},"Meta":{"rack":"r1"}}`,
		},
		{
			name: "metrics handler", path: "/v1/agent/metrics?format=prometheus",
			setup: func(_ *fakeRPC, c *Config) {
				c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/plain; version=0.0.4")
					_, _ = w.Write([]byte("consul_up 1\n"))
				})
			},
			wantCode: 200, wantBody: "consul_up 1\n", wantHeaders: map[string]string{"Content-Type": "text/plain; version=0.0.4"},
		},
		{name: "metrics POST is 405", method: http.MethodPost, path: "/v1/agent/metrics", wantCode: 405, wantBody: "method POST not allowed"},
	})
}
