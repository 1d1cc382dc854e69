package checks

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitLimit is a generous bound for anything that should happen within a
// few short intervals; only a hang or a real bug gets near it.
const waitLimit = 5 * time.Second

// update is one UpdateCheck call.
type update struct {
	id, status, output string
}

// recorder is the Notifier the tests read results from.
type recorder struct {
	mu      sync.Mutex
	updates []update
	changed chan struct{} // closed and replaced on every update
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) UpdateCheck(id, status, output string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, update{id, status, output})
	close(r.changed)
	r.changed = make(chan struct{})
}

// all returns a copy of every update for id.
func (r *recorder) all(id string) []update {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []update
	for _, u := range r.updates {
		if u.id == id {
			out = append(out, u)
		}
	}
	return out
}

// waitFor waits until the latest update for id satisfies ok and returns it.
func (r *recorder) waitFor(t *testing.T, id string, what string, ok func(update) bool) update {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		r.mu.Lock()
		ch := r.changed
		var last *update
		for i := len(r.updates) - 1; i >= 0; i-- {
			if r.updates[i].id == id {
				last = &r.updates[i]
				break
			}
		}
		var cur update
		if last != nil {
			cur = *last
		}
		r.mu.Unlock()
		if last != nil && ok(cur) {
			return cur
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("check %q: timed out waiting for %s; last update %+v", id, what, cur)
		}
	}
}

// waitStatus waits until the latest update for id has the given status.
func (r *recorder) waitStatus(t *testing.T, id, status string) update {
	t.Helper()
	return r.waitFor(t, id, "status "+status, func(u update) bool { return u.status == status })
}

// restartableHTTP is an HTTP server on a fixed 127.0.0.1 port that a test
// can stop and start again.
type restartableHTTP struct {
	t       *testing.T
	handler http.Handler
	addr    string
	srv     *httptest.Server
}

func newRestartableHTTP(t *testing.T, h http.Handler) *restartableHTTP {
	t.Helper()
	srv := httptest.NewServer(h)
	r := &restartableHTTP{t: t, handler: h, addr: srv.Listener.Addr().String(), srv: srv}
	t.Cleanup(r.stop)
	return r
}

func (r *restartableHTTP) url(path string) string { return "http://" + r.addr + path }

func (r *restartableHTTP) stop() {
	if r.srv != nil {
		r.srv.Close()
		r.srv = nil
	}
}

func (r *restartableHTTP) start() {
	r.t.Helper()
	ln := listenAgain(r.t, r.addr)
	srv := httptest.NewUnstartedServer(r.handler)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	r.srv = srv
}

// listenAgain binds addr again, retrying briefly while the old socket
// lets go of it.
func listenAgain(t *testing.T, addr string) net.Listener {
	t.Helper()
	var err error
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
	}
	t.Fatalf("listen again on %s: %v", addr, err)
	return nil
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(w *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// dur converts for CheckType literals.
func dur(d time.Duration) structs.Duration { return structs.Duration(d) }
