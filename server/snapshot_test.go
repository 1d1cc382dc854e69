package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/snapshot"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// snapshotHTTP serves the HTTP API of s on a loopback port and returns an
// official Consul client for it.
func snapshotHTTP(t testing.TB, s *Server) *api.Client {
	t.Helper()
	h, err := httpapi.New(httpapi.Config{RPC: s, NodeName: s.cfg.NodeName, Datacenter: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// populateForSnapshot writes one of everything a snapshot carries
// through the HTTP API. The nodes are external (no serfHealth check), so
// that the target cluster's reconciliation of its Serf members leaves
// them alone.
func populateForSnapshot(t *testing.T, c *api.Client) {
	t.Helper()
	for _, node := range []string{"ext-1", "ext-2"} {
		_, err := c.Catalog().Register(&api.CatalogRegistration{
			Node: node, Address: "10.1.0.1", NodeMeta: map[string]string{"rack": node},
			Service: &api.AgentService{ID: "web-" + node, Service: "web", Port: 8080, Tags: []string{"v1"}},
			Checks: api.HealthChecks{
				{Node: node, CheckID: "ext-alive", Name: "alive", Status: api.HealthPassing},
				{Node: node, CheckID: "web-check", Name: "web", Status: api.HealthWarning, ServiceID: "web-" + node},
			},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	kv := c.KV()
	for _, k := range []string{"app/a", "app/b", "gone"} {
		if _, err := kv.Put(&api.KVPair{Key: k, Value: []byte("v-" + k), Flags: 42}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Delete("gone", nil); err != nil {
		t.Fatal(err)
	}
	sid, _, err := c.Session().Create(&api.SessionEntry{Node: "ext-1", Name: "lock", NodeChecks: []string{"ext-alive"}, Behavior: api.SessionBehaviorRelease}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := kv.Acquire(&api.KVPair{Key: "app/lock", Session: sid}, nil); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	entries := []api.ConfigEntry{
		&api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: "web", Protocol: "http"},
		&api.ServiceIntentionsConfigEntry{Kind: api.ServiceIntentions, Name: "web", Sources: []*api.SourceIntention{
			{Name: "api", Action: api.IntentionActionAllow}, {Name: "*", Action: api.IntentionActionDeny},
		}},
	}
	for _, e := range entries {
		if _, _, err := c.ConfigEntries().Set(e, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// snapshotTables is the replicated state a restore must carry over,
// read from one store: everything but the catalog entries of Serf members
// (which each cluster's leader reconciles from its own Serf) and the
// index table (which the reconciliation moves).
type snapshotTables struct {
	Nodes           structs.Nodes
	Services        map[string][]*structs.NodeService
	Checks          map[string]structs.HealthChecks
	KVs             structs.DirEntries
	Tombstones      []state.Tombstone
	Sessions        structs.Sessions
	ConfigEntries   []structs.ConfigEntry
	CAConfig        *structs.CAConfiguration
	CARoots         structs.CARoots
	CAKeys          []*structs.CASigningKey
	CANextSerial    uint64
	AppliedRequests []state.AppliedRequest
}

func readTables(t testing.TB, st *state.Store) snapshotTables {
	t.Helper()
	sn := st.Snapshot()
	defer sn.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tb := snapshotTables{Services: map[string][]*structs.NodeService{}, Checks: map[string]structs.HealthChecks{}}
	nodes, err := sn.Nodes()
	must(err)
	for _, n := range nodes {
		if !strings.HasPrefix(n.Node, "ext-") {
			continue
		}
		tb.Nodes = append(tb.Nodes, n)
		tb.Services[n.Node], err = sn.Services(n.Node)
		must(err)
		tb.Checks[n.Node], err = sn.Checks(n.Node)
		must(err)
	}
	tb.KVs, err = sn.KVs()
	must(err)
	tb.Tombstones, err = sn.Tombstones()
	must(err)
	tb.Sessions, err = sn.Sessions()
	must(err)
	tb.ConfigEntries, err = sn.ConfigEntries()
	must(err)
	tb.CAConfig, err = sn.CAConfig()
	must(err)
	tb.CARoots, tb.CAKeys, err = sn.CARoots()
	must(err)
	tb.CANextSerial = sn.CANextSerial()
	tb.AppliedRequests, err = sn.AppliedRequests()
	must(err)
	return tb
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func follower(t testing.TB, servers []*testServer) *testServer {
	t.Helper()
	for _, ts := range servers {
		if !ts.srv.IsLeader() {
			return ts
		}
	}
	t.Fatal("no follower")
	return nil
}

// TestSnapshotSaveAndRestore saves a snapshot of one cluster through the
// HTTP API and restores it, through a follower (which forwards it to the
// leader over the internal RPC), into a three-server cluster that had
// other data: damaged archives first, which must change nothing, then the
// real one, which must wake a blocking query and leave every server of the
// target with the source's state.
func TestSnapshotSaveAndRestore(t *testing.T) {
	src := startTestCluster(t, 1, false)
	srcAPI := snapshotHTTP(t, src[0].srv)
	populateForSnapshot(t, srcAPI)
	waitForCA(t, src[0].srv)

	rc, qm, err := srcAPI.Snapshot().Save(nil)
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := readTables(t, src[0].srv.fsm.State())
	meta, _, err := snapshot.Read(bytes.NewReader(archive), structs.SnapshotMaxSize)
	if err != nil {
		t.Fatalf("the saved archive does not read back: %v", err)
	}
	if meta.Index == 0 || meta.Index != qm.LastIndex || meta.Term == 0 {
		t.Fatalf("meta index %d term %d, X-Consul-Index %d", meta.Index, meta.Term, qm.LastIndex)
	}

	dst := startTestCluster(t, 3, false)
	leader := waitForLeader(t, dst, 30*time.Second)
	fol := follower(t, dst)
	dstAPI := snapshotHTTP(t, fol.srv)
	if _, err := dstAPI.KV().Put(&api.KVPair{Key: "dst/only", Value: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	for _, ts := range dst {
		waitFor(t, 10*time.Second, ts.name+" to apply the target's own write", func() bool { return kvGet(t, ts.srv, "dst/only", true) != nil })
	}

	t.Run("damaged archives are refused", func(t *testing.T) {
		var undecodable bytes.Buffer
		if err := snapshot.Write(&undecodable, meta, []byte("intact archive, state that is no FSM stream")); err != nil {
			t.Fatal(err)
		}
		flipped := bytes.Clone(archive)
		flipped[len(flipped)/2] ^= 0xff
		cases := []struct {
			name    string
			data    []byte
			mention string
		}{
			{"truncated", archive[:len(archive)*2/3], "corrupt archive"},
			{"a byte changed", flipped, "corrupt archive"},
			{"not an archive", []byte("hello"), "gzip"},
			{"state does not decode", undecodable.Bytes(), "state.bin"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				before := leader.srv.fsm.State()
				beforeIndex := before.LastIndex()
				err := dstAPI.Snapshot().Restore(nil, bytes.NewReader(tc.data))
				if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "invalid snapshot") || !strings.Contains(err.Error(), tc.mention) {
					t.Fatalf("restore: %v; want a 500 naming %q", err, tc.mention)
				}
				// The sentinel crosses the forward from the follower.
				rerr := structs.MethodSnapshotRestore.Call(context.Background(), fol.srv, &structs.SnapshotRestoreRequest{Archive: tc.data}, &struct{}{})
				if !errors.Is(rerr, structs.ErrSnapshotInvalid) {
					t.Fatalf("forwarded restore: %v, want ErrSnapshotInvalid", rerr)
				}
				for _, ts := range dst {
					st := ts.srv.fsm.State()
					if st != before && ts == leader {
						t.Fatalf("%s: a refused restore replaced the store", ts.name)
					}
					if e := kvGet(t, ts.srv, "dst/only", true); e == nil {
						t.Fatalf("%s: a refused restore lost data", ts.name)
					}
				}
				if leader.srv.fsm.State().LastIndex() != beforeIndex {
					t.Fatal("a refused restore moved the index")
				}
			})
		}
	})

	t.Run("restore", func(t *testing.T) {
		pairs, kvMeta, err := dstAPI.KV().List("", nil)
		if err != nil || len(pairs) != 1 {
			t.Fatalf("list before: %v %v", pairs, err)
		}
		type result struct {
			pairs api.KVPairs
			index uint64
			err   error
		}
		woke := make(chan result, 1)
		go func() {
			p, m, err := dstAPI.KV().List("", &api.QueryOptions{WaitIndex: kvMeta.LastIndex, WaitTime: time.Minute})
			if m == nil {
				m = &api.QueryMeta{}
			}
			woke <- result{p, m.LastIndex, err}
		}()
		select {
		case r := <-woke:
			t.Fatalf("the blocking query returned before the restore: %+v", r)
		case <-time.After(300 * time.Millisecond):
		}

		if err := dstAPI.Snapshot().Restore(nil, bytes.NewReader(archive)); err != nil {
			t.Fatal(err)
		}

		var r result
		select {
		case r = <-woke:
		case <-time.After(30 * time.Second):
			t.Fatal("the blocking query did not wake on the restore")
		}
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.index == kvMeta.LastIndex {
			t.Fatalf("woke with the old index %d", r.index)
		}
		var keys []string
		for _, p := range r.pairs {
			keys = append(keys, p.Key)
		}
		if !reflect.DeepEqual(keys, []string{"app/a", "app/b", "app/lock"}) {
			t.Fatalf("woke with keys %v, want the snapshot's", keys)
		}

		// Every server of the target ends with the source's state.
		for _, ts := range dst {
			waitFor(t, 30*time.Second, ts.name+" to hold the restored state", func() bool {
				return reflect.DeepEqual(readTables(t, ts.srv.fsm.State()), want)
			})
		}

		// The cluster goes on: a write lands past the restored index on
		// every server, and the restored CA signs.
		kvPut(t, fol.srv, "after", "restore")
		for _, ts := range dst {
			waitFor(t, 10*time.Second, ts.name+" to apply a write after the restore", func() bool {
				e := kvGet(t, ts.srv, "after", true)
				return e != nil && e.ModifyIndex > meta.Index
			})
		}
		roots, _, err := dstAPI.Connect().CARoots(nil)
		if err != nil || len(roots.Roots) == 0 || roots.Roots[0].ID != want.CARoots[0].ID {
			t.Fatalf("CA roots after restore: %+v %v", roots, err)
		}
	})
}

// TestSnapshotSaveStale: under ?stale a follower answers from its own
// state; by default the save reaches the leader.
func TestSnapshotSaveStale(t *testing.T) {
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 30*time.Second)
	kvPut(t, leader.srv, "k", "v")
	fol := follower(t, servers)
	waitFor(t, 10*time.Second, "the follower to apply the write", func() bool { return kvGet(t, fol.srv, "k", true) != nil })
	for _, stale := range []bool{false, true} {
		var reply structs.SnapshotSaveResponse
		rpc(t, fol.srv, structs.MethodSnapshotSave, &structs.SnapshotSaveRequest{QueryOptions: structs.QueryOptions{AllowStale: stale}}, &reply)
		meta, _, err := snapshot.Read(bytes.NewReader(reply.Archive), structs.SnapshotMaxSize)
		if err != nil {
			t.Fatalf("stale=%v: %v", stale, err)
		}
		if reply.Index != meta.Index || !reply.KnownLeader {
			t.Fatalf("stale=%v: reply index %d, meta %+v", stale, reply.Index, meta)
		}
		found := false
		for _, rc := range meta.Records {
			if rc.Type == "KV" && rc.Count == 1 {
				found = true
			}
		}
		if !found {
			t.Fatalf("stale=%v: records %v, want one KV", stale, meta.Records)
		}
		// LastContact is zero only from the leader.
		if stale == (reply.LastContact == 0) {
			t.Errorf("stale=%v: LastContact %v", stale, reply.LastContact)
		}
	}
}
