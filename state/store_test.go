package state

import (
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Shared test helpers.

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// mustOK checks a (bool, error) result: mustOK(t)(s.KVSLock(...)).
func mustOK(t *testing.T) func(bool, error) {
	return func(ok bool, err error) {
		t.Helper()
		must(t, err)
		if !ok {
			t.Fatalf("operation reported false, want true")
		}
	}
}

// fires reports whether one of the watch set's channels closes within a
// second.
func fires(ws memdb.WatchSet) bool {
	return !ws.Watch(time.After(time.Second))
}

// quiet reports whether none of the watch set's channels closes within a
// short while.
func quiet(ws memdb.WatchSet) bool {
	return ws.Watch(time.After(50 * time.Millisecond))
}

func testNode(name, addr string) *structs.Node {
	return &structs.Node{Node: name, Address: addr}
}

func testService(id, name string, tags ...string) *structs.NodeService {
	return &structs.NodeService{ID: id, Service: name, Tags: tags, Port: 8080}
}

func registerNode(t *testing.T, s *Store, idx uint64, name string) {
	t.Helper()
	must(t, s.EnsureNode(idx, testNode(name, "10.0.0."+name)))
}

func registerService(t *testing.T, s *Store, idx uint64, node, id, name string, tags ...string) {
	t.Helper()
	must(t, s.EnsureService(idx, node, testService(id, name, tags...)))
}

func registerCheck(t *testing.T, s *Store, idx uint64, node, checkID, serviceID, status string) {
	t.Helper()
	must(t, s.EnsureCheck(idx, &structs.HealthCheck{Node: node, CheckID: checkID, Name: checkID, ServiceID: serviceID, Status: status}))
}

func TestAbandonFiresAbandonCh(t *testing.T) {
	s := NewStore()
	ws := memdb.NewWatchSet()
	ws.Add(s.AbandonCh())
	if !quiet(ws) {
		t.Fatal("AbandonCh closed before Abandon")
	}
	s.Abandon()
	s.Abandon() // idempotent
	if !fires(ws) {
		t.Fatal("AbandonCh did not close on Abandon")
	}
}

func TestLastIndexAndNeverZero(t *testing.T) {
	s := NewStore()
	if got := s.LastIndex(); got != 0 {
		t.Fatalf("empty store LastIndex = %d, want 0", got)
	}
	must(t, s.KVSSet(7, &structs.DirEntry{Key: "k", Value: []byte("v")}))
	if got := s.LastIndex(); got != 7 {
		t.Fatalf("LastIndex = %d, want 7", got)
	}
	// Tables never written still answer a non-zero index once anything
	// was written.
	reads := map[string]func() (uint64, error){
		"Nodes":         func() (uint64, error) { i, _, err := s.Nodes(nil, nil); return i, err },
		"GetNode":       func() (uint64, error) { i, _, err := s.GetNode(nil, "x"); return i, err },
		"Services":      func() (uint64, error) { i, _, err := s.Services(nil, nil); return i, err },
		"ServiceNodes":  func() (uint64, error) { i, _, err := s.ServiceNodes(nil, "web", nil, false); return i, err },
		"CheckSvcNodes": func() (uint64, error) { i, _, err := s.CheckServiceNodes(nil, "web", nil, true); return i, err },
		"NodeServices":  func() (uint64, error) { i, _, err := s.NodeServices(nil, "x"); return i, err },
		"NodeChecks":    func() (uint64, error) { i, _, err := s.NodeChecks(nil, "x"); return i, err },
		"ServiceChecks": func() (uint64, error) { i, _, err := s.ServiceChecks(nil, "web"); return i, err },
		"ChecksInState": func() (uint64, error) { i, _, err := s.ChecksInState(nil, "any"); return i, err },
		"SessionList":   func() (uint64, error) { i, _, err := s.SessionList(nil); return i, err },
		"SessionGet":    func() (uint64, error) { i, _, err := s.SessionGet(nil, "x"); return i, err },
		"NodeSessions":  func() (uint64, error) { i, _, err := s.NodeSessions(nil, "x"); return i, err },
		"KVSList":       func() (uint64, error) { i, _, err := s.KVSList(nil, "nothing/"); return i, err },
		"KVSListKeys":   func() (uint64, error) { i, _, err := s.KVSListKeys(nil, "nothing/", "/"); return i, err },
	}
	for name, read := range reads {
		t.Run(name, func(t *testing.T) {
			idx, err := read()
			must(t, err)
			if idx != 7 {
				t.Fatalf("index = %d, want 7", idx)
			}
		})
	}
}

func TestLockDelays(t *testing.T) {
	l := newLockDelays()
	now := time.Now()
	if !l.get("k", now).IsZero() {
		t.Fatal("delay before any was set")
	}
	l.set("k", now, time.Second)
	if got := l.get("k", now); !got.Equal(now.Add(time.Second)) {
		t.Fatalf("delay = %v, want %v", got, now.Add(time.Second))
	}
	l.set("k", now, time.Millisecond) // shorter: the longer one stays
	if got := l.get("k", now); !got.Equal(now.Add(time.Second)) {
		t.Fatalf("shorter delay replaced longer one: %v", got)
	}
	if !l.get("k", now.Add(2*time.Second)).IsZero() {
		t.Fatal("expired delay still reported")
	}
}
