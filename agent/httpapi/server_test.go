package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func TestNewValidatesConfig(t *testing.T) {
	ok := Config{RPC: &fakeRPC{}, NodeName: "n", Datacenter: "dc"}
	cases := []struct {
		name   string
		mutate func(*Config)
		ok     bool
	}{
		{"complete", func(*Config) {}, true},
		{"no RPC", func(c *Config) { c.RPC = nil }, false},
		{"no node", func(c *Config) { c.NodeName = "" }, false},
		{"no datacenter", func(c *Config) { c.Datacenter = "" }, false},
		{"negative TTL min", func(c *Config) { c.SessionTTLMin = -time.Second }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mutate(&cfg)
			_, err := New(cfg)
			if (err == nil) != tc.ok {
				t.Fatalf("New() error = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v is not ErrInvalidConfig", err)
			}
		})
	}
}

func TestQueryParameters(t *testing.T) {
	nodes := structs.IndexedNodes{QueryMeta: meta(7)}
	withNodes := func(f *fakeRPC, _ *Config) { f.replies[structs.MethodCatalogListNodes.Name()] = nodes }
	call := func(q structs.QueryOptions, metaFilter map[string]string) []rpcCall {
		return []rpcCall{{structs.MethodCatalogListNodes.Name(), structs.DCSpecificRequest{NodeMetaFilters: metaFilter, QueryOptions: q}}}
	}
	runCases(t, []apiCase{
		{
			name: "defaults", path: "/v1/catalog/nodes", setup: withNodes,
			wantCode: 200, wantBody: "[]", wantHeaders: readHeaders("7"),
			wantCalls: call(qo(), nil),
		},
		{
			name: "every option", path: "/v1/catalog/nodes?dc=dc2&stale&index=5&wait=60000ms&filter=Node+%3D%3D+x&node-meta=rack:r1&node-meta=os:linux",
			headers: map[string]string{"X-Consul-Token": "secret"}, setup: withNodes,
			wantCode: 200, wantBody: "[]",
			wantHeaders: map[string]string{"X-Consul-Effective-Consistency": "stale"},
			wantCalls: call(structs.QueryOptions{
				Datacenter: "dc2", Token: "secret", MinQueryIndex: 5, MaxQueryTime: time.Minute,
				AllowStale: true, Filter: "Node == x",
			}, map[string]string{"rack": "r1", "os": "linux"}),
		},
		{
			name: "wait as Go duration and consistent", path: "/v1/catalog/nodes?wait=60s&consistent=", setup: withNodes,
			wantCode: 200, wantBody: "[]",
			wantHeaders: map[string]string{"X-Consul-Effective-Consistency": "consistent"},
			wantCalls:   call(structs.QueryOptions{Datacenter: testDC, MaxQueryTime: time.Minute, RequireConsistent: true}, nil),
		},
		{
			name: "empty index and wait are ignored", path: "/v1/catalog/nodes?index=&wait=", setup: withNodes,
			wantCode: 200, wantBody: "[]", wantCalls: call(qo(), nil),
		},
		{
			name: "token from query beats header", path: "/v1/catalog/nodes?token=q",
			headers: map[string]string{"X-Consul-Token": "h"}, setup: withNodes,
			wantCode: 200, wantBody: "[]", wantCalls: call(structs.QueryOptions{Datacenter: testDC, Token: "q"}, nil),
		},
		{
			name: "bearer token", path: "/v1/catalog/nodes",
			headers: map[string]string{"Authorization": "Bearer b"}, setup: withNodes,
			wantCode: 200, wantBody: "[]", wantCalls: call(structs.QueryOptions{Datacenter: testDC, Token: "b"}, nil),
		},
		{
			name: "stale with consistent", path: "/v1/catalog/nodes?stale&consistent",
			wantCode: 400, wantBody: "Cannot specify ?stale with ?consistent, conflicting semantics.",
			wantHeaders: map[string]string{"X-Consul-Index": ""},
		},
		{name: "invalid index", path: "/v1/catalog/nodes?index=abc", wantCode: 400, wantBody: "Invalid index"},
		{name: "negative index", path: "/v1/catalog/nodes?index=-1", wantCode: 400, wantBody: "Invalid index"},
		{name: "invalid wait", path: "/v1/catalog/nodes?wait=soon", wantCode: 400, wantBody: "Invalid wait time"},
		{name: "wait is checked before index", path: "/v1/catalog/nodes?wait=x&index=y", wantCode: 400, wantBody: "Invalid wait time"},
		{name: "unparseable query string", path: "/v1/catalog/nodes?a=%zz", wantCode: 500, wantBody: ""},
	})
}

func TestErrorMapping(t *testing.T) {
	failWith := func(err error) func(*fakeRPC, *Config) {
		return func(f *fakeRPC, _ *Config) { f.errs[structs.MethodCatalogListNodes.Name()] = err }
	}
	call := []rpcCall{{structs.MethodCatalogListNodes.Name(), structs.DCSpecificRequest{QueryOptions: qo()}}}
	// Consul sets the read headers even when the RPC fails.
	errHeaders := map[string]string{"X-Consul-Index": "1", "X-Consul-KnownLeader": "false", "X-Consul-LastContact": "0"}
	runCases(t, []apiCase{
		{
			name: "no path to datacenter", path: "/v1/catalog/nodes", setup: failWith(structs.ErrNoDCPath),
			wantCode: 500, wantBody: "No path to datacenter", wantHeaders: errHeaders, wantCalls: call,
		},
		{
			name: "no leader", path: "/v1/catalog/nodes", setup: failWith(structs.ErrNoLeader),
			wantCode: 500, wantBody: "No cluster leader", wantCalls: call,
		},
		{
			name: "permission denied across the RPC boundary", path: "/v1/catalog/nodes",
			setup:    failWith(structs.WireError("PermissionDenied", "Permission denied: token lacks node:read")),
			wantCode: 403, wantBody: "Permission denied: token lacks node:read", wantCalls: call,
		},
		{
			name: "rate limited", path: "/v1/catalog/nodes", setup: failWith(fmt.Errorf("forwarding: %w", structs.ErrRateLimited)),
			wantCode: 429, wantBody: "forwarding: rate limit exceeded, try again later", wantCalls: call,
		},
		{
			// The server filters reads; one whose reply it cannot filter
			// (/v1/catalog/services) refuses the expression, as text
			// across the RPC boundary.
			name: "filter refused by the server", path: "/v1/catalog/services?filter=ServiceName+%3D%3D+x",
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[structs.MethodCatalogListServices.Name()] = structs.WireError(structs.ErrFilterNotSupported.Name(),
					"filter expressions are not supported: Catalog.ListServices has no filterable result")
			},
			wantCode: 500, wantBody: "filter expressions are not supported: Catalog.ListServices has no filterable result", anyCalls: true,
		},
		{
			// Consul's status and text for a malformed ?filter=, whichever
			// server found it.
			name: "malformed filter across the RPC boundary", path: "/v1/catalog/nodes?filter=foo",
			setup:    failWith(structs.WireError(structs.ErrInvalidFilter.Name(), "Failed to create boolean expression evaluator: 1:4 (3): unexpected end of expression, expected an operator")),
			wantCode: 500, wantBody: "Failed to create boolean expression evaluator: 1:4 (3): unexpected end of expression, expected an operator",
			wantHeaders: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, anyCalls: true,
		},
		{
			name: "any other error", path: "/v1/catalog/nodes", setup: failWith(errors.New("boom")),
			wantCode: 500, wantBody: "boom", wantHeaders: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, wantCalls: call,
		},
	})
}

func TestRouting(t *testing.T) {
	runCases(t, []apiCase{
		{
			name: "method not allowed", method: http.MethodPost, path: "/v1/catalog/nodes",
			wantCode: 405, wantBody: "method POST not allowed", wantHeaders: map[string]string{"Allow": "OPTIONS,GET"},
		},
		{
			name: "method not allowed on a write endpoint", method: http.MethodGet, path: "/v1/catalog/register",
			wantCode: 405, wantBody: "method GET not allowed", wantHeaders: map[string]string{"Allow": "OPTIONS,PUT"},
		},
		{
			name: "KV allows three methods", method: http.MethodPost, path: "/v1/kv/a",
			wantCode: 405, wantBody: "method POST not allowed", wantHeaders: map[string]string{"Allow": "OPTIONS,GET,PUT,DELETE"},
		},
		{
			name: "OPTIONS", method: http.MethodOptions, path: "/v1/session/create",
			wantCode: 200, wantBody: "", wantHeaders: map[string]string{"Allow": "OPTIONS,PUT"},
		},
		{name: "unknown endpoint", path: "/v1/bogus", wantCode: 404, wantBody: ""},
		{name: "root", path: "/", wantCode: 200, wantBody: "Consul Agent"},
		{name: "control character in a KV key", path: "/v1/kv/a%00b", wantCode: 400, wantBody: ""},
		{name: "tab in a service name", path: "/v1/catalog/service/web%09", wantCode: 400, wantBody: ""},
		{name: "DEL in a node name", path: "/v1/health/node/n%7F", wantCode: 400, wantBody: ""},
		{
			name: "unclean path is redirected like Consul's mux", path: "/v1/kv/a//b",
			wantCode: http.StatusTemporaryRedirect, anyCalls: true, wantHeaders: map[string]string{"Location": "/v1/kv/a/b"},
			check: func(t *testing.T, rec *httptest.ResponseRecorder, calls []rpcCall) {
				if len(calls) != 0 {
					t.Errorf("redirect made RPC calls: %v", calls)
				}
			},
			wantBody: "<a href=\"/v1/kv/a/b\">Temporary Redirect</a>.\n\n",
		},
	})
}

func TestReadHeaders(t *testing.T) {
	reply := func(m structs.QueryMeta) func(*fakeRPC, *Config) {
		return func(f *fakeRPC, _ *Config) {
			f.replies[structs.MethodCatalogListNodes.Name()] = structs.IndexedNodes{QueryMeta: m}
		}
	}
	runCases(t, []apiCase{
		{
			name: "index 0 is sent as 1", path: "/v1/catalog/nodes", setup: reply(structs.QueryMeta{}),
			wantCode: 200, wantBody: "[]", anyCalls: true,
			wantHeaders: map[string]string{
				"X-Consul-Index": "1", "X-Consul-LastContact": "0", "X-Consul-KnownLeader": "false",
				"X-Consul-Effective-Consistency": "leader", "X-Consul-Query-Backend": "blocking-query",
			},
		},
		{
			name: "last contact in whole milliseconds", path: "/v1/catalog/nodes?stale",
			setup:    reply(structs.QueryMeta{Index: 42, LastContact: 1500*time.Millisecond + 700*time.Microsecond, KnownLeader: true}),
			wantCode: 200, wantBody: "[]", anyCalls: true,
			wantHeaders: map[string]string{"X-Consul-Index": "42", "X-Consul-LastContact": "1500", "X-Consul-KnownLeader": "true"},
		},
		{
			name: "pretty", path: "/v1/catalog/nodes?pretty",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodCatalogListNodes.Name()] = structs.IndexedNodes{Nodes: structs.Nodes{{Node: "a"}}}
			},
			wantCode: 200, anyCalls: true,
			wantBody: "[\n    {\n        \"ID\": \"\",\n        \"Node\": \"a\",\n        \"Address\": \"\",\n        \"Datacenter\": \"\",\n        \"TaggedAddresses\": null,\n        \"Meta\": {},\n        \"CreateIndex\": 0,\n        \"ModifyIndex\": 0\n    }\n]\n",
		},
	})
}

func TestPanicIsRecovered(t *testing.T) {
	s, f, pl := newTestServer(t, nil)
	f.fn = func(string, any, any) error { panic("backend bug") }
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/catalog/nodes", nil))
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", rec.Code)
	}
	if p := pl.count(); len(p) != 1 {
		t.Fatalf("logged panics = %v, want exactly one", p)
	}
}
