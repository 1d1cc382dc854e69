package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func TestConfigEndpoints(t *testing.T) {
	webEntry := &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http",
		RaftIndex: structs.RaftIndex{CreateIndex: 3, ModifyIndex: 4}}
	runCases(t, []apiCase{
		{
			name: "put", method: http.MethodPut, path: "/v1/config",
			body:     `{"Kind":"service-defaults","Name":"web","protocol":"http"}`,
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodConfigEntryApply.Name()] = true },
			wantCode: 200, wantBody: "true", wantJSON: true,
			wantCalls: []rpcCall{{structs.MethodConfigEntryApply.Name(), structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert,
				Entry: &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http"}, WriteRequest: wr()}}},
		},
		{
			name: "put cas failing", method: http.MethodPut, path: "/v1/config?cas=7",
			body:     `{"Kind":"service-defaults","Name":"web"}`,
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodConfigEntryApply.Name()] = false },
			wantCode: 200, wantBody: "false", wantJSON: true,
			wantCalls: []rpcCall{{structs.MethodConfigEntryApply.Name(), structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsertCAS,
				Entry: &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", RaftIndex: structs.RaftIndex{ModifyIndex: 7}}, WriteRequest: wr()}}},
		},
		{
			name: "put unknown kind", method: http.MethodPut, path: "/v1/config",
			body: `{"Kind":"nope","Name":"x"}`, wantCode: 400, wantBody: "Request decoding failed: invalid config entry kind: nope",
		},
		{
			name: "put unknown key", method: http.MethodPut, path: "/v1/config",
			body:     `{"Kind":"service-defaults","Name":"x","Frobnicate":true}`,
			wantCode: 400, wantBody: "Request decoding failed: 1 error occurred:\n\t* invalid config key \"Frobnicate\"\n\n",
		},
		{
			name: "put bad json", method: http.MethodPut, path: "/v1/config",
			body: `{"Kind":`, wantCode: 400, wantBody: "Request decoding failed: unexpected EOF",
		},
		{
			name: "put validation error is 500", method: http.MethodPut, path: "/v1/config",
			body: `{"Kind":"service-splitter","Name":"web","Splits":[{"Weight":90}]}`,
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodConfigEntryApply.Name()] = errors.New("the sum of all split weights must be 100, not 90.000000")
			},
			wantCode: 500, wantBody: "the sum of all split weights must be 100, not 90.000000", anyCalls: true,
		},
		{
			name: "put bad cas", method: http.MethodPut, path: "/v1/config?cas=x",
			body: `{"Kind":"service-defaults","Name":"web"}`, wantCode: 500, skipBody: true,
		},
		{
			name: "get one", path: "/v1/config/service-defaults/web",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodConfigEntryGet.Name()] = structs.ConfigEntryResponse{Entry: webEntry, QueryMeta: meta(4)}
			},
			wantCode: 200, wantJSON: true,
			wantBody:    `{"Kind":"service-defaults","Name":"web","Protocol":"http","TransparentProxy":{},"MeshGateway":{},"Expose":{},"CreateIndex":3,"ModifyIndex":4}`,
			wantHeaders: readHeaders("4"),
			wantCalls:   []rpcCall{{structs.MethodConfigEntryGet.Name(), structs.ConfigEntryQuery{Kind: "service-defaults", Name: "web", QueryOptions: qo()}}},
		},
		{
			name: "exported services", path: "/v1/exported-services",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodExportedServicesList.Name()] = structs.IndexedExportedServices{QueryMeta: meta(6),
					Services: []structs.ResolvedExportedService{{Service: "db", Consumers: structs.ResolvedConsumers{Peers: []string{"alpha"}}}}}
			},
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("6"),
			wantBody:  `[{"Service":"db","Consumers":{"Peers":["alpha"]}}]`,
			wantCalls: []rpcCall{{structs.MethodExportedServicesList.Name(), structs.ExportedServicesQuery{QueryOptions: qo()}}},
		},
		{
			name: "exported services none", path: "/v1/exported-services",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodExportedServicesList.Name()] = structs.IndexedExportedServices{QueryMeta: meta(2)}
			},
			wantCode: 200, wantJSON: true, wantBody: `[]`, anyCalls: true,
		},
		{
			name: "get missing", path: "/v1/config/service-defaults/nope?index=3&wait=1s",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodConfigEntryGet.Name()] = structs.ConfigEntryResponse{QueryMeta: meta(9)}
			},
			wantCode:    404,
			wantBody:    `Config entry not found for "service-defaults" / "nope"`,
			wantHeaders: map[string]string{"X-Consul-Index": "9"},
			wantCalls: []rpcCall{{structs.MethodConfigEntryGet.Name(), structs.ConfigEntryQuery{Kind: "service-defaults", Name: "nope",
				QueryOptions: structs.QueryOptions{Datacenter: testDC, MinQueryIndex: 3, MaxQueryTime: time.Second}}}},
		},
		{
			name: "get unknown kind", path: "/v1/config/nope/x",
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodConfigEntryGet.Name()] = errors.New("invalid config entry kind: nope")
			},
			wantCode: 500, wantBody: "invalid config entry kind: nope", anyCalls: true,
		},
		{
			name: "list kind", path: "/v1/config/service-defaults",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodConfigEntryList.Name()] = structs.IndexedConfigEntries{QueryMeta: meta(5)}
			},
			wantCode: 200, wantBody: `[]`, wantJSON: true, wantHeaders: readHeaders("5"),
			wantCalls: []rpcCall{{structs.MethodConfigEntryList.Name(), structs.ConfigEntryQuery{Kind: "service-defaults", QueryOptions: qo()}}},
		},
		{
			name: "delete", method: http.MethodDelete, path: "/v1/config/service-defaults/web",
			wantCode: 200, wantBody: `{}`, wantJSON: true,
			wantCalls: []rpcCall{{structs.MethodConfigEntryDelete.Name(), structs.ConfigEntryRequest{Op: structs.ConfigEntryDelete,
				Entry: &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web"}, WriteRequest: wr()}}},
		},
		{
			name: "delete cas", method: http.MethodDelete, path: "/v1/config/service-defaults/web?cas=4",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodConfigEntryDelete.Name()] = structs.ConfigEntryDeleteResponse{Deleted: true}
			},
			wantCode: 200, wantBody: `true`, wantJSON: true,
			wantCalls: []rpcCall{{structs.MethodConfigEntryDelete.Name(), structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS,
				Entry: &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", RaftIndex: structs.RaftIndex{ModifyIndex: 4}}, WriteRequest: wr()}}},
		},
		{
			name: "delete without name", method: http.MethodDelete, path: "/v1/config/service-defaults",
			wantCode: 404, wantBody: "Must provide both a kind and name to delete",
		},
		{
			name: "delete unknown kind", method: http.MethodDelete, path: "/v1/config/nope/x",
			wantCode: 400, wantBody: "invalid config entry kind: nope",
		},
		{
			name: "config post not allowed", method: http.MethodPost, path: "/v1/config",
			wantCode: 405, wantBody: "method POST not allowed",
		},
	})
}

func TestIntentionEndpoints(t *testing.T) {
	ixn := &structs.Intention{SourceNS: "default", SourceName: "web", DestinationNS: "default", DestinationName: "db",
		SourceType: "consul", Action: "allow", Precedence: 9, RaftIndex: structs.RaftIndex{CreateIndex: 2, ModifyIndex: 2}}
	runCases(t, []apiCase{
		{
			name: "list empty", path: "/v1/connect/intentions",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodIntentionList.Name()] = structs.IndexedIntentions{QueryMeta: meta(3)}
			},
			wantCode: 200, wantBody: `[]`, wantJSON: true, wantHeaders: readHeaders("3"),
			wantCalls: []rpcCall{{structs.MethodIntentionList.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}},
		},
		{
			name: "exact get", path: "/v1/connect/intentions/exact?source=web&destination=default/db",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodIntentionGet.Name()] = structs.IndexedIntentions{Intentions: structs.Intentions{ixn}, QueryMeta: meta(2)}
			},
			wantCode: 200, wantJSON: true,
			wantBody: `{"SourceNS":"default","SourceName":"web","DestinationNS":"default","DestinationName":"db","SourceType":"consul","Action":"allow","Precedence":9,"CreateIndex":2,"ModifyIndex":2}`,
			wantCalls: []rpcCall{{structs.MethodIntentionGet.Name(), structs.IntentionQueryRequest{
				Exact: &structs.IntentionQueryExact{SourceName: "web", DestinationName: "db"}, QueryOptions: qo()}}},
		},
		{
			name: "exact get missing", path: "/v1/connect/intentions/exact?source=web&destination=db",
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodIntentionGet.Name()] = structs.ErrIntentionNotFound
			},
			wantCode: 404, wantBody: "Intention not found", anyCalls: true,
		},
		{
			// Consul's text comes from its UUID index; clients look for
			// "UUID" in it.
			name: "get by malformed id", path: "/v1/connect/intentions/hello",
			wantCode: 400, wantBody: `failed intention lookup: index error: invalid UUID "hello": uuid string is wrong length`,
		},
		{
			name: "exact without source", path: "/v1/connect/intentions/exact?destination=db",
			wantCode: 500, wantBody: "required query parameter 'source' not set",
		},
		{
			name: "exact put", method: http.MethodPut, path: "/v1/connect/intentions/exact?source=web&destination=db",
			body:     `{"SourceName":"ignored","Action":"deny","Description":"d","ID":"legacy"}`,
			wantCode: 200, wantBody: `true`, wantJSON: true,
			wantCalls: []rpcCall{{structs.MethodIntentionApply.Name(), structs.IntentionRequest{Op: structs.IntentionOpUpsert,
				Intention: &structs.Intention{SourceNS: "default", SourceName: "web", DestinationNS: "default", DestinationName: "db",
					Action: "deny", Description: "d"}, WriteRequest: wr()}}},
		},
		{
			name: "exact put meta refused by the server", method: http.MethodPut, path: "/v1/connect/intentions/exact?source=web&destination=db",
			body: `{"Action":"allow","Meta":{"a":"b"}}`,
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodIntentionApply.Name()] = errors.New("Meta must not be specified")
			},
			wantCode: 500, wantBody: "Meta must not be specified", anyCalls: true,
		},
		{
			name: "exact put bad body", method: http.MethodPut, path: "/v1/connect/intentions/exact?source=web&destination=db",
			body: `{"Action":5}`, wantCode: 400, skipBody: true,
		},
		{
			name: "exact delete", method: http.MethodDelete, path: "/v1/connect/intentions/exact?source=*&destination=db",
			wantCode: 200, wantBody: `true`, wantJSON: true,
			wantCalls: []rpcCall{{structs.MethodIntentionApply.Name(), structs.IntentionRequest{Op: structs.IntentionOpDelete,
				Intention: &structs.Intention{SourceName: "*", DestinationName: "db"}, WriteRequest: wr()}}},
		},
		{
			name: "namespace is enterprise", path: "/v1/connect/intentions/exact?source=other/web&destination=db",
			wantCode: 500, wantBody: `source "other/web" is invalid: Namespaces are a Consul Enterprise feature`,
		},
		{
			name: "match", path: "/v1/connect/intentions/match?by=destination&name=db&name=x",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodIntentionMatch.Name()] = structs.IndexedIntentionMatches{Matches: []structs.Intentions{{ixn}, nil}, QueryMeta: meta(2)}
			},
			wantCode: 200, wantJSON: true,
			wantBody: `{"db":[{"SourceNS":"default","SourceName":"web","DestinationNS":"default","DestinationName":"db","SourceType":"consul","Action":"allow","Precedence":9,"CreateIndex":2,"ModifyIndex":2}],"x":[]}`,
			wantCalls: []rpcCall{{structs.MethodIntentionMatch.Name(), structs.IntentionQueryRequest{
				Match: &structs.IntentionQueryMatch{Type: "destination", Names: []string{"db", "x"}}, QueryOptions: qo()}}},
		},
		{
			name: "match bad by", path: "/v1/connect/intentions/match?by=both&name=db",
			wantCode: 500, wantBody: "'by' parameter must be one of 'source' or 'destination'",
		},
		{
			name: "check", path: "/v1/connect/intentions/check?source=web&destination=db",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodIntentionCheck.Name()] = structs.IntentionQueryCheckResponse{Allowed: true}
			},
			wantCode: 200, wantBody: `{"Allowed":true}`, wantJSON: true,
			wantCalls: []rpcCall{{structs.MethodIntentionCheck.Name(), structs.IntentionQueryRequest{
				Check: &structs.IntentionQueryCheck{SourceName: "web", DestinationName: "db", SourceType: "consul"}, QueryOptions: qo()}}},
		},
	})
}

func TestDiscoveryChainEndpoint(t *testing.T) {
	chain := &structs.CompiledDiscoveryChain{ServiceName: "web", Namespace: "default", Partition: "default", Datacenter: "dc1",
		Protocol: "tcp", StartNode: "resolver:web.default.default.dc1"}
	reply := func(f *fakeRPC, _ *Config) {
		f.replies[structs.MethodDiscoveryChainGet.Name()] = structs.DiscoveryChainResponse{Chain: chain, QueryMeta: meta(6)}
	}
	runCases(t, []apiCase{
		{
			name: "get", path: "/v1/discovery-chain/web?compile-dc=dc2", setup: reply,
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("6"),
			wantBody:  `{"Chain":{"ServiceName":"web","Namespace":"default","Partition":"default","Datacenter":"dc1","Protocol":"tcp","StartNode":"resolver:web.default.default.dc1"}}`,
			wantCalls: []rpcCall{{structs.MethodDiscoveryChainGet.Name(), structs.DiscoveryChainRequest{Name: "web", EvaluateInDatacenter: "dc2", QueryOptions: qo()}}},
		},
		{
			name: "post overrides", method: http.MethodPost, path: "/v1/discovery-chain/web", setup: reply,
			body:     `{"override_protocol":"http","OverrideConnectTimeout":"3s","OverrideMeshGateway":{"Mode":"local"}}`,
			wantCode: 200, skipBody: true,
			wantCalls: []rpcCall{{structs.MethodDiscoveryChainGet.Name(), structs.DiscoveryChainRequest{Name: "web", OverrideProtocol: "http",
				OverrideConnectTimeout: 3 * time.Second, OverrideMeshGateway: structs.MeshGatewayConfig{Mode: "local"}, QueryOptions: qo()}}},
		},
		{
			name: "post timeout in nanoseconds", method: http.MethodPost, path: "/v1/discovery-chain/web", setup: reply,
			body: `{"OverrideConnectTimeout":1000}`, wantCode: 200, skipBody: true,
			wantCalls: []rpcCall{{structs.MethodDiscoveryChainGet.Name(), structs.DiscoveryChainRequest{Name: "web", OverrideConnectTimeout: 1000, QueryOptions: qo()}}},
		},
		{
			name: "post bad mesh gateway", method: http.MethodPost, path: "/v1/discovery-chain/web",
			body: `{"OverrideMeshGateway":{"Mode":"sideways"}}`, wantCode: 400, wantBody: "Invalid OverrideMeshGateway.Mode parameter",
		},
		{
			name: "post bad body", method: http.MethodPost, path: "/v1/discovery-chain/web",
			body: `[`, wantCode: 400, skipBody: true,
		},
		{name: "missing name", path: "/v1/discovery-chain/", wantCode: 400, wantBody: "Missing chain name"},
	})
}

// TestConfigEntryGetShapesAll checks that every kind renders as JSON and
// decodes back through the PUT decoder (what the CLI and clients send).
func TestConfigEntryGetShapesAll(t *testing.T) {
	for _, kind := range structs.ConfigEntryKinds {
		e, _ := structs.MakeConfigEntry(kind, "x")
		s, _, _ := newTestServer(t, func(f *fakeRPC, _ *Config) {
			f.replies[structs.MethodConfigEntryGet.Name()] = structs.ConfigEntryResponse{Entry: e, QueryMeta: meta(2)}
		})
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/config/"+kind+"/x", nil))
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", kind, rec.Code, rec.Body)
		}
		back, err := structs.DecodeConfigEntryJSON(rec.Body.Bytes())
		if err != nil || back.GetKind() != kind {
			t.Fatalf("%s: JSON %s does not decode back: %v", kind, rec.Body, err)
		}
	}
}
