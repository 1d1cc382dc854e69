package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// cuttableDialer opens plain TCP connections that a test can freeze and
// then cut: once frozen, a connection passes what its owner writes but
// delivers nothing more it reads, so a request goes out and its answer
// never arrives; cutting closes the frozen connections, as when a leader
// dies after it received a forwarded call.
type cuttableDialer struct {
	dials atomic.Int32

	mu sync.Mutex
	// frozen and conns are guarded by mu.
	frozen bool
	conns  []*cuttableConn
}

func (d *cuttableDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	d.dials.Add(1)
	cc := &cuttableConn{Conn: c, cut: make(chan struct{}), dialer: d}
	d.mu.Lock()
	d.conns = append(d.conns, cc)
	d.mu.Unlock()
	return cc, nil
}

// freeze makes every open connection stop delivering what it reads.
func (d *cuttableDialer) freeze() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.frozen = true
}

// cut closes every connection opened so far; new ones work normally.
func (d *cuttableDialer) cut() {
	d.mu.Lock()
	conns := d.conns
	d.conns, d.frozen = nil, false
	d.mu.Unlock()
	for _, c := range conns {
		c.once.Do(func() { close(c.cut) })
		_ = c.Conn.Close()
	}
}

func (d *cuttableDialer) isFrozen(c *cuttableConn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.frozen {
		return false
	}
	for _, o := range d.conns {
		if o == c {
			return true
		}
	}
	return false
}

type cuttableConn struct {
	net.Conn
	dialer *cuttableDialer
	cut    chan struct{}
	once   sync.Once
}

func (c *cuttableConn) Read(b []byte) (int, error) {
	if c.dialer.isFrozen(c) {
		<-c.cut
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Read(b)
	if n > 0 && c.dialer.isFrozen(c) {
		// Frozen while this read was waiting: drop what it got.
		<-c.cut
		return 0, net.ErrClosed
	}
	return n, err
}

// leaderAndFollower returns the leader and one follower of servers.
func leaderAndFollower(t *testing.T, servers []*testServer) (leader, follower *testServer) {
	t.Helper()
	leader = waitForLeader(t, servers, 30*time.Second)
	for _, ts := range servers {
		if ts != leader {
			return leader, ts
		}
	}
	t.Fatal("no follower")
	return nil, nil
}

// TestForwardedWriteCutAfterSendingAppliesOnce: a follower forwards a
// write, the leader applies it, and the connection breaks before the
// answer comes back. A retry-safe write (a KV CAS) is sent again under
// its request ID and answered with the first attempt's result, applied
// once; any other write is not sent again and its caller is told the
// outcome is unknown, never "No cluster leader".
func TestForwardedWriteCutAfterSendingAppliesOnce(t *testing.T) {
	dialers := map[string]*cuttableDialer{}
	servers := startTestCluster(t, 3, false, func(ts *testServer) {
		d := &cuttableDialer{}
		dialers[ts.name] = d
		ts.dial = d.dial
	})
	leader, follower := leaderAndFollower(t, servers)
	d := dialers[follower.name]
	kvPut(t, follower.srv, "warmup", "x") // opens the forwarding connection

	// cutDuring makes call with the follower's forwarding connection
	// frozen, waits until applied says the leader has applied the write,
	// then cuts the connection and returns what call returned.
	cutDuring := func(t *testing.T, applied func() bool, call func(ctx context.Context) error) error {
		t.Helper()
		d.freeze()
		done := make(chan error, 1)
		go func() { done <- call(context.Background()) }()
		for deadline := time.Now().Add(20 * time.Second); !applied(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the leader never applied the write")
			}
		}
		before := d.dials.Load()
		d.cut()
		select {
		case err := <-done:
			t.Logf("dials before the cut %d, after %d", before, d.dials.Load())
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("the forwarded call never returned")
			return nil
		}
	}

	t.Run("retry-safe write", func(t *testing.T) {
		var won bool
		req := &structs.KVSRequest{Op: structs.KVCAS, DirEnt: structs.DirEntry{Key: "cas", Value: []byte("v1")}}
		applied := func() bool {
			_, e, err := leader.srv.fsm.State().KVSGet(nil, "cas")
			return err == nil && e != nil
		}
		err := cutDuring(t, applied, func(ctx context.Context) error {
			return structs.MethodKVSApply.Call(ctx, follower.srv, req, &won)
		})
		if err != nil || !won {
			t.Fatalf("CAS after a cut connection: won=%v err=%v; want the first attempt's win", won, err)
		}
		_, e, _ := leader.srv.fsm.State().KVSGet(nil, "cas")
		if e.CreateIndex != e.ModifyIndex {
			t.Fatalf("cas applied more than once: created at %d, modified at %d", e.CreateIndex, e.ModifyIndex)
		}
		if req.RequestID == "" {
			t.Fatal("the write had no request ID")
		}
	})

	t.Run("other write", func(t *testing.T) {
		// Intentions are not retry-safe: the handler checks for a
		// duplicate before proposing, so a retry would fail a create that
		// succeeded.
		var id string
		req := &structs.IntentionRequest{Op: structs.IntentionOpCreate, Intention: &structs.Intention{
			SourceName: "web", DestinationName: "db", Action: structs.IntentionActionAllow}}
		applied := func() bool {
			_, ixns, err := leader.srv.fsm.State().Intentions(nil)
			return err == nil && len(ixns) == 1
		}
		err := cutDuring(t, applied, func(ctx context.Context) error {
			return structs.MethodIntentionApply.Call(ctx, follower.srv, req, &id)
		})
		if !errors.Is(err, structs.ErrOutcomeUnknown) || errors.Is(err, structs.ErrNoLeader) {
			t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
		}
		if _, ixns, _ := leader.srv.fsm.State().Intentions(nil); len(ixns) != 1 {
			t.Fatalf("intentions = %d, want 1", len(ixns))
		}
	})
}

// TestWriteLosingLeadershipMidCommitIsMaybeApplied: a write the leader
// proposed and could not commit before it lost leadership is reported as
// possibly applied (Raft's "leadership lost while committing log"), never
// as "No cluster leader", which tells a client nothing changed.
func TestWriteLosingLeadershipMidCommitIsMaybeApplied(t *testing.T) {
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 30*time.Second)
	kvPut(t, leader.srv, "before", "x")
	for _, ts := range servers {
		if ts != leader {
			ts.stop(t)
		}
	}
	// KV writes are retry-safe: the server keeps trying under the request
	// ID until the caller gives up, then still reports the first outcome.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var applied bool
	err := structs.MethodKVSApply.Call(ctx, leader.srv, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "k", Value: []byte("v")}}, &applied)
	if !errors.Is(err, structs.ErrLeadershipLost) || errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("err = %v, want %q", err, structs.ErrLeadershipLost)
	}
	// Once leadership is gone before a write is proposed, the answer is
	// "No cluster leader": it certainly changed nothing.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*rpcHoldTimeout)
	defer cancel2()
	var ok bool
	err = structs.MethodKVSApply.Call(ctx2, leader.srv, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "k2"}}, &ok)
	if !errors.Is(err, structs.ErrNoLeader) || structs.MaybeApplied(err) {
		t.Fatalf("a write with no leader: err = %v, want No cluster leader", err)
	}
}

// TestLeaderServesNothingBeforeItsBarrier: until a new leader has applied
// everything committed before its term, it answers no read but a stale
// one, in any other mode, and no write.
func TestLeaderServesNothingBeforeItsBarrier(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	kvPut(t, s, "k", "v")
	if term, ready := s.readyToServe(); !ready || term == 0 {
		t.Fatalf("a leader that wrote is not ready: term %d", term)
	}
	// As in the moment after an election, before the barrier completes.
	s.readyTerm.Store(0)
	for _, tc := range []struct {
		name      string
		method    string
		args      any
		reply     any
		answering bool
	}{
		{"default read", structs.MethodKVSGet.Name(), &structs.KeyRequest{Key: "k"}, new(structs.IndexedDirEntries), false},
		{"consistent read", structs.MethodKVSGet.Name(), &structs.KeyRequest{Key: "k", QueryOptions: structs.QueryOptions{RequireConsistent: true}}, new(structs.IndexedDirEntries), false},
		{"write", structs.MethodKVSApply.Name(), &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "k", Value: []byte("w")}}, new(bool), false},
		{"stale read", structs.MethodKVSGet.Name(), &structs.KeyRequest{Key: "k", QueryOptions: structs.QueryOptions{AllowStale: true}}, new(structs.IndexedDirEntries), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			err := s.RPC(ctx, tc.method, tc.args, tc.reply)
			if tc.answering != (err == nil) {
				t.Fatalf("err = %v, want answered=%v", err, tc.answering)
			}
		})
	}
	if _, e, _ := s.fsm.State().KVSGet(nil, "k"); string(e.Value) != "v" {
		t.Fatalf("the write went through before the barrier: %q", e.Value)
	}
	// The barrier completes: everything is served again, and the write
	// waiting for it goes through.
	var ok bool
	done := make(chan error, 1)
	go func() {
		done <- structs.MethodKVSApply.Call(context.Background(), s, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "k", Value: []byte("after")}}, &ok)
	}()
	time.Sleep(50 * time.Millisecond)
	s.readyTerm.Store(s.raft.CurrentTerm())
	if err := <-done; err != nil || !ok {
		t.Fatalf("write after the barrier: %v %v", ok, err)
	}
	if e := kvGet(t, s, "k", false); string(e.Value) != "after" {
		t.Fatalf("read after the barrier: %q", e.Value)
	}
}
