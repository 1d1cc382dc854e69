package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestKVGet(t *testing.T) {
	entry := &structs.DirEntry{Key: "app/config", Flags: 3, Value: []byte("hello"), RaftIndex: structs.RaftIndex{CreateIndex: 5, ModifyIndex: 9}}
	found := func(f *fakeRPC, _ *Config) {
		f.replies[structs.MethodKVSGet.Name()] = structs.IndexedDirEntries{Entries: structs.DirEntries{entry}, QueryMeta: meta(9)}
	}
	missing := func(f *fakeRPC, _ *Config) {
		f.replies[structs.MethodKVSGet.Name()] = structs.IndexedDirEntries{QueryMeta: meta(0)}
		f.replies[structs.MethodKVSList.Name()] = structs.IndexedDirEntries{QueryMeta: meta(14)}
		f.replies[structs.MethodKVSListKeys.Name()] = structs.IndexedKeyList{QueryMeta: meta(15)}
	}
	get := func(key string, q structs.QueryOptions) []rpcCall {
		return []rpcCall{{structs.MethodKVSGet.Name(), structs.KeyRequest{Key: key, QueryOptions: q}}}
	}
	list := func(method, prefix, sep string) []rpcCall {
		return []rpcCall{{method, structs.KeyListRequest{Prefix: prefix, Seperator: sep, QueryOptions: qo()}}}
	}
	runCases(t, []apiCase{
		{
			name: "one key", path: "/v1/kv/app/config?index=8&wait=60000ms&consistent", setup: found,
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("9"),
			wantBody:  `[{"LockIndex":0,"Key":"app/config","Flags":3,"Value":"aGVsbG8=","CreateIndex":5,"ModifyIndex":9}]`,
			wantCalls: get("app/config", structs.QueryOptions{Datacenter: testDC, MinQueryIndex: 8, MaxQueryTime: 60_000_000_000, RequireConsistent: true}),
		},
		{
			name: "missing key is 404 with an empty body and the read headers", path: "/v1/kv/nope", setup: missing,
			wantCode: 404, wantBody: "",
			wantHeaders: map[string]string{"X-Consul-Index": "1", "X-Consul-LastContact": "0", "X-Consul-KnownLeader": "true", "Content-Type": ""},
			wantCalls:   get("nope", qo()),
		},
		{
			name: "raw value", path: "/v1/kv/app/config?raw", setup: found,
			wantCode: 200, wantBody: "hello",
			wantHeaders: map[string]string{
				"Content-Type": "text/plain", "X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox",
				"Content-Length": "5", "X-Consul-Index": "9",
			},
			wantCalls: get("app/config", qo()),
		},
		{
			name: "raw miss is still 404", path: "/v1/kv/nope?raw", setup: missing,
			wantCode: 404, wantBody: "", wantHeaders: map[string]string{"X-Consul-Index": "1"}, anyCalls: true,
		},
		{
			name: "recurse at the root", path: "/v1/kv/?recurse",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodKVSList.Name()] = structs.IndexedDirEntries{Entries: structs.DirEntries{entry, {Key: "b"}}, QueryMeta: meta(10)}
			},
			wantCode: 200, wantJSON: true, wantHeaders: readHeaders("10"),
			wantBody: `[{"LockIndex":0,"Key":"app/config","Flags":3,"Value":"aGVsbG8=","CreateIndex":5,"ModifyIndex":9},` +
				`{"LockIndex":0,"Key":"b","Flags":0,"Value":null,"CreateIndex":0,"ModifyIndex":0}]`,
			wantCalls: list(structs.MethodKVSList.Name(), "", ""),
		},
		{
			name: "recurse on a missing prefix is 404", path: "/v1/kv/ghost/?recurse", setup: missing,
			wantCode: 404, wantBody: "", wantHeaders: map[string]string{"X-Consul-Index": "14"},
			wantCalls: list(structs.MethodKVSList.Name(), "ghost/", ""),
		},
		{
			name: "keys with separator", path: "/v1/kv/app/?keys&separator=/",
			setup: func(f *fakeRPC, _ *Config) {
				f.replies[structs.MethodKVSListKeys.Name()] = structs.IndexedKeyList{Keys: []string{"app/a", "app/sub/"}, QueryMeta: meta(11)}
			},
			wantCode: 200, wantBody: `["app/a","app/sub/"]`, wantHeaders: readHeaders("11"),
			wantCalls: list(structs.MethodKVSListKeys.Name(), "app/", "/"),
		},
		{
			name: "keys with the historic spelling", path: "/v1/kv/app/?keys&seperator=:", setup: missing,
			wantCode: 404, wantBody: "", wantHeaders: map[string]string{"X-Consul-Index": "15"},
			wantCalls: list(structs.MethodKVSListKeys.Name(), "app/", ":"),
		},
		{
			name: "keys at an empty root is []", path: "/v1/kv/?keys", setup: missing,
			wantCode: 200, wantBody: "[]", wantCalls: list(structs.MethodKVSListKeys.Name(), "", ""),
		},
		{name: "missing key name", path: "/v1/kv/", wantCode: 400, wantBody: "Missing key name"},
		{
			name: "backend error still has read headers", path: "/v1/kv/a",
			setup:    func(f *fakeRPC, _ *Config) { f.errs[structs.MethodKVSGet.Name()] = structs.ErrNoLeader },
			wantCode: 500, wantBody: "No cluster leader", wantHeaders: map[string]string{"X-Consul-Index": "1"}, anyCalls: true,
		},
	})
}

func TestKVKeyValidation(t *testing.T) {
	putKey := func(key string) []rpcCall {
		return []rpcCall{{structs.MethodKVSApply.Name(), structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: key, Value: []byte("v")}, WriteRequest: wr()}}}
	}
	put := http.MethodPut
	runCases(t, []apiCase{
		{name: "space inside", method: put, path: "/v1/kv/acme%20-%20host", body: "v", wantCode: 200, wantBody: "true", wantCalls: putKey("acme - host")},
		{name: "colon, percent, non-ASCII", method: put, path: "/v1/kv/esm:x%25y%C3%A7", body: "v", wantCode: 200, wantBody: "true", wantCalls: putKey("esm:x%yç")},
		{name: "encoded slash is a literal key", method: put, path: "/v1/kv/foo/baz%252Fqux", body: "v", wantCode: 200, wantBody: "true", wantCalls: putKey("foo/baz%2Fqux")},
		{name: "dots inside a segment", method: put, path: "/v1/kv/con..fig", body: "v", wantCode: 200, wantBody: "true", wantCalls: putKey("con..fig")},
		{name: "trailing space", method: put, path: "/v1/kv/foo%20", body: "v", wantCode: 400, wantBody: "invalid key name, leading or trailing spaces are not allowed"},
		{name: "leading space on GET", path: "/v1/kv/%20foo", wantCode: 400, wantBody: "invalid key name, leading or trailing spaces are not allowed"},
		{name: "encoded traversal", method: put, path: "/v1/kv/a%2F..%2Fb", body: "v", wantCode: 400, wantBody: "invalid key name, path traversal is not allowed"},
		{name: "encoded dots", path: "/v1/kv/%2e%2e/etc", wantCode: 400, wantBody: "invalid key name, path traversal is not allowed"},
		{name: "backslash traversal", method: http.MethodDelete, path: "/v1/kv/..%5Cetc", wantCode: 400, wantBody: "invalid key name, path traversal is not allowed"},
		{name: "double-encoded traversal", path: "/v1/kv/..%252fetc", wantCode: 400, wantBody: "invalid key name, encoded path traversal is not allowed"},
		{name: "newline", method: put, path: "/v1/kv/a%0Ab", body: "v", wantCode: 400, wantBody: ""},
	})
}

func TestKVPut(t *testing.T) {
	put := http.MethodPut
	apply := func(op structs.KVOp, mut func(*structs.DirEntry)) []rpcCall {
		d := structs.DirEntry{Key: "k", Value: []byte("v")}
		if mut != nil {
			mut(&d)
		}
		return []rpcCall{{structs.MethodKVSApply.Name(), structs.KVSRequest{Op: op, DirEnt: d, WriteRequest: wr()}}}
	}
	reply := func(ok bool) func(*fakeRPC, *Config) {
		return func(f *fakeRPC, _ *Config) { f.replies[structs.MethodKVSApply.Name()] = ok }
	}
	tooBig := fmt.Sprintf("Request body(%d bytes) too large, max size: 524288 bytes. See %s.", kvMaxValueSize+1, kvSizeDocURL)
	runCases(t, []apiCase{
		{
			name: "set answers true whatever the backend says", method: put, path: "/v1/kv/k", body: "v", setup: reply(false),
			wantCode: 200, wantBody: "true", wantHeaders: map[string]string{"X-Consul-Index": "", "Content-Type": "application/json"},
			wantCalls: apply(structs.KVSet, nil),
		},
		{
			name: "datacenter and token", method: put, path: "/v1/kv/k?dc=dc9", body: "v",
			headers: map[string]string{"X-Consul-Token": "t"}, wantCode: 200, wantBody: "true",
			wantCalls: []rpcCall{{structs.MethodKVSApply.Name(), structs.KVSRequest{
				Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "k", Value: []byte("v")},
				WriteRequest: structs.WriteRequest{Datacenter: "dc9", Token: "t"},
			}}},
		},
		{
			name: "empty body stores a nil value", method: put, path: "/v1/kv/k", wantCode: 200, wantBody: "true",
			wantCalls: apply(structs.KVSet, func(d *structs.DirEntry) { d.Value = nil }),
		},
		{
			name: "failed CAS with flags", method: put, path: "/v1/kv/k?flags=42&cas=7", body: "v", setup: reply(false),
			wantCode: 200, wantBody: "false",
			wantCalls: apply(structs.KVCAS, func(d *structs.DirEntry) { d.Flags, d.ModifyIndex = 42, 7 }),
		},
		{
			name: "acquire", method: put, path: "/v1/kv/k?acquire=s1", body: "v", setup: reply(true),
			wantCode: 200, wantBody: "true", wantCalls: apply(structs.KVLock, func(d *structs.DirEntry) { d.Session = "s1" }),
		},
		{
			name: "release refused", method: put, path: "/v1/kv/k?release=s1", body: "v", setup: reply(false),
			wantCode: 200, wantBody: "false", wantCalls: apply(structs.KVUnlock, func(d *structs.DirEntry) { d.Session = "s1" }),
		},
		{name: "cas with acquire", method: put, path: "/v1/kv/k?cas=1&acquire=s", body: "v", wantCode: 400, wantBody: "Conflicting flags: acquire=s&cas=1\n"},
		{name: "bad flags", method: put, path: "/v1/kv/k?flags=abc", body: "v", wantCode: 500, wantBody: `strconv.ParseUint: parsing "abc": invalid syntax`},
		{name: "bad cas", method: put, path: "/v1/kv/k?cas=-1", body: "v", wantCode: 500, wantBody: `strconv.ParseUint: parsing "-1": invalid syntax`},
		{name: "missing key", method: put, path: "/v1/kv/", body: "v", wantCode: 400, wantBody: "Missing key name"},
		{name: "stale with consistent on a write", method: put, path: "/v1/kv/k?stale&consistent", body: "v", wantCode: 400, wantBody: "Cannot specify ?stale with ?consistent, conflicting semantics."},
		{name: "value over 512 KiB", method: put, path: "/v1/kv/k", body: strings.Repeat("x", kvMaxValueSize+1), wantCode: 413, wantBody: tooBig},
		{
			name: "value of exactly 512 KiB", method: put, path: "/v1/kv/k", body: strings.Repeat("x", kvMaxValueSize),
			wantCode: 200, wantBody: "true",
			wantCalls: apply(structs.KVSet, func(d *structs.DirEntry) { d.Value = bytes.Repeat([]byte("x"), kvMaxValueSize) }),
		},
	})
}

// TestKVPutChunkedOversize sends a body without a length, which Consul's
// Content-Length check would miss.
func TestKVPutChunkedOversize(t *testing.T) {
	s, f, _ := newTestServer(t, nil)
	req := httptest.NewRequest(http.MethodPut, "/v1/kv/k", struct{ *strings.Reader }{strings.NewReader(strings.Repeat("x", kvMaxValueSize+10))})
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	want := fmt.Sprintf("Request body(%d bytes) too large, max size: 524288 bytes. See %s.", kvMaxValueSize+10, kvSizeDocURL)
	if rec.Code != http.StatusRequestEntityTooLarge || rec.Body.String() != want {
		t.Fatalf("got %d %q, want 413 %q", rec.Code, rec.Body.String(), want)
	}
	if calls := f.recorded(); len(calls) != 0 {
		t.Fatalf("oversized value reached the backend: %v", calls)
	}
}

func TestKVDelete(t *testing.T) {
	del := http.MethodDelete
	apply := func(op structs.KVOp, key string, cas uint64) []rpcCall {
		return []rpcCall{{structs.MethodKVSApply.Name(), structs.KVSRequest{Op: op, DirEnt: structs.DirEntry{Key: key, RaftIndex: structs.RaftIndex{ModifyIndex: cas}}, WriteRequest: wr()}}}
	}
	runCases(t, []apiCase{
		{name: "delete a missing key is true", method: del, path: "/v1/kv/k", wantCode: 200, wantBody: "true", wantCalls: apply(structs.KVDelete, "k", 0)},
		{name: "delete a tree at the root", method: del, path: "/v1/kv/?recurse", wantCode: 200, wantBody: "true", wantCalls: apply(structs.KVDeleteTree, "", 0)},
		{
			name: "delete with cas answers the outcome", method: del, path: "/v1/kv/k?cas=3",
			setup:    func(f *fakeRPC, _ *Config) { f.replies[structs.MethodKVSApply.Name()] = false },
			wantCode: 200, wantBody: "false", wantCalls: apply(structs.KVDeleteCAS, "k", 3),
		},
		{name: "recurse with cas", method: del, path: "/v1/kv/k?recurse&cas=3", wantCode: 400, wantBody: "Conflicting flags: cas=3&recurse=\n"},
		{name: "missing key", method: del, path: "/v1/kv/", wantCode: 400, wantBody: "Missing key name"},
		{
			name: "backend refuses", method: del, path: "/v1/kv/k",
			setup:    func(f *fakeRPC, _ *Config) { f.errs[structs.MethodKVSApply.Name()] = structs.ErrPermissionDenied },
			wantCode: 403, wantBody: "Permission denied", anyCalls: true,
		},
	})
}
