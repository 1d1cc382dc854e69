package router

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

var errDown = errors.New("down")

type fakeCaller struct {
	mu    sync.Mutex
	down  map[string]bool
	calls []string
}

func (f *fakeCaller) Call(_ context.Context, addr, _ string, _, reply any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, addr)
	if f.down[addr] {
		return errDown
	}
	*(reply.(*string)) = addr
	return nil
}

func member(name, ip string, port int, status serf.MemberStatus, dc string) serf.Member {
	return serf.Member{Name: name, Addr: net.ParseIP(ip), Status: status,
		Tags: gossip.ServerTags(dc, name+"-id", port, 0, false, "test")}
}

func TestRouterFailsOverAndSticks(t *testing.T) {
	fc := &fakeCaller{down: map[string]bool{}}
	r := New(Config{Caller: fc, Datacenter: "dc1", Retryable: func(err error) bool { return errors.Is(err, errDown) }, HoldTimeout: 2 * time.Second})
	r.Update([]serf.Member{
		member("s1", "127.0.0.1", 1001, serf.StatusAlive, "dc1"),
		member("s2", "127.0.0.1", 1002, serf.StatusAlive, "dc1"),
		member("s3", "127.0.0.1", 1003, serf.StatusFailed, "dc1"),
		member("x1", "127.0.0.1", 1004, serf.StatusAlive, "dc2"),
		{Name: "client", Addr: net.ParseIP("127.0.0.1"), Status: serf.StatusAlive, Tags: gossip.ClientTags("dc1", "c", "t")},
	})
	if got := r.Servers(); len(got) != 2 || got[0] != "127.0.0.1:1001" || got[1] != "127.0.0.1:1002" {
		t.Fatalf("servers = %v", got)
	}
	var first string
	if err := r.RPC(context.Background(), "M", nil, &first); err != nil {
		t.Fatal(err)
	}
	// Sticky while it answers.
	for range 5 {
		var again string
		if err := r.RPC(context.Background(), "M", nil, &again); err != nil || again != first {
			t.Fatalf("moved from %s to %s (%v)", first, again, err)
		}
	}
	// The preferred server dies: the call still succeeds, on the other one.
	fc.mu.Lock()
	fc.down[first] = true
	fc.mu.Unlock()
	var got string
	if err := r.RPC(context.Background(), "M", nil, &got); err != nil || got == first || got == "" {
		t.Fatalf("failover: %q %v", got, err)
	}
}

func TestRouterHoldTimeoutAndNoServers(t *testing.T) {
	fc := &fakeCaller{down: map[string]bool{"127.0.0.1:1001": true}}
	r := New(Config{Caller: fc, Retryable: func(err error) bool { return errors.Is(err, errDown) }, HoldTimeout: 300 * time.Millisecond})
	var s string
	if err := r.RPC(context.Background(), "M", nil, &s); !errors.Is(err, structs.ErrNoServers) {
		t.Fatalf("no servers: %v", err)
	}
	r.Update([]serf.Member{member("s1", "127.0.0.1", 1001, serf.StatusAlive, "dc1")})
	if err := r.RPC(context.Background(), "M", nil, &s); !errors.Is(err, errDown) {
		t.Fatalf("all down: %v", err)
	}
	// A server that comes back within the hold time is used.
	go func() {
		time.Sleep(100 * time.Millisecond)
		fc.mu.Lock()
		fc.down["127.0.0.1:1001"] = false
		fc.mu.Unlock()
	}()
	r2 := New(Config{Caller: fc, Retryable: func(err error) bool { return errors.Is(err, errDown) }, HoldTimeout: 3 * time.Second})
	r2.Update([]serf.Member{member("s1", "127.0.0.1", 1001, serf.StatusAlive, "dc1")})
	fc.mu.Lock()
	fc.down["127.0.0.1:1001"] = true
	fc.mu.Unlock()
	if err := r2.RPC(context.Background(), "M", nil, &s); err != nil {
		t.Fatalf("recovered server: %v", err)
	}
}

var (
	errRefused = errors.New("refused before sending")
	errLost    = errors.New("connection lost after sending")
)

// scriptedCaller answers each call with the next error of its script and
// records the request ID each attempt carried.
type scriptedCaller struct {
	mu     sync.Mutex
	script []error
	ids    []string
}

func (c *scriptedCaller) Call(_ context.Context, _, _ string, args, _ any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, args.(*structs.KVSRequest).RequestID)
	if len(c.script) == 0 {
		return nil
	}
	err := c.script[0]
	c.script = c.script[1:]
	return err
}

// TestRouterWrites: a write carries one request ID on every attempt; it
// is sent again only after an error that proves it changed nothing, and
// an error that leaves its outcome unknown reaches the caller as such.
func TestRouterWrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   []error
		attempts int
		want     error // nil: success
	}{
		{"refused, then answered", []error{errRefused, errRefused}, 3, nil},
		{"lost after sending: not sent again", []error{errLost}, 1, structs.ErrOutcomeUnknown},
		{"refused, then lost", []error{errRefused, errLost}, 2, structs.ErrOutcomeUnknown},
		{"the server says leadership was lost", []error{structs.ErrLeadershipLost}, 1, structs.ErrLeadershipLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &scriptedCaller{script: tc.script}
			r := New(Config{
				Caller:         c,
				Retryable:      func(error) bool { return true },
				RetryWrite:     func(err error) bool { return errors.Is(err, errRefused) },
				OutcomeUnknown: func(err error) bool { return errors.Is(err, errLost) },
				HoldTimeout:    5 * time.Second,
			})
			r.Update([]serf.Member{member("s1", "127.0.0.1", 1001, serf.StatusAlive, "dc1"), member("s2", "127.0.0.1", 1002, serf.StatusAlive, "dc1")})
			req := &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "k"}}
			var ok bool
			err := structs.MethodKVSApply.Call(context.Background(), r, req, &ok)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if errors.Is(err, structs.ErrNoLeader) {
				t.Fatalf("a write that may have been applied reported as %v", err)
			}
			if len(c.ids) != tc.attempts {
				t.Fatalf("attempts = %d, want %d", len(c.ids), tc.attempts)
			}
			for _, id := range c.ids {
				if id == "" || id != req.RequestID {
					t.Fatalf("attempt IDs %q, request ID %q: want one ID throughout", c.ids, req.RequestID)
				}
			}
		})
	}
}
