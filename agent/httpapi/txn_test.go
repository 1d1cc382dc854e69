package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func TestTxn(t *testing.T) {
	put := http.MethodPut
	kvOp := func(verb structs.KVOp, key string, value []byte, flags, index uint64, session string) *structs.TxnOp {
		return &structs.TxnOp{KV: &structs.TxnKVOp{Verb: verb, DirEnt: structs.DirEntry{
			Key: key, Value: value, Flags: flags, Session: session, RaftIndex: structs.RaftIndex{ModifyIndex: index},
		}}}
	}
	committed := func(f *fakeRPC, _ *Config) {
		f.replies[structs.MethodTxnApply.Name()] = structs.TxnResponse{Results: structs.TxnResults{
			{KV: &structs.DirEntry{Key: "k", Flags: 1, RaftIndex: structs.RaftIndex{CreateIndex: 20, ModifyIndex: 20}}},
		}}
	}
	manyOps := func(n int) string {
		ops := make([]string, n)
		for i := range ops {
			ops[i] = fmt.Sprintf(`{"KV":{"Verb":"get","Key":"k%d"}}`, i)
		}
		return "[" + strings.Join(ops, ",") + "]"
	}
	runCases(t, []apiCase{
		{
			name: "writes go through Txn.Apply", method: put, path: "/v1/txn?token=t", setup: committed,
			body: `[{"KV":{"Verb":"set","Key":"k","Value":"aGk=","Flags":1,"Index":0,"Session":""}},
				{"kv":{"verb":"check-index","key":"k2","index":5}}, {}]`,
			wantCode: 200, wantJSON: true,
			wantBody:    `{"Results":[{"KV":{"LockIndex":0,"Key":"k","Flags":1,"Value":null,"CreateIndex":20,"ModifyIndex":20}}],"Errors":null}`,
			wantHeaders: map[string]string{"X-Consul-Index": "", "X-Consul-KnownLeader": ""},
			wantCalls: []rpcCall{{structs.MethodTxnApply.Name(), structs.TxnRequest{
				Ops:          structs.TxnOps{kvOp(structs.KVSet, "k", []byte("hi"), 1, 0, ""), kvOp(structs.KVCheckIndex, "k2", nil, 0, 5, "")},
				WriteRequest: structs.WriteRequest{Datacenter: testDC, Token: "t"},
			}}},
		},
		{
			name: "read-only goes through Txn.Read", method: put, path: "/v1/txn?stale",
			body: `[{"KV":{"Verb":"get","Key":"k"}},{"KV":{"Verb":"check-session","Key":"k","Session":"s"}}]`,
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodTxnRead.Name()] = structs.TxnResponse{
					Results:   structs.TxnResults{{KV: &structs.DirEntry{Key: "k", Value: []byte("v")}}},
					QueryMeta: structs.QueryMeta{Index: 30, LastContact: 2_000_000, KnownLeader: true},
				}
			},
			wantCode: 200, wantJSON: true,
			wantBody:    `{"Results":[{"KV":{"LockIndex":0,"Key":"k","Flags":0,"Value":"dg==","CreateIndex":0,"ModifyIndex":0}}],"Errors":null}`,
			wantHeaders: map[string]string{"X-Consul-LastContact": "2", "X-Consul-KnownLeader": "true", "X-Consul-Index": ""},
			wantCalls: []rpcCall{{structs.MethodTxnRead.Name(), structs.TxnReadRequest{
				Ops:          structs.TxnOps{kvOp(structs.KVGet, "k", nil, 0, 0, ""), kvOp(structs.KVCheckSession, "k", nil, 0, 0, "s")},
				QueryOptions: structs.QueryOptions{Datacenter: testDC, AllowStale: true},
			}}},
		},
		{
			name: "rolled back is 409 with null results", method: put, path: "/v1/txn",
			body: `[{"KV":{"Verb":"set","Key":"a"}},{"KV":{"Verb":"cas","Key":"b","Index":3}}]`,
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodTxnApply.Name()] = structs.TxnResponse{
					Results: structs.TxnResults{{KV: &structs.DirEntry{Key: "a"}}},
					Errors:  structs.TxnErrors{{OpIndex: 1, What: `failed to set key "b", index is stale`}},
				}
			},
			wantCode: 409, wantJSON: true, anyCalls: true,
			wantBody:    `{"Results":null,"Errors":[{"OpIndex":1,"What":"failed to set key \"b\", index is stale"}]}`,
			wantHeaders: map[string]string{"Content-Type": "application/json"},
		},
		{
			name: "128 operations are fine", method: put, path: "/v1/txn", body: manyOps(128),
			wantCode: 200, wantBody: `{"Results":null,"Errors":null}`, anyCalls: true,
		},
		{name: "129 operations are too many", method: put, path: "/v1/txn", body: manyOps(129), wantCode: 413, wantBody: "Transaction contains too many operations (129 > 128)"},
		{
			name: "body too large", method: put, path: "/v1/txn", body: `[{"KV":{"Verb":"set","Key":"k","Value":"` + strings.Repeat("A", kvMaxValueSize) + `"}}]`,
			wantCode: 413, wantBody: "Request body too large, max size: 524288 bytes",
		},
		{name: "not a list", method: put, path: "/v1/txn", body: `{"KV":{}}`, wantCode: 400, wantBody: "Failed to parse body: json: cannot unmarshal object into Go value of type []*httpapi.txnOpJSON"},
		{name: "bad base64", method: put, path: "/v1/txn", body: `[{"KV":{"Verb":"set","Key":"k","Value":"!!"}}]`, wantCode: 400, wantBody: "Failed to parse body: illegal base64 data at input byte 0"},
		{name: "empty body", method: put, path: "/v1/txn", wantCode: 400, wantBody: "Failed to parse body: EOF"},
		{
			// Consul's sample payload, with a session operation (which
			// Consul's API does not have, so it is skipped) and a node
			// without a datacenter (it gets the agent's).
			name: "catalog writes go through Txn.Apply", method: put, path: "/v1/txn",
			body: `[{"Node":{"Verb":"set","Node":{"ID":"67539c9d-b948-ba67-edd4-d07a676d6673","Node":"bar","Address":"192.168.0.1","Meta":{"instance_type":"m2.large"}}}},
				{"Service":{"Verb":"delete","Node":"foo","Service":{"ID":"db1","Service":"db"}}},
				{"Session":{"Verb":"delete","Session":{"ID":"s"}}},
				{"Check":{"Verb":"cas","Check":{"Node":"bar","CheckID":"service:web1","Name":"Web HTTP Check","Status":"critical","ServiceID":"web1",
					"Definition":{"HTTP":"http://localhost:8080","Interval":"10s"},"ModifyIndex":22}}}]`,
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodTxnApply.Name()] = structs.TxnResponse{Results: structs.TxnResults{
					{Node: &structs.Node{Node: "bar", Address: "192.168.0.1", Datacenter: testDC, RaftIndex: structs.RaftIndex{CreateIndex: 32, ModifyIndex: 32}}},
					{Service: &structs.NodeService{ID: "web1", Service: "web", Port: 80}},
					{Check: &structs.HealthCheck{Node: "bar", CheckID: "service:web1", Status: "critical", RaftIndex: structs.RaftIndex{CreateIndex: 22, ModifyIndex: 35}}},
				}}
			},
			wantCode: 200, wantJSON: true,
			wantBody: `{"Results":[
				{"Node":{"ID":"","Node":"bar","Address":"192.168.0.1","Datacenter":"dc1","TaggedAddresses":null,"Meta":null,"CreateIndex":32,"ModifyIndex":32}},
				{"Service":{"ID":"web1","Service":"web","Tags":null,"Address":"","Meta":null,"Port":80,"EnableTagOverride":false,
					"Proxy":{"MeshGateway":{},"Expose":{}},
					"Connect":{},"CreateIndex":0,"ModifyIndex":0}},
				{"Check":{"Node":"bar","CheckID":"service:web1","Name":"","Status":"critical","Notes":"","Output":"","ServiceID":"","ServiceName":"","ServiceTags":null,
					"Type":"","Interval":"","Timeout":"","ExposedPort":0,"Definition":{},"CreateIndex":22,"ModifyIndex":35}}],"Errors":null}`,
			wantCalls: []rpcCall{{structs.MethodTxnApply.Name(), structs.TxnRequest{
				Ops: structs.TxnOps{
					{Node: &structs.TxnNodeOp{Verb: structs.CatalogSet, Node: structs.Node{
						ID: "67539c9d-b948-ba67-edd4-d07a676d6673", Node: "bar", Address: "192.168.0.1", Datacenter: testDC,
						Meta: map[string]string{"instance_type": "m2.large"},
					}}},
					{Service: &structs.TxnServiceOp{Verb: structs.CatalogDelete, Node: "foo", Service: structs.NodeService{ID: "db1", Service: "db"}}},
					{Check: &structs.TxnCheckOp{Verb: structs.CatalogCAS, Check: structs.HealthCheck{
						Node: "bar", CheckID: "service:web1", Name: "Web HTTP Check", Status: "critical", ServiceID: "web1",
						Definition: structs.HealthCheckDefinition{HTTP: "http://localhost:8080", Interval: structs.Duration(10 * time.Second)},
						RaftIndex:  structs.RaftIndex{ModifyIndex: 22},
					}}},
				},
				WriteRequest: structs.WriteRequest{Datacenter: testDC},
			}}},
		},
		{
			name: "catalog gets go through Txn.Read", method: put, path: "/v1/txn?consistent",
			body: `[{"Node":{"Verb":"get","Node":{"Node":"bar","Datacenter":"dc2"}}},{"Service":{"Verb":"get","Node":"bar","Service":{"ID":"web1"}}},
				{"Check":{"Verb":"get","Check":{"Node":"bar","CheckID":"c"}}},{"KV":{"Verb":"get","Key":"k"}}]`,
			wantCode: 200, wantBody: `{"Results":null,"Errors":null}`,
			wantCalls: []rpcCall{{structs.MethodTxnRead.Name(), structs.TxnReadRequest{
				Ops: structs.TxnOps{
					{Node: &structs.TxnNodeOp{Verb: structs.CatalogGet, Node: structs.Node{Node: "bar", Datacenter: "dc2"}}},
					{Service: &structs.TxnServiceOp{Verb: structs.CatalogGet, Node: "bar", Service: structs.NodeService{ID: "web1"}}},
					{Check: &structs.TxnCheckOp{Verb: structs.CatalogGet, Check: structs.HealthCheck{Node: "bar", CheckID: "c"}}},
					kvOp(structs.KVGet, "k", nil, 0, 0, ""),
				},
				QueryOptions: structs.QueryOptions{Datacenter: testDC, RequireConsistent: true},
			}}},
		},
		{
			// As in Consul, a verb other than get is a write: the state
			// store refuses an unknown one, naming the operation.
			name: "an unknown catalog verb is sent as a write", method: put, path: "/v1/txn",
			body: `[{"KV":{"Verb":"get","Key":"k"}},{"Check":{"Verb":"frob","Check":{"Node":"n","CheckID":"c"}}}]`,
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodTxnApply.Name()] = structs.TxnResponse{
					Errors: structs.TxnErrors{{OpIndex: 1, What: `unknown Check verb "frob"`}},
				}
			},
			wantCode: 409, wantJSON: true,
			wantBody: `{"Results":null,"Errors":[{"OpIndex":1,"What":"unknown Check verb \"frob\""}]}`,
			check: func(t *testing.T, _ *httptest.ResponseRecorder, calls []rpcCall) {
				if len(calls) != 1 || calls[0].Method != structs.MethodTxnApply.Name() {
					t.Fatalf("calls %s", dump(calls))
				}
			},
			anyCalls: true,
		},
		{
			name: "a catalog field of the wrong type", method: put, path: "/v1/txn", body: `[{"Service":{"Verb":"set","Node":"n","Service":{"Port":"80"}}}]`,
			wantCode: 400, wantBody: "Failed to parse body: json: cannot unmarshal string into Go struct field NodeService.Service.Service.Port of type int",
		},
		{name: "129 catalog operations are too many", method: put, path: "/v1/txn", body: manyNodeOps(129), wantCode: 413, wantBody: "Transaction contains too many operations (129 > 128)"},
		{
			name: "key with a leading slash", method: put, path: "/v1/txn", body: `[{"KV":{"Verb":"set","Key":"/data/dev","Value":"eA=="}}]`,
			wantCode: 400, wantBody: "Invalid key in transaction: invalid key name, must not begin with a '/'",
		},
		{
			name: "backend error", method: put, path: "/v1/txn", body: `[{"KV":{"Verb":"delete-tree","Key":"p/"}}]`,
			setup:    func(f *fakeRPC, _ *Config) { f.errs[structs.MethodTxnApply.Name()] = structs.ErrNoLeader },
			wantCode: 500, wantBody: "No cluster leader", anyCalls: true,
		},
	})
}

// manyNodeOps is a body of n node gets.
func manyNodeOps(n int) string {
	ops := make([]string, n)
	for i := range ops {
		ops[i] = fmt.Sprintf(`{"Node":{"Verb":"get","Node":{"Node":"n%d"}}}`, i)
	}
	return "[" + strings.Join(ops, ",") + "]"
}

func TestTxnValueLimit(t *testing.T) {
	// The body limit equals the value limit by default, so only a decoded
	// op can carry an oversized value: check the conversion directly.
	s, _, _ := newTestServer(t, nil)
	_, _, err := s.convertTxnOps([]*txnOpJSON{{KV: &txnKVOpJSON{Verb: structs.KVSet, Key: "big", Value: make([]byte, kvMaxValueSize+1)}}})
	rec := httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest(http.MethodPut, "/v1/txn", nil), err)
	want := `Value for key "big" is too large (524289 > 524288 bytes)`
	if rec.Code != http.StatusRequestEntityTooLarge || rec.Body.String() != want {
		t.Fatalf("got %d %q, want 413 %q", rec.Code, rec.Body.String(), want)
	}
}
