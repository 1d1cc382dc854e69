package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/structs"
)

const (
	testNode = "node1"
	testDC   = "dc1"
)

// rpcCall is one call the fake backend received: the method and a copy of
// the value its args pointer pointed to.
type rpcCall struct {
	Method string
	Args   any
}

// fakeRPC records every call and answers with canned replies or errors per
// method. A canned reply is a value of the reply's element type (for
// *structs.IndexedNodes, a structs.IndexedNodes). With a canned error the
// canned reply is still copied in first, so that error paths can carry
// query metadata.
type fakeRPC struct {
	mu      sync.Mutex
	calls   []rpcCall
	replies map[string]any
	errs    map[string]error
	// fn, when set, answers instead of the canned maps.
	fn func(method string, args, reply any) error
	// ctxFn, when set, answers instead of fn and the maps, with the
	// call's context (which may carry a structs.Stream).
	ctxFn func(ctx context.Context, method string, args, reply any) error
}

func (f *fakeRPC) RPC(ctx context.Context, method string, args, reply any) error {
	f.mu.Lock()
	f.calls = append(f.calls, rpcCall{Method: method, Args: reflect.ValueOf(args).Elem().Interface()})
	ctxFn, fn, canned, err := f.ctxFn, f.fn, f.replies[method], f.errs[method]
	f.mu.Unlock()
	if ctxFn != nil {
		return ctxFn(ctx, method, args, reply)
	}
	if fn != nil {
		return fn(method, args, reply)
	}
	if canned != nil {
		reflect.ValueOf(reply).Elem().Set(reflect.ValueOf(canned))
	}
	return err
}

func (f *fakeRPC) recorded() []rpcCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rpcCall(nil), f.calls...)
}

// panicLog counts log records that report a recovered panic, so that tests
// (and fuzz targets) fail when the recover middleware hides one.
type panicLog struct {
	mu     sync.Mutex
	panics []string
}

func (p *panicLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicLog) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *panicLog) WithGroup(string) slog.Handler            { return p }
func (p *panicLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "panic serving request" {
		return nil
	}
	var sb strings.Builder
	r.Attrs(func(a slog.Attr) bool {
		sb.WriteString(a.String() + " ")
		return true
	})
	p.mu.Lock()
	p.panics = append(p.panics, sb.String())
	p.mu.Unlock()
	return nil
}

func (p *panicLog) count() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.panics...)
}

// newTestServer builds a Server on a fresh fake backend.
func newTestServer(t testing.TB, setup func(*fakeRPC, *Config)) (*Server, *fakeRPC, *panicLog) {
	t.Helper()
	f := &fakeRPC{replies: map[string]any{}, errs: map[string]error{}}
	pl := &panicLog{}
	cfg := Config{RPC: f, Logger: slog.New(pl), NodeName: testNode, Datacenter: testDC}
	if setup != nil {
		setup(f, &cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, f, pl
}

// apiCase is one request through the whole handler and what must come back.
type apiCase struct {
	name    string
	method  string
	path    string
	body    string
	headers map[string]string
	setup   func(*fakeRPC, *Config)

	wantCode int
	// wantBody is compared exactly, unless wantJSON is set, in which case
	// both sides are compared as decoded JSON.
	wantBody string
	wantJSON bool
	// skipBody leaves the body to check (it holds something random).
	skipBody bool
	// wantHeaders must be present with these values; "" means "absent".
	wantHeaders map[string]string
	// wantCalls are the RPCs the request must make, in order, with
	// exactly these args. nil means "no call at all".
	wantCalls []rpcCall
	// anyCalls skips the wantCalls comparison.
	anyCalls bool
	// check runs extra assertions.
	check func(t *testing.T, rec *httptest.ResponseRecorder, calls []rpcCall)
}

func runCases(t *testing.T, cases []apiCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, f, pl := newTestServer(t, tc.setup)
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req := httptest.NewRequest(method, tc.path, body)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)

			if rec.Code != tc.wantCode {
				t.Errorf("status = %d, want %d (body %q)", rec.Code, tc.wantCode, rec.Body.String())
			}
			if tc.skipBody {
				// checked by tc.check
			} else if tc.wantJSON {
				assertJSONEqual(t, rec.Body.Bytes(), tc.wantBody)
			} else if rec.Body.String() != tc.wantBody {
				t.Errorf("body = %q, want %q", rec.Body.String(), tc.wantBody)
			}
			for k, v := range tc.wantHeaders {
				got, ok := rec.Header()[http.CanonicalHeaderKey(k)]
				switch {
				case v == "" && ok:
					t.Errorf("header %s = %q, want absent", k, got)
				case v != "" && (!ok || got[0] != v):
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			calls := f.recorded()
			if !tc.anyCalls && !reflect.DeepEqual(calls, tc.wantCalls) {
				t.Errorf("RPC calls:\n got %s\nwant %s", dump(calls), dump(tc.wantCalls))
			}
			if tc.check != nil {
				tc.check(t, rec, calls)
			}
			if p := pl.count(); len(p) > 0 {
				t.Errorf("handler panicked: %v", p)
			}
		})
	}
}

func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("response is not JSON: %v: %q", err, got)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad wantBody %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON body:\n got %s\nwant %s", bytes.TrimSpace(got), want)
	}
}

func dump(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// qo is the QueryOptions of a plain read in the test datacenter.
func qo() structs.QueryOptions { return structs.QueryOptions{Datacenter: testDC} }

// wr is the WriteRequest of a plain write in the test datacenter.
func wr() structs.WriteRequest { return structs.WriteRequest{Datacenter: testDC} }

// meta is a QueryMeta for canned replies.
func meta(index uint64) structs.QueryMeta {
	return structs.QueryMeta{Index: index, LastContact: 0, KnownLeader: true}
}

// readHeaders are the headers every read must carry for a reply at index.
func readHeaders(index string) map[string]string {
	return map[string]string{
		"X-Consul-Index":       index,
		"X-Consul-LastContact": "0",
		"X-Consul-KnownLeader": "true",
		"Content-Type":         "application/json",
	}
}

// officialClient serves h on a loopback listener for the test and returns
// the official Consul client pointed at it, and its base URL.
func officialClient(t testing.TB, h http.Handler) (*api.Client, string) {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	c, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(hs.URL, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	return c, hs.URL
}
