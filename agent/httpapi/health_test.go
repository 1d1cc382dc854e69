package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestHealthEndpoints(t *testing.T) {
	instance := func(node string, statuses ...string) structs.CheckServiceNode {
		c := structs.CheckServiceNode{
			Node:    &structs.Node{Node: node},
			Service: &structs.NodeService{ID: "web", Service: "web"},
		}
		for _, st := range statuses {
			c.Checks = append(c.Checks, &structs.HealthCheck{Node: node, CheckID: "c", Status: st})
		}
		return c
	}
	twoInstances := func(f *fakeRPC, _ *Config) {
		f.replies[structs.MethodHealthServiceNodes.Name()] = structs.IndexedCheckServiceNodes{
			Nodes:     structs.CheckServiceNodes{instance("ok", "passing", "passing"), instance("warn", "passing", "warning")},
			QueryMeta: meta(8),
		}
	}
	svcReq := func(mut func(*structs.ServiceSpecificRequest)) []rpcCall {
		r := structs.ServiceSpecificRequest{ServiceName: "web", QueryOptions: qo()}
		mut(&r)
		return []rpcCall{{structs.MethodHealthServiceNodes.Name(), r}}
	}
	runCases(t, []apiCase{
		{
			name: "all instances", path: "/v1/health/service/web", setup: twoInstances,
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("8"),
			wantBody: `[` +
				`{"Node":{"ID":"","Node":"ok","Address":"","Datacenter":"","TaggedAddresses":null,"Meta":{},"CreateIndex":0,"ModifyIndex":0},` +
				`"Service":{"ID":"web","Service":"web","Tags":[],"Address":"","Meta":{},"Port":0,"EnableTagOverride":false,"Proxy":{"MeshGateway":{},"Expose":{}},"Connect":{},"CreateIndex":0,"ModifyIndex":0},` +
				`"Checks":[` + checkJSON("ok", "passing") + `,` + checkJSON("ok", "passing") + `]},` +
				`{"Node":{"ID":"","Node":"warn","Address":"","Datacenter":"","TaggedAddresses":null,"Meta":{},"CreateIndex":0,"ModifyIndex":0},` +
				`"Service":{"ID":"web","Service":"web","Tags":[],"Address":"","Meta":{},"Port":0,"EnableTagOverride":false,"Proxy":{"MeshGateway":{},"Expose":{}},"Connect":{},"CreateIndex":0,"ModifyIndex":0},` +
				`"Checks":[` + checkJSON("warn", "passing") + `,` + checkJSON("warn", "warning") + `]}]`,
			wantCalls: svcReq(func(*structs.ServiceSpecificRequest) {}),
		},
		{
			name: "bare ?passing means true and drops warnings", path: "/v1/health/service/web?passing&tag=v1", setup: twoInstances,
			wantCode: 200, wantJSON: true,
			wantBody: `[{"Node":{"ID":"","Node":"ok","Address":"","Datacenter":"","TaggedAddresses":null,"Meta":{},"CreateIndex":0,"ModifyIndex":0},` +
				`"Service":{"ID":"web","Service":"web","Tags":[],"Address":"","Meta":{},"Port":0,"EnableTagOverride":false,"Proxy":{"MeshGateway":{},"Expose":{}},"Connect":{},"CreateIndex":0,"ModifyIndex":0},` +
				`"Checks":[` + checkJSON("ok", "passing") + `,` + checkJSON("ok", "passing") + `]}]`,
			wantCalls: svcReq(func(r *structs.ServiceSpecificRequest) {
				r.PassingOnly, r.ServiceTags, r.TagFilter = true, []string{"v1"}, true
			}),
		},
		{
			name: "?passing=false keeps every instance", path: "/v1/health/service/web?passing=false", setup: twoInstances,
			wantCode: 200, wantCalls: svcReq(func(*structs.ServiceSpecificRequest) {}),
			check: func(t *testing.T, rec *httptest.ResponseRecorder, _ []rpcCall) {
				var got []structs.CheckServiceNode
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got) != 2 {
					t.Errorf("got %d instances (%v), want 2", len(got), err)
				}
			},
			wantBody: rec2(t, twoInstances),
		},
		{name: "invalid ?passing", path: "/v1/health/service/web?passing=maybe", wantCode: 400, wantBody: "Invalid value for ?passing"},
		{
			name: "missing service is []", path: "/v1/health/service/ghost",
			wantCode: 200, wantBody: "[]",
			wantCalls: []rpcCall{{structs.MethodHealthServiceNodes.Name(), structs.ServiceSpecificRequest{ServiceName: "ghost", QueryOptions: qo()}}},
		},
		{
			name: "connect", path: "/v1/health/connect/web?passing=1",
			wantCode: 200, wantBody: "[]",
			wantCalls: svcReq(func(r *structs.ServiceSpecificRequest) { r.Connect, r.PassingOnly = true, true }),
		},
		{name: "missing service name", path: "/v1/health/service/", wantCode: 400, wantBody: "Missing service name"},
		{
			name: "service checks", path: "/v1/health/checks/web",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodHealthServiceChecks.Name()] = structs.IndexedHealthChecks{
					HealthChecks: structs.HealthChecks{{Node: "n", CheckID: "c", Status: "passing"}}, QueryMeta: meta(3),
				}
			},
			wantCode: 200, wantJSON: true, wantBody: "[" + checkJSON("n", "passing") + "]", wantHeaders: readHeaders("3"),
			wantCalls: []rpcCall{{structs.MethodHealthServiceChecks.Name(), structs.ServiceSpecificRequest{ServiceName: "web", QueryOptions: qo()}}},
		},
		{
			name: "node checks of a missing node are []", path: "/v1/health/node/ghost?stale",
			wantCode: 200, wantBody: "[]",
			wantCalls: []rpcCall{{structs.MethodHealthNodeChecks.Name(), structs.NodeSpecificRequest{Node: "ghost", QueryOptions: structs.QueryOptions{Datacenter: testDC, AllowStale: true}}}},
		},
		{name: "missing node name", path: "/v1/health/node/", wantCode: 400, wantBody: "Missing node name"},
		{
			name: "unknown state is []", path: "/v1/health/state/bogus",
			wantCode: 200, wantBody: "[]",
			wantCalls: []rpcCall{{structs.MethodHealthChecksInState.Name(), structs.ChecksInStateRequest{State: "bogus", QueryOptions: qo()}}},
		},
		{name: "missing state", path: "/v1/health/state/", wantCode: 400, wantBody: "Missing check state"},
	})
}

// checkJSON is how a bare check (node, ID "c", status) encodes.
func checkJSON(node, status string) string {
	return `{"Node":"` + node + `","CheckID":"c","Name":"","Status":"` + status + `","Notes":"","Output":"","ServiceID":"","ServiceName":"",` +
		`"ServiceTags":[],"Type":"","Interval":"","Timeout":"","ExposedPort":0,"Definition":{},"CreateIndex":0,"ModifyIndex":0}`
}

// rec2 renders the unfiltered /v1/health/service/web answer for setup, so a
// case can expect the same body from a differently filtered request.
func rec2(t *testing.T, setup func(*fakeRPC, *Config)) string {
	t.Helper()
	s, _, _ := newTestServer(t, setup)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/health/service/web", nil))
	return rec.Body.String()
}
