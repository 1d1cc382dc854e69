package httpapi

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestSnapshot(t *testing.T) {
	save := structs.MethodSnapshotSave.Name()
	restore := structs.MethodSnapshotRestore.Name()
	archive := func(f *fakeRPC, _ *Config) {
		f.replies[save] = structs.SnapshotSaveResponse{Archive: []byte("archive bytes"), QueryMeta: meta(57)}
	}
	runCases(t, []apiCase{
		{
			name: "save", path: "/v1/snapshot", setup: archive,
			wantCode: 200, wantBody: "archive bytes",
			wantHeaders: map[string]string{"X-Consul-Index": "57", "X-Consul-KnownLeader": "true", "Content-Type": "application/x-gzip", "Content-Length": "13"},
			wantCalls:   []rpcCall{{save, structs.SnapshotSaveRequest{QueryOptions: qo()}}},
		},
		{
			// The endpoint does not block: ?index and ?wait are dropped.
			name: "save stale from dc2", path: "/v1/snapshot?stale&dc=dc2&index=5&wait=1s", setup: archive,
			wantCode: 200, wantBody: "archive bytes",
			wantCalls: []rpcCall{{save, structs.SnapshotSaveRequest{QueryOptions: structs.QueryOptions{Datacenter: "dc2", AllowStale: true}}}},
		},
		{
			name: "save without a leader", path: "/v1/snapshot",
			setup:    func(f *fakeRPC, _ *Config) { f.errs[save] = structs.ErrNoLeader },
			wantCode: 500, wantBody: "No cluster leader", anyCalls: true,
		},
		{
			name: "restore", method: http.MethodPut, path: "/v1/snapshot?dc=dc1", body: "archive bytes",
			wantCode: 200, wantBody: "",
			wantCalls: []rpcCall{{restore, structs.SnapshotRestoreRequest{Archive: []byte("archive bytes"), WriteRequest: wr()}}},
		},
		{
			name: "restore of a damaged archive", method: http.MethodPut, path: "/v1/snapshot", body: "junk",
			setup: func(f *fakeRPC, _ *Config) {
				f.errs[restore] = fmt.Errorf("%w: snapshot: corrupt archive: gzip: invalid header", structs.ErrSnapshotInvalid)
			},
			wantCode: 500, wantBody: "invalid snapshot: snapshot: corrupt archive: gzip: invalid header", anyCalls: true,
		},
		{name: "DELETE is 405", method: http.MethodDelete, path: "/v1/snapshot", wantCode: 405, wantBody: "method DELETE not allowed"},
	})
}

func TestSnapshotRestoreTooLarge(t *testing.T) {
	s, f, _ := newTestServer(t, nil)
	req := httptest.NewRequest(http.MethodPut, "/v1/snapshot", strings.NewReader(strings.Repeat("x", structs.SnapshotMaxSize+1)))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "too large") {
		t.Fatalf("status %d body %q, want 413", rec.Code, rec.Body.String())
	}
	if calls := f.recorded(); len(calls) != 0 {
		t.Fatalf("an oversized body reached the servers: %v", calls)
	}
}
