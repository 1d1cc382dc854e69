package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func TestCatalogRegister(t *testing.T) {
	put := http.MethodPut
	register := func(args structs.RegisterRequest) []rpcCall {
		return []rpcCall{{structs.MethodCatalogRegister.Name(), args}}
	}
	runCases(t, []apiCase{
		{
			name: "keys in any case, defaults filled", method: put, path: "/v1/catalog/register",
			headers: map[string]string{"X-Consul-Token": "tok"},
			body: `{"node":"n1","ADDRESS":"10.0.0.1","NodeMeta":{"rack":"r1"},
				"Service":{"Service":"web","Tags":["a"],"Port":-1,"Weights":{"Passing":3,"Warning":1}},
				"Check":{"CheckID":"c1","Status":"passing","ServiceID":"web","Definition":{"Interval":"10s","Timeout":"0.5s"}},
				"Unknown":{"ignored":true}}`,
			wantCode: 200, wantBody: "true", wantHeaders: map[string]string{"Content-Type": "application/json", "X-Consul-Index": ""},
			wantCalls: register(structs.RegisterRequest{
				Node: "n1", Address: "10.0.0.1", NodeMeta: map[string]string{"rack": "r1"},
				Service: &structs.NodeService{Service: "web", Tags: []string{"a"}, Port: -1, Weights: &structs.Weights{Passing: 3, Warning: 1}},
				Check: &structs.HealthCheck{CheckID: "c1", Status: "passing", ServiceID: "web", Definition: structs.HealthCheckDefinition{
					Interval: structs.Duration(10 * time.Second), Timeout: structs.Duration(500 * time.Millisecond),
				}},
				WriteRequest: structs.WriteRequest{Datacenter: testDC, Token: "tok"},
			}),
		},
		{
			name: "datacenter from the body is kept", method: put, path: "/v1/catalog/register",
			body:     `{"Datacenter":"dc2","Node":"n1","Address":"a","ID":"8f246b77-f3e1-ff88-5b48-8ec93abf3e05"}`,
			wantCode: 200, wantBody: "true",
			wantCalls: register(structs.RegisterRequest{ID: "8f246b77-f3e1-ff88-5b48-8ec93abf3e05", Node: "n1", Address: "a", WriteRequest: structs.WriteRequest{Datacenter: "dc2"}}),
		},
		{
			name: "SkipNodeUpdate needs no address", method: put, path: "/v1/catalog/register",
			body:     `{"Node":"n1","SkipNodeUpdate":true,"Service":{"Service":"web"}}`,
			wantCode: 200, wantBody: "true",
			wantCalls: register(structs.RegisterRequest{Node: "n1", SkipNodeUpdate: true, Service: &structs.NodeService{Service: "web"}, WriteRequest: wr()}),
		},
		{name: "missing node", method: put, path: "/v1/catalog/register", body: `{"Address":"a"}`, wantCode: 500, wantBody: "Must provide node"},
		{name: "missing address", method: put, path: "/v1/catalog/register", body: `{"Node":"n"}`, wantCode: 500, wantBody: "Must provide address if SkipNodeUpdate is not set"},
		{name: "bad node ID", method: put, path: "/v1/catalog/register", body: `{"Node":"n","Address":"a","ID":"nope"}`, wantCode: 500, wantBody: "Bad node ID: uuid string is wrong length"},
		{
			name: "service without a name", method: put, path: "/v1/catalog/register",
			body: `{"Node":"n","Address":"a","Service":{"ID":"web1"}}`, wantCode: 500, wantBody: "Must provide service name with ID",
		},
		{
			name: "service on the any address", method: put, path: "/v1/catalog/register",
			body: `{"Node":"n","Address":"a","Service":{"Service":"web","Address":"0.0.0.0"}}`, wantCode: 500, wantBody: "Invalid service address",
		},
		{
			name: "invalid check status", method: put, path: "/v1/catalog/register",
			body:     `{"Node":"n","Address":"a","Checks":[{"CheckID":"c","Status":"passing"},{"CheckID":"d","Status":"bogus"}]}`,
			wantCode: 500, wantBody: "Status for checks must 'passing', 'warning', 'critical'",
		},
		{
			name: "known field of the wrong type", method: put, path: "/v1/catalog/register", body: `{"Node":5,"Address":"a"}`,
			wantCode: 400, wantBody: "Request decode failed: json: cannot unmarshal number into Go struct field RegisterRequest.Node of type string",
		},
		{
			name: "unparseable duration", method: put, path: "/v1/catalog/register",
			body:     `{"Node":"n","Address":"a","Check":{"Definition":{"Interval":"often"}}}`,
			wantCode: 400,
			check: func(t *testing.T, rec *httptest.ResponseRecorder, _ []rpcCall) {
				if !strings.HasPrefix(rec.Body.String(), "Request decode failed: ") {
					t.Errorf("body = %q", rec.Body.String())
				}
			},
			wantBody: `Request decode failed: invalid duration "often": time: invalid duration "often"`,
		},
		{name: "malformed JSON", method: put, path: "/v1/catalog/register", body: `{"Node":`, wantCode: 400, wantBody: "Request decode failed: unexpected EOF"},
		{name: "empty body", method: put, path: "/v1/catalog/register", wantCode: 400, wantBody: "Request decode failed: EOF"},
		{
			name: "backend error", method: put, path: "/v1/catalog/register", body: `{"Node":"n","Address":"a"}`,
			setup:    func(f *fakeRPC, _ *Config) { f.errs[structs.MethodCatalogRegister.Name()] = structs.ErrNoLeader },
			wantCode: 500, wantBody: "No cluster leader", anyCalls: true,
		},
	})
}

func TestCatalogDeregister(t *testing.T) {
	put := http.MethodPut
	runCases(t, []apiCase{
		{
			name: "deregister a service", method: put, path: "/v1/catalog/deregister?token=t",
			body: `{"Node":"n1","ServiceID":"web1"}`, wantCode: 200, wantBody: "true",
			wantCalls: []rpcCall{{structs.MethodCatalogDeregister.Name(), structs.DeregisterRequest{Node: "n1", ServiceID: "web1", WriteRequest: structs.WriteRequest{Datacenter: testDC, Token: "t"}}}},
		},
		{name: "missing node", method: put, path: "/v1/catalog/deregister", body: `{"ServiceID":"x"}`, wantCode: 500, wantBody: "Must provide node"},
		{name: "bad JSON", method: put, path: "/v1/catalog/deregister", body: `[1]`, wantCode: 400, wantBody: "Request decode failed: json: cannot unmarshal array into Go value of type structs.DeregisterRequest"},
	})
}

func TestCatalogReads(t *testing.T) {
	svcReq := func(mut func(*structs.ServiceSpecificRequest)) []rpcCall {
		r := structs.ServiceSpecificRequest{ServiceName: "web", QueryOptions: qo()}
		mut(&r)
		return []rpcCall{{structs.MethodCatalogServiceNodes.Name(), r}}
	}
	runCases(t, []apiCase{
		{
			name: "datacenters: the server's list as it orders it, no index", path: "/v1/catalog/datacenters",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogListDatacenters.Name()] = []string{"dc1", "dc3", "dc2"}
			},
			wantCode: 200, wantBody: `["dc1","dc3","dc2"]`, wantHeaders: map[string]string{"X-Consul-Index": ""},
			wantCalls: []rpcCall{{structs.MethodCatalogListDatacenters.Name(), structs.DCSpecificRequest{}}},
		},
		{
			name: "nodes", path: "/v1/catalog/nodes",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogListNodes.Name()] = structs.IndexedNodes{
					Nodes:     structs.Nodes{{Node: "a", Address: "10.0.0.1", Datacenter: testDC, RaftIndex: structs.RaftIndex{CreateIndex: 3, ModifyIndex: 4}}},
					QueryMeta: meta(4),
				}
			},
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("4"), anyCalls: true,
			wantBody: `[{"ID":"","Node":"a","Address":"10.0.0.1","Datacenter":"dc1","TaggedAddresses":null,"Meta":{},"CreateIndex":3,"ModifyIndex":4}]`,
		},
		{
			name: "services: tags never null", path: "/v1/catalog/services",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogListServices.Name()] = structs.IndexedServices{
					Services: map[string][]string{"consul": nil, "web": {"b", "a"}}, QueryMeta: meta(9),
				}
			},
			wantCode: 200, wantJSON: true, wantBody: `{"consul":[],"web":["b","a"]}`, wantHeaders: readHeaders("9"),
			wantCalls: []rpcCall{{structs.MethodCatalogListServices.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
		{
			name: "no services", path: "/v1/catalog/services", wantCode: 200, wantBody: "{}", anyCalls: true,
		},
		{
			name: "missing service is []", path: "/v1/catalog/service/web",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogServiceNodes.Name()] = structs.IndexedServiceNodes{QueryMeta: meta(0)}
			},
			wantCode: 200, wantBody: "[]", wantHeaders: readHeaders("1"),
			wantCalls: svcReq(func(*structs.ServiceSpecificRequest) {}),
		},
		{
			name: "service by tags", path: "/v1/catalog/service/web?tag=a&tag=b&index=3&wait=1s",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogServiceNodes.Name()] = structs.IndexedServiceNodes{
					ServiceNodes: structs.ServiceNodes{{Node: "n", ServiceName: "web", ServiceID: "web1", ServicePort: 80}},
					QueryMeta:    meta(5),
				}
			},
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("5"),
			wantBody: `[{"ID":"","Node":"n","Address":"","Datacenter":"","TaggedAddresses":null,"NodeMeta":{},"ServiceKind":"","ServiceID":"web1","ServiceName":"web","ServiceTags":[],"ServiceAddress":"","ServiceWeights":{"Passing":0,"Warning":0},"ServiceMeta":{},"ServicePort":80,"ServiceEnableTagOverride":false,"ServiceProxy":{"MeshGateway":{},"Expose":{}},"ServiceConnect":{},"CreateIndex":0,"ModifyIndex":0}]`,
			wantCalls: svcReq(func(r *structs.ServiceSpecificRequest) {
				r.ServiceTags, r.TagFilter = []string{"a", "b"}, true
				r.MinQueryIndex, r.MaxQueryTime = 3, time.Second
			}),
		},
		{
			name: "connect endpoints", path: "/v1/catalog/connect/web",
			wantCode: 200, wantBody: "[]",
			wantCalls: svcReq(func(r *structs.ServiceSpecificRequest) { r.Connect = true }),
		},
		{name: "missing service name", path: "/v1/catalog/service/", wantCode: 400, wantBody: "Missing service name"},
		{
			name: "missing node is 200 null", path: "/v1/catalog/node/ghost",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogNodeServices.Name()] = structs.IndexedNodeServices{QueryMeta: meta(12)}
			},
			wantCode: 200, wantBody: "null", wantHeaders: readHeaders("12"),
			wantCalls: []rpcCall{{structs.MethodCatalogNodeServices.Name(), structs.NodeSpecificRequest{Node: "ghost", QueryOptions: qo()}}},
		},
		{
			name: "node with services", path: "/v1/catalog/node/n1",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogNodeServices.Name()] = structs.IndexedNodeServices{
					NodeServices: &structs.NodeServices{
						Node:     &structs.Node{Node: "n1", Address: "10.0.0.1"},
						Services: map[string]*structs.NodeService{"web1": {ID: "web1", Service: "web", Port: 80}},
					},
					QueryMeta: meta(6),
				}
			},
			wantCode: 200, wantJSON: true, anyCalls: true,
			wantBody: `{"Node":{"ID":"","Node":"n1","Address":"10.0.0.1","Datacenter":"","TaggedAddresses":null,"Meta":{},"CreateIndex":0,"ModifyIndex":0},
				"Services":{"web1":{"ID":"web1","Service":"web","Tags":[],"Address":"","Meta":{},"Port":80,"EnableTagOverride":false,
				"Proxy":{"MeshGateway":{},"Expose":{}},"Connect":{},"CreateIndex":0,"ModifyIndex":0}}}`,
		},
		{name: "missing node name", path: "/v1/catalog/node/", wantCode: 400, wantBody: "Missing node name"},
	})
}
