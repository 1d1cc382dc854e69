package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestWatchOnce(t *testing.T) {
	pair := `[{"Key":"a","Flags":0,"Value":"MQ==","CreateIndex":1,"ModifyIndex":1,"LockIndex":0}]`
	runCases(t, []cliCase{
		{name: "key", args: []string{"watch", "-type", "key", "-key", "a"},
			routes: map[string]reply{"GET /v1/kv/a": {body: pair}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/a"}},
			stdout: "{\n    \"Key\": \"a\",\n    \"Flags\": 0,\n    \"Value\": \"MQ==\",\n    \"CreateIndex\": 1,\n    \"ModifyIndex\": 1,\n    \"LockIndex\": 0\n}\n"},
		{name: "missing key", args: []string{"watch", "-type", "key", "-key", "nope"},
			want: []sentRequest{{Method: "GET", Path: "/v1/kv/nope"}}, stdout: "null\n"},
		{name: "keyprefix", args: []string{"watch", "-type", "keyprefix", "-prefix", "a", "-stale"},
			routes: map[string]reply{"GET /v1/kv/a": {body: `[{"Key":"a/b"}]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/kv/a", Query: "recurse=&stale="}},
			stdout: "[\n    {\n        \"Key\": \"a/b\"\n    }\n]\n"},
		{name: "services", args: []string{"watch", "-type", "services"},
			routes: map[string]reply{"GET /v1/catalog/services": {body: `{"consul":[],"web":["v1"]}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/services"}},
			stdout: "{\n    \"consul\": [],\n    \"web\": [\n        \"v1\"\n    ]\n}\n"},
		{name: "nodes", args: []string{"watch", "-type", "nodes", "-datacenter", "dc2"},
			routes: map[string]reply{"GET /v1/catalog/nodes": {body: `[{"Node":"n1"}]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/nodes", Query: "dc=dc2"}},
			stdout: "[\n    {\n        \"Node\": \"n1\"\n    }\n]\n"},
		{name: "service", args: []string{"watch", "-type", "service", "-service", "web", "-tag", "v1", "-passingonly"},
			routes: map[string]reply{"GET /v1/health/service/web": {body: `[]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/health/service/web", Query: "passing=1&tag=v1"}},
			stdout: "[]\n"},
		{name: "service with two tags", args: []string{"watch", "-type", "service", "-service", "web", "-tag", "v1", "-tag", "eu"},
			routes: map[string]reply{"GET /v1/health/service/web": {body: `[]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/health/service/web", Query: "tag=v1&tag=eu"}},
			stdout: "[]\n"},
		{name: "checks of a service", args: []string{"watch", "-type", "checks", "-service", "web"},
			routes: map[string]reply{"GET /v1/health/checks/web": {body: `[]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/health/checks/web"}}, stdout: "[]\n"},
		{name: "checks in a state", args: []string{"watch", "-type", "checks", "-state", "critical"},
			routes: map[string]reply{"GET /v1/health/state/critical": {body: `[]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/health/state/critical"}}, stdout: "[]\n"},
		{name: "all checks", args: []string{"watch", "-type", "checks"},
			routes: map[string]reply{"GET /v1/health/state/any": {body: `[]`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/health/state/any"}}, stdout: "[]\n"},
		{name: "connect roots", args: []string{"watch", "-type", "connect_roots"},
			routes: map[string]reply{"GET /v1/agent/connect/ca/roots": {body: `{"ActiveRootID":"a"}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/connect/ca/roots"}},
			stdout: "{\n    \"ActiveRootID\": \"a\"\n}\n"},
		{name: "connect leaf", args: []string{"watch", "-type", "connect_leaf", "-service", "web"},
			routes: map[string]reply{"GET /v1/agent/connect/ca/leaf/web": {body: `{"Service":"web"}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/connect/ca/leaf/web"}},
			stdout: "{\n    \"Service\": \"web\"\n}\n"},
		{name: "connect leaf needs a service", args: []string{"watch", "-type", "connect_leaf"},
			code: 1, stderrHas: []string{"Failed to parse watch: Must specify a single service to watch"}},
		{name: "agent error", args: []string{"watch", "-type", "services"},
			routes: map[string]reply{"GET /v1/catalog/services": {status: 500, body: "boom"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/services"}}, code: 1,
			stderrHas: []string{"Error querying Consul agent: Unexpected response code: 500 (boom)"}},
		{name: "no type", args: []string{"watch"}, code: 1, stderrHas: []string{"Watch type must be specified"}},
		{name: "unknown type", args: []string{"watch", "-type", "bogus"}, code: 1,
			stderrHas: []string{"Unsupported watch type: bogus"}},
		{name: "key without -key", args: []string{"watch", "-type", "key"}, code: 1,
			stderrHas: []string{"Must specify a single key to watch"}},
		{name: "keyprefix without -prefix", args: []string{"watch", "-type", "keyprefix"}, code: 1,
			stderrHas: []string{"Must specify a single prefix to watch"}},
		{name: "service without -service", args: []string{"watch", "-type", "service"}, code: 1,
			stderrHas: []string{"Must specify a single service to watch"}},
		{name: "checks with service and state", args: []string{"watch", "-type", "checks", "-service", "a", "-state", "passing"}, code: 1,
			stderrHas: []string{"Cannot specify service and state"}},
	})
}

// blockingKV answers /v1/kv/k from a fixed history of (index, body) pairs:
// a read at ?index=N gets the first entry with a larger index, or blocks
// until the client goes away when there is none.
type blockingKV struct {
	history []struct {
		index uint64
		body  string
	}
	mu      sync.Mutex
	indexes []string // the ?index of every read, in order
}

func (b *blockingKV) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.indexes = append(b.indexes, r.URL.Query().Get("index"))
	b.mu.Unlock()
	var after uint64
	_, _ = fmt.Sscan(r.URL.Query().Get("index"), &after)
	for _, h := range b.history {
		if h.index > after || after == 0 {
			w.Header().Set("X-Consul-Index", fmt.Sprint(h.index))
			_, _ = w.Write([]byte(h.body))
			return
		}
	}
	<-r.Context().Done()
}

func TestWatchHandlerRunsOnEveryChange(t *testing.T) {
	// Registered first, so it runs after the server's Cleanup: the watch
	// must leave no goroutine behind once interrupted.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	b := &blockingKV{history: []struct {
		index uint64
		body  string
	}{
		{5, `[{"Key":"k","Value":"MQ=="}]`},
		{6, `[{"Key":"k","Value":"MQ=="}]`}, // index moved, value did not: no run
		{9, `[{"Key":"k","Value":"Mg=="}]`},
	}}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	out := filepath.Join(t.TempDir(), "runs")
	sigs := make(chan os.Signal, 1)
	var stdout, stderr bytes.Buffer
	env := Env{
		Stdout: &stdout, Stderr: &stderr,
		Getenv:  func(k string) string { return map[string]string{"CONSUL_HTTP_ADDR": srv.Listener.Addr().String()}[k] },
		Signals: func() (<-chan os.Signal, func()) { return sigs, func() {} },
	}
	done := make(chan int, 1)
	go func() {
		done <- Run([]string{"watch", "-type", "key", "-key", "k", `tr -d ' \n' >>` + out + `; echo " $CONSUL_INDEX" >>` + out}, env)
	}()
	want := "{\"Key\":\"k\",\"Value\":\"MQ==\"} 5\n{\"Key\":\"k\",\"Value\":\"Mg==\"} 9\n"
	for {
		got, _ := os.ReadFile(out)
		if string(got) == want {
			break
		}
		if len(got) > len(want) {
			t.Fatalf("handler output %q, want %q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The read after the last change blocks on its index: interrupt it
	// there, once it has been sent.
	indexes := func() string {
		b.mu.Lock()
		defer b.mu.Unlock()
		return strings.Join(b.indexes, ",")
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.HasPrefix(indexes(), ",5,6,9"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("read indexes %q, want ,5,6,9", indexes())
		}
	}
	sigs <- os.Interrupt
	if code := <-done; code != 0 {
		t.Fatalf("exit code %d, stderr %s", code, stderr.String())
	}
}

func TestWatchHandlerArgv(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		shell bool
		env   map[string]string
		want  []string
	}{
		{"no handler", nil, true, nil, nil},
		{"shell joins the words", []string{"echo", "a", "b"}, true, nil, []string{"/bin/sh", "-c", "echo a b"}},
		{"the user's shell", []string{"echo $X"}, true, map[string]string{"SHELL": "/bin/bash"}, []string{"/bin/bash", "-c", "echo $X"}},
		{"no shell", []string{"/bin/echo", "a b"}, false, map[string]string{"SHELL": "/bin/bash"}, []string{"/bin/echo", "a b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := &Env{Getenv: func(k string) string { return tc.env[k] }}
			if got := handlerArgv(tc.args, tc.shell, env); !slices.Equal(got, tc.want) {
				t.Fatalf("handlerArgv = %q, want %q", got, tc.want)
			}
		})
	}
	// -shell=false runs the command itself: a shell would expand $HOME.
	out := filepath.Join(t.TempDir(), "out")
	input := []byte(`{"x":1}`)
	if err := runHandler(context.Background(), []string{"/bin/sh", "-c", `cat > "$0"; printf ' %s' "$1" >> "$0"`, out, "$HOME"}, input, 7, &Env{Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(out); string(got) != `{"x":1} $HOME` {
		t.Fatalf("handler wrote %q", got)
	}
}
