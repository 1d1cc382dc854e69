package server

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/structs"
)

// raftNet carries the test servers' Raft connections and can cut one
// server off from the others, both ways.
type raftNet struct {
	mu sync.Mutex
	// cutOff and conns are guarded by mu.
	cutOff map[string]bool // by server address
	conns  []raftNetConn
}

type raftNetConn struct {
	from, to string
	conn     net.Conn
}

// dialer returns the Raft dialer of the server at from.
func (n *raftNet) dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, to string) (net.Conn, error) {
		n.mu.Lock()
		cut := n.cutOff[from] || n.cutOff[to]
		n.mu.Unlock()
		if cut {
			return nil, fmt.Errorf("dial %s from %s: network cut", to, from)
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", to)
		if err != nil {
			return nil, err
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cutOff[from] || n.cutOff[to] {
			_ = c.Close()
			return nil, fmt.Errorf("dial %s from %s: network cut", to, from)
		}
		n.conns = append(n.conns, raftNetConn{from: from, to: to, conn: c})
		return c, nil
	}
}

// cut isolates the server at addr: its Raft connections close and no new
// one is made, to it or from it, until heal.
func (n *raftNet) cut(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cutOff == nil {
		n.cutOff = map[string]bool{}
	}
	n.cutOff[addr] = true
	kept := n.conns[:0]
	for _, c := range n.conns {
		if c.from == addr || c.to == addr {
			_ = c.conn.Close()
			continue
		}
		kept = append(kept, c)
	}
	n.conns = kept
}

func (n *raftNet) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cutOff = nil
}

// stuckLog is a Raft log store whose writes a test can hold: Raft's
// leader loop writes the log itself, so a held write freezes the loop, as
// SIGSTOP would, while the rest of the process (the read path) runs.
type stuckLog struct {
	raft.LogStore
	mu sync.Mutex
	// hold and entered are guarded by mu.
	hold    chan struct{} // when set, writes wait for it to close
	entered chan struct{} // closed by the first write that waits
}

func (s *stuckLog) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

func (s *stuckLog) StoreLogs(logs []*raft.Log) error {
	s.mu.Lock()
	hold, entered := s.hold, s.entered
	if hold != nil && entered != nil {
		close(entered)
		s.entered = nil
	}
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return s.LogStore.StoreLogs(logs)
}

// stick makes the next writes wait; the channel returned closes once one
// does, and release lets them go on.
func (s *stuckLog) stick() (entered <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold, in := make(chan struct{}), make(chan struct{})
	s.hold, s.entered = hold, in
	var once sync.Once
	return in, func() {
		once.Do(func() {
			s.mu.Lock()
			s.hold, s.entered = nil, nil
			s.mu.Unlock()
			close(hold)
		})
	}
}

// TestPausedLeaderServesNoStaleRead: a leader frozen and cut off from the
// others still believes it leads (its Raft cannot run to step down),
// while the others elect a new leader and acknowledge a newer write. Once
// its lease ran out, a default read the old leader takes, or a consistent
// one, is refused ("No cluster leader", so a client asks another server),
// never answered from its old state; only a stale read sees that state.
func TestPausedLeaderServesNoStaleRead(t *testing.T) {
	network := &raftNet{}
	logs := map[string]*stuckLog{}
	servers := startTestCluster(t, 3, false, func(ts *testServer) {
		ts.raftDial = network.dialer(fmt.Sprintf("127.0.0.1:%d", ts.rpcPort))
		ts.wrapLog = func(l raft.LogStore) raft.LogStore {
			s := &stuckLog{LogStore: l}
			logs[ts.name] = s
			return s
		}
	})
	old := waitForLeader(t, servers, 30*time.Second)
	kvPut(t, old.srv, "k", "before")
	for _, ts := range servers {
		for e := kvGet(t, ts.srv, "k", true); e == nil; e = kvGet(t, ts.srv, "k", true) {
			time.Sleep(10 * time.Millisecond)
		}
	}

	// A default read takes a lease.
	if e := kvGet(t, old.srv, "k", false); e == nil || string(e.Value) != "before" {
		t.Fatalf("default read from the leader = %+v", e)
	}

	// Freeze the leader's Raft (a write it must log holds its leader
	// loop) and cut it off.
	entered, release := logs[old.name].stick()
	t.Cleanup(func() { release(); network.heal() })
	network.cut(old.srv.cfg.Advertise.String())
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		var ok bool
		_ = structs.MethodKVSApply.Call(ctx, old.srv, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "frozen", Value: []byte("x")}}, &ok)
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader never wrote its log")
	}

	var others []*testServer
	for _, ts := range servers {
		if ts != old {
			others = append(others, ts)
		}
	}
	nu := waitForLeader(t, others, 30*time.Second)
	kvPut(t, nu.srv, "k", "after")
	if !old.srv.IsLeader() {
		t.Fatal("the old leader stepped down: the test did not freeze it")
	}
	time.Sleep(old.srv.reads.lease) // whatever lease it held has run out

	for _, tc := range []struct {
		name  string
		query structs.QueryOptions
		want  string // "" for refused
	}{
		{"default", structs.QueryOptions{}, ""},
		{"consistent", structs.QueryOptions{RequireConsistent: true}, ""},
		{"stale", structs.QueryOptions{AllowStale: true}, "before"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var out structs.IndexedDirEntries
			err := structs.MethodKVSGet.Call(ctx, old.srv, &structs.KeyRequest{Key: "k", QueryOptions: tc.query}, &out)
			var got string
			if err == nil && len(out.Entries) > 0 {
				got = string(out.Entries[0].Value)
			}
			if got != tc.want {
				t.Fatalf("read from the old leader = %q (err %v), want %q", got, err, tc.want)
			}
			if !old.srv.IsLeader() {
				t.Fatal("the old leader stepped down during the read: it proves nothing")
			}
		})
	}
}
