package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// sentRequest is what the fake agent saw.
type sentRequest struct {
	Method      string
	Path        string // escaped, as on the wire
	Query       string // raw query
	Body        string
	Token       string
	ContentType string
}

// reply is a canned answer.
type reply struct {
	status int
	body   string
}

// fakeAgent mimics the agent's HTTP API: it answers "METHOD /path" from
// its routes (404 for anything else) and records every request.
type fakeAgent struct {
	t      *testing.T
	srv    *httptest.Server
	routes map[string]reply
	mu     sync.Mutex
	reqs   []sentRequest
}

func newFakeAgent(t *testing.T, routes map[string]reply) *fakeAgent {
	f := &fakeAgent{t: t, routes: routes}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, sentRequest{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Body: string(body),
		Token: r.Header.Get("X-Consul-Token"), ContentType: r.Header.Get("Content-Type"),
	})
	f.mu.Unlock()
	rep, ok := f.routes[r.Method+" "+r.URL.Path]
	if !ok {
		rep = reply{status: http.StatusNotFound}
	}
	if rep.status == 0 {
		rep.status = http.StatusOK
	}
	w.Header().Set("X-Consul-Index", "1")
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

func (f *fakeAgent) requests() []sentRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sentRequest(nil), f.reqs...)
}

// addr is the host:port to give as CONSUL_HTTP_ADDR or -http-addr.
func (f *fakeAgent) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// runCLI runs args against env vars and stdin; returns code, stdout, stderr.
func runCLI(args []string, vars map[string]string, stdin string) (int, string, string) {
	var out, errOut bytes.Buffer
	env := Env{
		Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(stdin),
		Getenv: func(k string) string { return vars[k] },
	}
	code := Run(args, env)
	return code, out.String(), errOut.String()
}

// sameJSON compares two JSON documents semantically.
func sameJSON(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("body %q is not JSON: %v", got, err)
		return false
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation %q: %v", want, err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	return bytes.Equal(gb, wb)
}

func writeTestFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o600)
}
