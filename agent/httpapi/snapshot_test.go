package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestSnapshot(t *testing.T) {
	save := structs.MethodSnapshotSave.Name()
	restore := structs.MethodSnapshotRestore.Name()
	archive := func(f *fakeRPC, _ *Config) {
		f.replies[save] = structs.SnapshotSaveResponse{Archive: []byte("archive bytes"), QueryMeta: meta(57)}
	}
	// streamed stands for a server that streams: the reply first, then
	// the archive's bytes to the call's Stream.
	streamed := func(f *fakeRPC, _ *Config) {
		f.ctxFn = func(ctx context.Context, _ string, _, reply any) error {
			*reply.(*structs.SnapshotSaveResponse) = structs.SnapshotSaveResponse{QueryMeta: meta(58)}
			st := structs.StreamOf(ctx)
			if st == nil || st.Download == nil {
				return errors.New("no stream to write to")
			}
			for _, part := range []string{"streamed ", "archive"} {
				if _, err := io.WriteString(st.Download, part); err != nil {
					return err
				}
			}
			return nil
		}
	}
	var uploaded string
	reading := func(f *fakeRPC, _ *Config) {
		f.ctxFn = func(ctx context.Context, _ string, _, _ any) error {
			st := structs.StreamOf(ctx)
			if st == nil || st.Upload == nil {
				return errors.New("no stream to read")
			}
			b, err := io.ReadAll(st.Upload)
			uploaded = string(b)
			return err
		}
	}
	runCases(t, []apiCase{
		{
			name: "save", path: "/v1/snapshot", setup: archive,
			wantCode: 200, wantBody: "archive bytes",
			wantHeaders: map[string]string{"X-Consul-Index": "57", "X-Consul-KnownLeader": "true", "Content-Type": "application/x-gzip", "Content-Length": "13"},
			wantCalls:   []rpcCall{{save, structs.SnapshotSaveRequest{QueryOptions: qo()}}},
		},
		{
			name: "save streamed", path: "/v1/snapshot", setup: streamed,
			wantCode: 200, wantBody: "streamed archive",
			wantHeaders: map[string]string{"X-Consul-Index": "58", "X-Consul-KnownLeader": "true", "Content-Type": "application/x-gzip", "Content-Length": ""},
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
			name: "restore", method: http.MethodPut, path: "/v1/snapshot?dc=dc1", body: "archive bytes", setup: reading,
			wantCode: 200, wantBody: "",
			wantCalls: []rpcCall{{restore, structs.SnapshotRestoreRequest{WriteRequest: wr()}}},
			check: func(t *testing.T, _ *httptest.ResponseRecorder, _ []rpcCall) {
				if uploaded != "archive bytes" {
					t.Fatalf("the server read %q from the stream, want the body", uploaded)
				}
			},
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

// TestSnapshotRestoreStreamsLargeBody: a body over SnapshotMaxSize, the
// old single-message limit, reaches the server whole through the stream.
func TestSnapshotRestoreStreamsLargeBody(t *testing.T) {
	const size = structs.SnapshotMaxSize + 1
	s, f, _ := newTestServer(t, nil)
	var got int64
	f.ctxFn = func(ctx context.Context, _ string, _, _ any) error {
		var err error
		got, err = io.Copy(io.Discard, structs.StreamOf(ctx).Upload)
		return err
	}
	req := httptest.NewRequest(http.MethodPut, "/v1/snapshot", io.LimitReader(zeros{}, size))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || got != size {
		t.Fatalf("status %d body %q, the server read %d bytes; want 200 and %d", rec.Code, rec.Body.String(), got, size)
	}
}

// TestSnapshotSaveBrokenStream: a stream that fails after the first bytes
// cuts the response short (the connection is dropped), so that the client
// cannot take what it got for a whole archive.
func TestSnapshotSaveBrokenStream(t *testing.T) {
	s, f, _ := newTestServer(t, nil)
	f.ctxFn = func(ctx context.Context, _ string, _, reply any) error {
		*reply.(*structs.SnapshotSaveResponse) = structs.SnapshotSaveResponse{QueryMeta: meta(9)}
		if _, err := io.WriteString(structs.StreamOf(ctx).Download, "the first part"); err != nil {
			return err
		}
		return structs.ErrLeadershipLost
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/snapshot")
	if err != nil {
		// Cut before the buffered status line left: as good.
		return
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Fatalf("status %d, body %q, read error %v; want 200 and a broken body", resp.StatusCode, body, err)
	}
}

// zeros reads zero bytes forever.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
