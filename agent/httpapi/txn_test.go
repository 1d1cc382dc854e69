package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
			name: "catalog operations are refused", method: put, path: "/v1/txn", body: `[{"Node":{"Verb":"set","Node":{"Node":"n"}}}]`,
			wantCode: 400, wantBody: "Failed to parse body: only KV operations are supported in transactions",
		},
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

func TestTxnValueLimit(t *testing.T) {
	// The body limit equals the value limit by default, so only a decoded
	// op can carry an oversized value: check the conversion directly.
	_, _, err := convertTxnOps([]*txnOpJSON{{KV: &txnKVOpJSON{Verb: structs.KVSet, Key: "big", Value: make([]byte, kvMaxValueSize+1)}}})
	rec := httptest.NewRecorder()
	s, _, _ := newTestServer(t, nil)
	s.writeError(rec, httptest.NewRequest(http.MethodPut, "/v1/txn", nil), err)
	want := `Value for key "big" is too large (524289 > 524288 bytes)`
	if rec.Code != http.StatusRequestEntityTooLarge || rec.Body.String() != want {
		t.Fatalf("got %d %q, want 413 %q", rec.Code, rec.Body.String(), want)
	}
}
