package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/structs"
)

// waitPeers asks ts for its Raft peers until it lists n (up to 10 s) and
// returns the last answer.
func waitPeers(t *testing.T, ts *testServer, n int) []string {
	t.Helper()
	var peers []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rpc(t, ts.srv, structs.MethodStatusPeers, &structs.DCSpecificRequest{}, &peers)
		if len(peers) == n || time.Now().After(deadline) {
			return peers
		}
	}
}

func TestClusterReplicatesAndForwards(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	servers := startTestCluster(t, 3, true)

	// A follower learns the leader from its first heartbeat, which may
	// come before the log entry holding the configuration: wait for it.
	for _, ts := range servers {
		if peers := waitPeers(t, ts, 3); len(peers) != 3 {
			t.Fatalf("%s peers = %v", ts.name, peers)
		}
	}
	// Writes to every server, followers forward to the leader.
	for i := range 30 {
		kvPut(t, servers[i%3].srv, fmt.Sprintf("k/%d", i), fmt.Sprint(i))
	}
	for _, ts := range servers {
		for i := range 30 {
			e := kvGet(t, ts.srv, fmt.Sprintf("k/%d", i), false)
			if e == nil || string(e.Value) != fmt.Sprint(i) {
				t.Fatalf("%s k/%d = %+v", ts.name, i, e)
			}
		}
	}
	// Consistent reads work on followers too (forwarded, leadership verified).
	var out structs.IndexedDirEntries
	rpc(t, servers[1].srv, structs.MethodKVSGet, &structs.KeyRequest{Key: "k/1", QueryOptions: structs.QueryOptions{RequireConsistent: true}}, &out)
	if len(out.Entries) != 1 || !out.KnownLeader {
		t.Fatalf("consistent read = %+v", out)
	}
	// Every server's node is in the catalog with a passing serfHealth and the
	// consul service, registered by the leader from Serf.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var hs structs.IndexedCheckServiceNodes
		rpc(t, servers[2].srv, structs.MethodHealthServiceNodes, &structs.ServiceSpecificRequest{ServiceName: "consul", PassingOnly: true}, &hs)
		if len(hs.Nodes) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consul service instances passing = %d, want 3", len(hs.Nodes))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestLeaderFailoverAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	servers := startTestCluster(t, 3, true)
	for i := range 20 {
		kvPut(t, servers[i%3].srv, fmt.Sprintf("before/%d", i), "x")
	}
	leader := waitForLeader(t, servers, 5*time.Second)
	leader.stop(t)

	start := time.Now()
	var rest []*testServer
	for _, ts := range servers {
		if ts != leader {
			rest = append(rest, ts)
		}
	}
	// Generous: this runs in-process beside the rest of the suite; the
	// 10 s bound on real processes is checked in integration/.
	newLeader := waitForLeader(t, rest, 30*time.Second)
	t.Logf("new leader %s after %s", newLeader.name, time.Since(start))
	for _, ts := range rest {
		for i := range 20 {
			if e := kvGet(t, ts.srv, fmt.Sprintf("before/%d", i), false); e == nil {
				t.Fatalf("%s lost before/%d", ts.name, i)
			}
		}
	}
	kvPut(t, rest[0].srv, "after", "y")

	// The old leader restarts from its data dir and catches up.
	startTestServer(t, leader, 3, false, []string{fmt.Sprintf("127.0.0.1:%d", rest[0].serfPort)})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if e := kvGet(t, leader.srv, "after", true); e != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("restarted server did not catch up")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if e := kvGet(t, leader.srv, "before/7", true); e == nil {
		t.Fatal("restarted server lost its data")
	}
}

func TestBlockingQueries(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	kvPut(t, s, "watched", "1")
	first := kvGet(t, s, "watched", false)

	// A blocking read with the current index waits for the next write.
	type result struct {
		out structs.IndexedDirEntries
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = structs.MethodKVSGet.Call(context.Background(), s, &structs.KeyRequest{Key: "watched",
			QueryOptions: structs.QueryOptions{MinQueryIndex: first.ModifyIndex, MaxQueryTime: 10 * time.Second}}, &r.out)
		done <- r
	}()
	select {
	case r := <-done:
		t.Fatalf("returned before any write: %+v %v", r.out, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	// A write to another key does not wake it...
	kvPut(t, s, "other", "x")
	select {
	case r := <-done:
		t.Fatalf("woke on an unrelated write: %+v", r.out)
	case <-time.After(300 * time.Millisecond):
	}
	// ...a write to the key does.
	kvPut(t, s, "watched", "2")
	select {
	case r := <-done:
		if r.err != nil || len(r.out.Entries) != 1 || string(r.out.Entries[0].Value) != "2" || r.out.Index <= first.ModifyIndex {
			t.Fatalf("woke with %+v %v", r.out, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocking query did not wake on the write")
	}

	// The wait elapses with the same index when nothing changes.
	start := time.Now()
	var out structs.IndexedNodes
	rpc(t, s, structs.MethodCatalogListNodes, &structs.DCSpecificRequest{}, &out)
	idx := out.Index
	rpc(t, s, structs.MethodCatalogListNodes, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{MinQueryIndex: idx, MaxQueryTime: 200 * time.Millisecond}}, &out)
	if out.Index != idx || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("timed-out query: index %d (want %d) after %s", out.Index, idx, time.Since(start))
	}
	// A missing key still reports a non-zero index.
	var missing structs.IndexedDirEntries
	rpc(t, s, structs.MethodKVSGet, &structs.KeyRequest{Key: "nope"}, &missing)
	if missing.Index == 0 || len(missing.Entries) != 0 {
		t.Fatalf("missing key: %+v", missing)
	}
}

func TestSessionTTLAndLockDelay(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	waitForSerfHealth(t, s, "s1")
	var bad string
	err := structs.MethodSessionApply.Call(context.Background(), s, &structs.SessionRequest{Op: structs.SessionCreate,
		Session: structs.Session{Node: "s1", TTL: "100ms", NodeChecks: []string{structs.SerfCheckID}}}, &bad)
	if err == nil || err.Error()[:19] != "Invalid Session TTL" {
		t.Fatalf("short TTL: %v", err)
	}

	var id string
	rpc(t, s, structs.MethodSessionApply, &structs.SessionRequest{Op: structs.SessionCreate,
		Session: structs.Session{Node: "s1", TTL: "1s", LockDelay: 700 * time.Millisecond, NodeChecks: []string{structs.SerfCheckID}}}, &id)
	var ok bool
	rpc(t, s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVLock, DirEnt: structs.DirEntry{Key: "lock", Session: id}}, &ok)
	if !ok {
		t.Fatal("acquire failed")
	}
	// Renewals keep it alive past its TTL...
	for range 4 {
		time.Sleep(500 * time.Millisecond)
		var r structs.IndexedSessions
		rpc(t, s, structs.MethodSessionRenew, &structs.SessionSpecificRequest{SessionID: id}, &r)
		if len(r.Sessions) != 1 {
			t.Fatal("session vanished while renewed")
		}
	}
	// ...and without them it expires (TTL x 2) and releases the lock.
	expired := time.Now()
	for {
		var r structs.IndexedSessions
		rpc(t, s, structs.MethodSessionGet, &structs.SessionSpecificRequest{SessionID: id}, &r)
		if len(r.Sessions) == 0 {
			break
		}
		if time.Since(expired) > 5*time.Second {
			t.Fatal("session did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e := kvGet(t, s, "lock", false); e == nil || e.Session != "" {
		t.Fatalf("lock after expiry = %+v", e)
	}
	// The lock delay holds off a new holder for a moment.
	var id2 string
	rpc(t, s, structs.MethodSessionApply, &structs.SessionRequest{Op: structs.SessionCreate,
		Session: structs.Session{Node: "s1", NodeChecks: []string{structs.SerfCheckID}}}, &id2)
	rpc(t, s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVLock, DirEnt: structs.DirEntry{Key: "lock", Session: id2}}, &ok)
	if ok {
		t.Fatal("acquired within the lock delay")
	}
	time.Sleep(800 * time.Millisecond)
	rpc(t, s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVLock, DirEnt: structs.DirEntry{Key: "lock", Session: id2}}, &ok)
	if !ok {
		t.Fatal("could not acquire after the lock delay")
	}
}

func TestUnknownDatacenterAndFilter(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	var out structs.IndexedNodes
	err := structs.MethodCatalogListNodes.Call(context.Background(), s, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{Datacenter: "dc9"}}, &out)
	if !errors.Is(err, structs.ErrNoDCPath) {
		t.Fatalf("unknown dc: %v", err)
	}
	err = s.RPC(context.Background(), "Nope.Nothing", &structs.DCSpecificRequest{}, &out)
	if err == nil {
		t.Fatal("unknown method accepted")
	}
}

// TestRaftRemovePeer: the leader's server health sees three healthy
// servers (failure tolerance 1), then the one stopped for good as failed
// and the cluster unhealthy; the server is removed from the Raft
// configuration by address (through a follower, forwarded to the leader),
// and the two left keep a leader, take writes and are healthy again. A
// peer that is not in the configuration, or a request naming none or both,
// is refused with Consul's texts.
func TestRaftRemovePeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 30*time.Second)
	var gone, follower *testServer
	for _, ts := range servers {
		switch {
		case ts == leader:
		case gone == nil:
			gone = ts
		default:
			follower = ts
		}
	}
	health := func(want func(structs.OperatorHealthReply) error) structs.OperatorHealthReply {
		t.Helper()
		var out structs.OperatorHealthReply
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			out = structs.OperatorHealthReply{}
			rpc(t, follower.srv, structs.MethodOperatorServerHealth, &structs.DCSpecificRequest{}, &out)
			if err = want(out); err == nil {
				return out
			}
		}
		t.Fatalf("server health: %v: %+v", err, out)
		return out
	}
	h := health(func(r structs.OperatorHealthReply) error {
		if !r.Healthy || r.FailureTolerance != 1 || len(r.Servers) != 3 {
			return fmt.Errorf("want 3 healthy servers, tolerance 1")
		}
		return nil
	})
	for _, sh := range h.Servers {
		if sh.Name == "" || sh.SerfStatus != "alive" || sh.Version != "test" || sh.LastIndex == 0 || sh.LastTerm == 0 ||
			sh.StableSince.IsZero() || !sh.Voter || sh.Leader != (sh.ID == leader.id) || (sh.Leader && sh.LastContact != 0) {
			t.Errorf("healthy server %+v", sh)
		}
	}

	goneAddr := gone.srv.cfg.Advertise.String()
	gone.stop(t)
	// Until gossip marks it failed, the leader's reconcile would add an
	// alive server straight back (as Consul's does).
	deadline := time.Now().Add(30 * time.Second)
	for failed := false; !failed; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gossip never marked %s failed", gone.name)
		}
		for _, m := range leader.gossip.Members() {
			failed = failed || m.Name == gone.name && m.Status == serf.StatusFailed
		}
	}

	health(func(r structs.OperatorHealthReply) error {
		if r.Healthy || r.FailureTolerance != 0 || len(r.Servers) != 3 {
			return fmt.Errorf("want unhealthy, tolerance 0")
		}
		for _, sh := range r.Servers {
			if sh.Healthy == (sh.ID == gone.id) || sh.ID == gone.id && sh.SerfStatus != "failed" {
				return fmt.Errorf("server %s: %+v", sh.ID, sh)
			}
		}
		return nil
	})

	remove := func(args structs.RaftRemovePeerRequest) error {
		return rpcErr(follower.srv, structs.MethodOperatorRaftRemovePeer.Name(), &args, &struct{}{})
	}
	if err := remove(structs.RaftRemovePeerRequest{Address: goneAddr}); err != nil {
		t.Fatalf("remove %s: %v", goneAddr, err)
	}
	for _, ts := range []*testServer{leader, follower} {
		if peers := waitPeers(t, ts, 2); len(peers) != 2 || slices.Contains(peers, goneAddr) {
			t.Fatalf("%s peers after removing %s: %v", ts.name, goneAddr, peers)
		}
	}
	kvPut(t, follower.srv, "after-removal", "ok")
	health(func(r structs.OperatorHealthReply) error {
		if !r.Healthy || r.FailureTolerance != 0 || len(r.Servers) != 2 {
			return fmt.Errorf("want 2 healthy servers, tolerance 0")
		}
		return nil
	})

	for _, tc := range []struct {
		args structs.RaftRemovePeerRequest
		want string
	}{
		{structs.RaftRemovePeerRequest{Address: goneAddr}, fmt.Sprintf("address %q was not found in the Raft configuration", goneAddr)},
		{structs.RaftRemovePeerRequest{ID: "no-such-id"}, `id "no-such-id" was not found in the Raft configuration`},
		{structs.RaftRemovePeerRequest{}, ErrRemovePeerTarget.Error()},
		{structs.RaftRemovePeerRequest{ID: leader.id, Address: goneAddr}, ErrRemovePeerTarget.Error()},
	} {
		if err := remove(tc.args); err == nil || err.Error() != tc.want {
			t.Errorf("remove %+v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
