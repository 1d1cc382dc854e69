package state

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// watchFixture: nodes a and b; web on a (with a proxy and a check), db on b;
// a session on a holding a lock, bound to a's serfHealth; some KV keys.
func watchFixture(t *testing.T) *Store {
	t.Helper()
	s := NewStore()
	registerNode(t, s, 1, "a")
	registerNode(t, s, 2, "b")
	registerCheck(t, s, 3, "a", structs.SerfCheckID, "", structs.HealthPassing)
	registerCheck(t, s, 4, "b", structs.SerfCheckID, "", structs.HealthPassing)
	registerService(t, s, 5, "a", "web1", "web")
	registerCheck(t, s, 6, "a", "web-http", "web1", structs.HealthPassing)
	must(t, s.EnsureService(7, "a", &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: "web1-proxy",
		Service: "web-sidecar-proxy", Proxy: structs.ConnectProxyConfig{DestinationServiceName: "web"}}))
	registerCheck(t, s, 8, "a", "proxy-alive", "web1-proxy", structs.HealthPassing)
	registerService(t, s, 9, "b", "db1", "db")
	must(t, s.KVSSet(10, kv("app/x", "1")))
	must(t, s.KVSSet(11, kv("app/y", "2")))
	must(t, s.KVSSet(12, kv("other", "3")))
	must(t, s.SessionCreate(13, &structs.Session{ID: "sess", Node: "a", NodeChecks: []string{structs.SerfCheckID}}))
	mustOK(t)(s.KVSLock(14, &structs.DirEntry{Key: "lock", Value: []byte("held"), Session: "sess"}))
	return s
}

func TestWatches(t *testing.T) {
	type readFn func(s *Store, ws memdb.WatchSet) error
	cases := []struct {
		name      string
		read      readFn
		write     func(t *testing.T, s *Store) // must wake the read
		unrelated func(t *testing.T, s *Store) // must not (nil: not checked)
	}{
		{
			name:      "single key write",
			read:      func(s *Store, ws memdb.WatchSet) error { _, _, err := s.KVSGet(ws, "other"); return err },
			write:     func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("other", "new"))) },
			unrelated: func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("app/z", "new"))) },
		},
		{
			name:      "missing key created",
			read:      func(s *Store, ws memdb.WatchSet) error { _, _, err := s.KVSGet(ws, "later"); return err },
			write:     func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("later", "v"))) },
			unrelated: nil,
		},
		{
			name:      "delete under a watched prefix",
			read:      func(s *Store, ws memdb.WatchSet) error { _, _, err := s.KVSList(ws, "app/"); return err },
			write:     func(t *testing.T, s *Store) { must(t, s.KVSDelete(100, "app/x")) },
			unrelated: func(t *testing.T, s *Store) { must(t, s.KVSDelete(100, "other")) },
		},
		{
			name:  "delete-tree under watched keys",
			read:  func(s *Store, ws memdb.WatchSet) error { _, _, err := s.KVSListKeys(ws, "app/", "/"); return err },
			write: func(t *testing.T, s *Store) { must(t, s.KVSDeleteTree(100, "app/")) },
			// A key sharing the watched prefix's first bytes ("apple" for "app/")
			// may wake it spuriously: radix watches are per tree node.
			unrelated: func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("zzz", "v"))) },
		},
		{
			name: "health change of a watched service",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.CheckServiceNodes(ws, "web", nil, false)
				return err
			},
			write: func(t *testing.T, s *Store) { registerCheck(t, s, 100, "a", "mem", "", structs.HealthCritical) },
			unrelated: func(t *testing.T, s *Store) {
				registerCheck(t, s, 100, "b", structs.SerfCheckID, "", structs.HealthCritical)
			},
		},
		{
			name: "health change of a watched service's own check",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.CheckServiceNodes(ws, "web", nil, false)
				return err
			},
			write: func(t *testing.T, s *Store) {
				registerCheck(t, s, 100, "a", "web-http", "web1", structs.HealthCritical)
			},
			unrelated: func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("other", "new"))) },
		},
		{
			name: "connect endpoint health",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.CheckServiceNodes(ws, "web", nil, true)
				return err
			},
			write: func(t *testing.T, s *Store) {
				registerCheck(t, s, 100, "a", "proxy-alive", "web1-proxy", structs.HealthCritical)
			},
			unrelated: func(t *testing.T, s *Store) { registerService(t, s, 100, "b", "db2", "db") },
		},
		{
			name: "node of a watched catalog service changes address",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.ServiceNodes(ws, "web", nil, false)
				return err
			},
			write:     func(t *testing.T, s *Store) { must(t, s.EnsureNode(100, testNode("a", "192.168.0.1"))) },
			unrelated: func(t *testing.T, s *Store) { must(t, s.EnsureNode(100, testNode("b", "192.168.0.2"))) },
		},
		{
			name: "missing service appears",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.CheckServiceNodes(ws, "cache", nil, false)
				return err
			},
			write:     func(t *testing.T, s *Store) { registerService(t, s, 100, "b", "cache1", "cache") },
			unrelated: nil,
		},
		{
			name: "session invalidation releases a lock",
			read: func(s *Store, ws memdb.WatchSet) error { _, _, err := s.KVSGet(ws, "lock"); return err },
			write: func(t *testing.T, s *Store) {
				registerCheck(t, s, 100, "a", structs.SerfCheckID, "", structs.HealthCritical)
			},
			unrelated: func(t *testing.T, s *Store) {
				registerCheck(t, s, 100, "a", structs.SerfCheckID, "", structs.HealthWarning)
			},
		},
		{
			name:      "node services",
			read:      func(s *Store, ws memdb.WatchSet) error { _, _, err := s.NodeServices(ws, "b"); return err },
			write:     func(t *testing.T, s *Store) { registerService(t, s, 100, "b", "db2", "db") },
			unrelated: func(t *testing.T, s *Store) { registerService(t, s, 100, "a", "web2", "web") },
		},
		{
			name:      "node checks",
			read:      func(s *Store, ws memdb.WatchSet) error { _, _, err := s.NodeChecks(ws, "b"); return err },
			write:     func(t *testing.T, s *Store) { must(t, s.DeleteCheck(100, "b", structs.SerfCheckID)) },
			unrelated: nil,
		},
		{
			name: "checks in state",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, err := s.ChecksInState(ws, structs.HealthCritical)
				return err
			},
			write: func(t *testing.T, s *Store) {
				registerCheck(t, s, 100, "b", structs.SerfCheckID, "", structs.HealthCritical)
			},
			unrelated: nil,
		},
		{
			name:      "session list",
			read:      func(s *Store, ws memdb.WatchSet) error { _, _, err := s.SessionList(ws); return err },
			write:     func(t *testing.T, s *Store) { must(t, s.SessionCreate(100, &structs.Session{ID: "new", Node: "b"})) },
			unrelated: func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("other", "new"))) },
		},
		{
			name:      "session get",
			read:      func(s *Store, ws memdb.WatchSet) error { _, _, err := s.SessionGet(ws, "sess"); return err },
			write:     func(t *testing.T, s *Store) { must(t, s.SessionDestroy(100, "sess")) },
			unrelated: nil,
		},
		{
			name: "read-only txn",
			read: func(s *Store, ws memdb.WatchSet) error {
				_, _, errs := s.TxnRO(ws, structs.TxnOps{kvOp(structs.KVGetTree, structs.DirEntry{Key: "app/"})})
				if len(errs) > 0 {
					return errs[0]
				}
				return nil
			},
			write:     func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("app/new", "v"))) },
			unrelated: func(t *testing.T, s *Store) { must(t, s.KVSSet(100, kv("other", "new"))) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.unrelated != nil {
				s := watchFixture(t)
				ws := memdb.NewWatchSet()
				must(t, tc.read(s, ws))
				tc.unrelated(t, s)
				if !quiet(ws) {
					t.Fatal("an unrelated write woke the watch")
				}
			}
			s := watchFixture(t)
			ws := memdb.NewWatchSet()
			must(t, tc.read(s, ws))
			if !quiet(ws) {
				t.Fatal("watch fired before any write")
			}
			tc.write(t, s)
			if !fires(ws) {
				t.Fatal("the write did not wake the watch")
			}
		})
	}
}

// TestBlockingQueryLoop runs a read the way a blocking RPC does: re-read
// until the index passes the one the client has.
func TestBlockingQueryLoop(t *testing.T) {
	s := watchFixture(t)
	minIndex, _, err := s.CheckServiceNodes(nil, "web", nil, false)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan uint64, 1)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			ws := memdb.NewWatchSet()
			ws.Add(s.AbandonCh())
			idx, _, err := s.CheckServiceNodes(ws, "web", nil, false)
			if err != nil {
				close(done)
				return
			}
			if idx > minIndex {
				done <- idx
				return
			}
			if err := ws.WatchCtx(ctx); err != nil {
				close(done)
				return
			}
		}
	}()
	// Unrelated writes do not answer the query; the health change does.
	must(t, s.KVSSet(200, kv("noise", "1")))
	registerService(t, s, 201, "b", "db2", "db")
	registerCheck(t, s, 202, "a", "web-http", "web1", structs.HealthWarning)
	select {
	case got := <-done:
		if got != 202 {
			t.Fatalf("blocking query answered with index %d, want 202", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocking query never answered")
	}
}
