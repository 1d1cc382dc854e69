package proxycfg

import (
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/trellis-mesh/trellis/structs"
)

// readyState returns a sidecar's state machine, driven by the caller
// instead of its own goroutine, once its snapshot is complete.
func readyState(tb testing.TB, h *harness, svc *structs.NodeService) *state {
	tb.Helper()
	s := newState(h.m, idFor(svc), svc, "token-1", &slot{})
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.cancel)
	deadline := time.After(waitTimeout)
	for !s.valid() || complete(s.build()) != nil {
		select {
		case ev := <-s.events:
			s.handleEvent(ev)
		case <-deadline:
			tb.Fatal("the state never became complete")
		}
	}
	return s
}

// subOf returns the watch of s that match selects.
func subOf[R any](tb testing.TB, f *fakeSource[R], s *state, match func(R) bool) *sub[R] {
	tb.Helper()
	for _, w := range f.active(match) {
		if w.ch == s.events {
			return w
		}
	}
	tb.Fatalf("%s: no such watch", f.name)
	return nil
}

// mapID is a map's identity.
func mapID[K comparable, V any](m map[K]V) unsafe.Pointer {
	return reflect.ValueOf(m).UnsafePointer()
}

// TestSnapshotSharing checks what the snapshots of several proxies share,
// and what consecutive snapshots of one proxy share, when an upstream's
// endpoints or the leaf change: a changed upstream is a new value, an
// unchanged one the same, nothing a delivered snapshot reaches changes,
// and proxies given the same result share its endpoint map (from the
// second one on).
func TestSnapshotSharing(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Coalesce = -1 })
	answerEverything(h.f, &sharedResults{})
	first := readyState(t, h, fleetProxy(2, 3))
	a := readyState(t, h, fleetProxy(0, 3))
	b := readyState(t, h, fleetProxy(1, 3))
	prevA, prevB := a.build(), b.build()
	tid := target{service: "hot", dc: "dc1"}.id()
	oldNodes := prevA.ConnectProxy.Upstreams.Get("hot").Endpoints[tid]

	nodes := testNodes("hot", "10.9.9.9")
	for _, s := range []*state{first, a, b} {
		w := subOf(t, h.f.health, s, forService("hot"))
		s.handleEvent(UpdateEvent{CorrelationID: w.corr, Result: nodes})
	}
	nextA, nextB := a.build(), b.build()

	for _, c := range []struct {
		name       string
		prev, next *ConfigSnapshot
	}{{"a", prevA, nextA}, {"b", prevB, nextB}} {
		prevUps, nextUps := c.prev.ConnectProxy.Upstreams, c.next.ConnectProxy.Upstreams
		if c.next.ConnectProxy == c.prev.ConnectProxy || unsafe.SliceData(nextUps) == unsafe.SliceData(prevUps) { //nolint:gosec // checks backing-array identity
			t.Errorf("%s: the snapshot's parts were reused", c.name)
		}
		if len(nextUps) != len(prevUps) {
			t.Fatalf("%s: %d upstreams, then %d", c.name, len(prevUps), len(nextUps))
		}
		for _, up := range nextUps {
			id := up.ID
			if changed := id == "hot"; (up != prevUps.Get(id)) != changed {
				t.Errorf("%s: upstream %s is a new value: %v, want %v", c.name, id, up != prevUps.Get(id), changed)
			}
			if up.Chain != prevUps.Get(id).Chain {
				t.Errorf("%s: upstream %s has a new chain", c.name, id)
			}
		}
		if got := nextUps.Get("hot").Endpoints[tid]; len(got) != 1 || &got[0] != &nodes.Nodes[0] {
			t.Errorf("%s: new endpoints %v", c.name, got)
		}
		if got := prevUps.Get("hot").Endpoints[tid]; len(got) != 3 || &got[0] != &oldNodes[0] {
			t.Errorf("%s: the previous snapshot changed: endpoints %v", c.name, got)
		}
	}
	ea, eb := nextA.ConnectProxy.Upstreams.Get("hot"), nextB.ConnectProxy.Upstreams.Get("hot")
	if ea == eb {
		t.Error("two proxies share an UpstreamSnapshot")
	}
	if mapID(ea.Endpoints) != mapID(eb.Endpoints) {
		t.Error("two proxies given one result after a first one built two endpoint maps")
	}

	// A leaf change leaves the upstreams alone: the same map.
	w := subOf(t, h.f.leaf, a, func(*LeafRequest) bool { return true })
	leaf := testLeaf("svc-0", "02")
	a.handleEvent(UpdateEvent{CorrelationID: w.corr, Result: leaf})
	leafA := a.build()
	if leafA.Leaf() != leaf || leafA.ConnectProxy == nextA.ConnectProxy {
		t.Fatal("the leaf change is not in a new snapshot")
	}
	if unsafe.SliceData(leafA.ConnectProxy.Upstreams) != unsafe.SliceData(nextA.ConnectProxy.Upstreams) { //nolint:gosec // checks backing-array identity
		t.Error("the upstreams were copied for a leaf change")
	}
}

// TestEndpointMaps checks the shared one-entry maps: a result asked
// about once costs no entry; from the second asker on, one map per key
// and result; never a map of another result (even one that lived at the
// same address); and entries go with their results.
func TestEndpointMaps(t *testing.T) {
	type ask struct {
		key string
		r   *structs.IndexedCheckServiceNodes
	}
	r1, r2 := testNodes("a", "10.0.0.1"), testNodes("a", "10.0.0.2")
	empty := &structs.IndexedCheckServiceNodes{}
	for _, tc := range []struct {
		name string
		asks []ask
		// group numbers the maps the asks must get: asks of one group
		// get the same map, 0 means a map of its own.
		group   []int
		entries int
	}{
		{"once", []ask{{"t", r1}}, []int{0}, 0},
		{"several times", []ask{{"t", r1}, {"t", r1}, {"t", r1}, {"t", r1}}, []int{0, 1, 1, 1}, 1},
		{"empty result", []ask{{"t", empty}, {"t", empty}, {"t", empty}}, []int{0, 1, 1}, 1},
		{"other results", []ask{{"t", r1}, {"t", r1}, {"t", r2}, {"t", r2}, {"t", r1}, {"t", r2}}, []int{0, 1, 0, 2, 1, 2}, 2},
		{"other key", []ask{{"t", r1}, {"t", r1}, {"t", r1}, {"u", r1}}, []int{0, 1, 1, 0}, 1},
	} {
		var c endpointMaps
		groups := map[int]unsafe.Pointer{}
		seen := map[unsafe.Pointer]bool{}
		for i, a := range tc.asks {
			m := c.single(a.key, a.r)
			if got, ok := m[a.key]; len(m) != 1 || !ok || got == nil || !sameSlice(got, a.r.Nodes) && len(a.r.Nodes) > 0 {
				t.Errorf("%s: ask %d: map %v, want {%s: %v}", tc.name, i, m, a.key, a.r.Nodes)
			}
			id := mapID(m)
			if g := tc.group[i]; g == 0 || groups[g] == nil {
				if seen[id] {
					t.Errorf("%s: ask %d got a map of another ask", tc.name, i)
				}
				groups[g] = id
			} else if groups[g] != id {
				t.Errorf("%s: ask %d got another map than the previous asks of group %d", tc.name, i, g)
			}
			seen[id] = true
		}
		if c.len() != tc.entries {
			t.Errorf("%s: %d entries, want %d", tc.name, c.len(), tc.entries)
		}
	}

	// An entry of a collected result that lived at the address of the
	// one asked about (here: one of another result's) is not a hit.
	var c endpointMaps
	stale := map[string]structs.CheckServiceNodes{"v": r1.Nodes}
	c.entries = map[uintptr]endpointMap{uintptr(unsafe.Pointer(r2)): {key: "v", nodes: r1.Nodes, m: stale}} //nolint:gosec // checks backing-array identity
	for range 3 {
		if m := c.single("v", r2); mapID(m) == mapID(stale) || !sameSlice(m["v"], r2.Nodes) {
			t.Fatalf("a stale entry was a hit: %v", m)
		}
	}
	runtime.KeepAlive(r1)
	runtime.KeepAlive(r2)
	runtime.KeepAlive(empty)

	// Entries go with their results.
	var c2 endpointMaps
	func() {
		r := testNodes("b", "10.0.0.4")
		c2.single("t", r)
		c2.single("t", r)
	}()
	if c2.len() != 1 {
		t.Fatalf("%d entries, want 1", c2.len())
	}
	deadline := time.Now().Add(waitTimeout)
	for c2.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after their results were collected", c2.len())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
