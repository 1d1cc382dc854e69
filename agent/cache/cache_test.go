package cache

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const dc = "dc1"

// servers is a real in-memory server behind a switch that makes every
// call fail, as servers that cannot be reached would, and a call count.
type servers struct {
	srv   *server.Server
	down  atomic.Bool
	calls atomic.Int64
}

var errUnreachable = errors.New("no servers reachable")

func (s *servers) RPC(ctx context.Context, method string, args, reply any) error {
	s.calls.Add(1)
	if s.down.Load() {
		return errUnreachable
	}
	return s.srv.RPC(ctx, method, args, reply)
}

func startServer(t *testing.T) *servers {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		NodeName: "node1", NodeID: "00000000-0000-0000-0000-00000000000a", Datacenter: dc,
		InMemory: true, Bootstrap: true, Listener: ln, Advertise: ln.Addr().(*net.TCPAddr),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	deadline := time.Now().Add(10 * time.Second)
	for !srv.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &servers{srv: srv}
}

func register(t *testing.T, s *servers, name string) {
	t.Helper()
	args := structs.RegisterRequest{Node: "n1", Address: "10.0.0.1", WriteRequest: structs.WriteRequest{Datacenter: dc},
		Service: &structs.NodeService{ID: name, Service: name, Port: 80}}
	if err := structs.MethodCatalogRegister.Call(context.Background(), s.srv, &args, &struct{}{}); err != nil {
		t.Fatal(err)
	}
}

// fakeClock is the cache's clock in tests that look at Age.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newCache(t *testing.T, s *servers) (*Cache, *fakeClock) {
	t.Helper()
	c, err := New(Config{RPC: s})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	c.now = clock.now
	t.Cleanup(c.Close)
	return c, clock
}

func listServices(t *testing.T, c *Cache, index uint64, opts Options) (structs.IndexedServices, Result, error) {
	t.Helper()
	args := structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{Datacenter: dc, MinQueryIndex: index, MaxQueryTime: 30 * time.Second}}
	var out structs.IndexedServices
	res, err := c.Get(context.Background(), structs.MethodCatalogListServices.Name(), &args, &out, opts)
	return out, res, err
}

// TestCacheBackgroundRefresh: the first read is a miss, the next ones hits
// answered without asking the servers, a change reaches the cache by the
// background blocking query (a blocking cached read sees it), and a
// different request is a different entry.
func TestCacheBackgroundRefresh(t *testing.T) {
	s := startServer(t)
	register(t, s, "web")
	c, _ := newCache(t, s)

	first, res, err := listServices(t, c, 0, Options{})
	if err != nil || res.Hit || first.Services["web"] == nil {
		t.Fatalf("first read: %+v %+v %v, want a miss with web", first.Services, res, err)
	}
	calls := s.calls.Load()
	for range 3 {
		out, res, err := listServices(t, c, 0, Options{})
		if err != nil || !res.Hit || res.Age != 0 || out.Index != first.Index {
			t.Fatalf("cached read: %+v %+v %v, want a hit of age 0 at index %d", out.QueryMeta, res, err, first.Index)
		}
	}
	if got := s.calls.Load(); got != calls {
		t.Fatalf("hits made %d server calls", got-calls)
	}

	register(t, s, "db")
	out, res, err := listServices(t, c, first.Index, Options{})
	// A hit too if the refresh saw the change before this read began.
	if err != nil || out.Services["db"] == nil || out.Index <= first.Index {
		t.Fatalf("blocking cached read: %+v %+v %v, want db at a later index", out, res, err)
	}
	if out, res, err = listServices(t, c, 0, Options{}); err != nil || !res.Hit || out.Services["db"] == nil {
		t.Fatalf("read after refresh: %+v %+v %v", out, res, err)
	}

	args := structs.ServiceSpecificRequest{ServiceName: "web", QueryOptions: structs.QueryOptions{Datacenter: dc}}
	var nodes structs.IndexedServiceNodes
	res, err = c.Get(context.Background(), structs.MethodCatalogServiceNodes.Name(), &args, &nodes, Options{})
	if err != nil || res.Hit || len(nodes.ServiceNodes) != 1 {
		t.Fatalf("service nodes: %+v %+v %v, want a miss with one instance", nodes, res, err)
	}
}

// TestCacheServersDown: while the refresh fails the cached answer is still
// served, with an Age counting from the first failure; max-age refuses
// it past that age unless stale-if-error covers it.
func TestCacheServersDown(t *testing.T) {
	s := startServer(t)
	register(t, s, "web")
	c, clock := newCache(t, s)
	if _, _, err := listServices(t, c, 0, Options{}); err != nil {
		t.Fatal(err)
	}
	s.down.Store(true)
	// A change ends the background query (in flight, so it still
	// answers, with db); its next one meets the outage.
	register(t, s, "db")
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		failed := false
		for _, e := range c.entries {
			failed = failed || !e.lostContact.IsZero()
		}
		c.mu.Unlock()
		if failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("refresh never failed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	clock.add(30 * time.Second)

	tests := []struct {
		name    string
		opts    Options
		wantErr error
	}{
		{name: "no directives", opts: Options{}},
		{name: "max-age above the age", opts: Options{MaxAge: time.Minute}},
		{name: "max-age below the age", opts: Options{MaxAge: 10 * time.Second}, wantErr: errUnreachable},
		{name: "stale-if-error covers it", opts: Options{MaxAge: 10 * time.Second, StaleIfError: time.Minute}},
		{name: "stale-if-error too short", opts: Options{MaxAge: 10 * time.Second, StaleIfError: 20 * time.Second}, wantErr: errUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, res, err := listServices(t, c, 0, tt.opts)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || !res.Hit || res.Age != 30*time.Second || out.Services["db"] == nil {
				t.Fatalf("%+v %+v %v, want the last answer, a hit of age 30s", out, res, err)
			}
		})
	}
}

// TestCacheFirstReadFails: with no answer yet the read gets the error, and
// nothing is served until the servers answer.
func TestCacheFirstReadFails(t *testing.T) {
	s := startServer(t)
	c, _ := newCache(t, s)
	s.down.Store(true)
	if _, _, err := listServices(t, c, 0, Options{}); !errors.Is(err, errUnreachable) {
		t.Fatalf("err = %v, want %v", err, errUnreachable)
	}
	s.down.Store(false)
	if _, res, err := listServices(t, c, 0, Options{}); err != nil || res.Hit {
		t.Fatalf("after recovery: %+v %v, want a miss", res, err)
	}
	c.Close()
	if _, _, err := listServices(t, c, 0, Options{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want %v", err, ErrClosed)
	}
}
