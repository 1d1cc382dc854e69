package proxycfg

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/structs"
)

// leaf answers a sidecar's leaf watch with the given serial.
func pushLeaf(t *testing.T, h *harness, service, serial string) {
	t.Helper()
	h.f.leaf.waitSub(t, "leaf "+service, func(r *LeafRequest) bool { return r.Service == service }).send(t, testLeaf(service, serial))
}

func leafSerial(serial string) func(*ConfigSnapshot) error {
	return func(s *ConfigSnapshot) error {
		if got := s.Leaf().SerialNumber; got != serial {
			return fmt.Errorf("leaf serial %s, want %s", got, serial)
		}
		return nil
	}
}

// waitDelivered waits until the manager delivered n snapshots in all.
func waitDelivered(t *testing.T, m *Manager, n uint64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for m.Stats().SnapshotsDelivered < n {
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d snapshots, want %d", m.Stats().SnapshotsDelivered, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestNewRequiresDataSources(t *testing.T) {
	f := newFakes()
	ds := f.dataSources()
	ds.Datacenters = nil
	if _, err := New(Config{DataSources: ds, Datacenter: "dc1"}); !errors.Is(err, ErrMissingDataSource) {
		t.Fatalf("missing source: %v", err)
	}
	if _, err := New(Config{DataSources: f.dataSources()}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal("no datacenter accepted")
	}
}

func TestRegisterRejects(t *testing.T) {
	h := newHarness(t, nil)
	noDest := testSidecar("web")
	noDest.Proxy.DestinationServiceName = ""
	typical := &structs.NodeService{ID: "web", Service: "web"}
	refused := testSidecar("refused")
	h.f.leaf.refuse = func(r *LeafRequest) error {
		if r.Service == "refused" {
			return errors.New("bad request")
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		id   ProxyID
		svc  *structs.NodeService
		want error
	}{
		{"typical service", ProxyID{ServiceID: "web"}, typical, ErrUnsupportedKind},
		{"no destination", idFor(noDest), noDest, ErrInvalidProxy},
		{"ID mismatch", ProxyID{ServiceID: "other"}, testSidecar("web"), ErrInvalidProxy},
		{"nil service", ProxyID{ServiceID: "x"}, nil, ErrInvalidProxy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := h.m.Register(tc.id, tc.svc, SourceLocal, "", false); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if err := h.m.Register(idFor(refused), refused, SourceLocal, "", false); err == nil {
		t.Fatal("a refused initial watch must fail Register")
	}
	if n := len(h.f.roots.active(nil)); n != 0 {
		t.Fatalf("a failed Register left %d roots watches running", n)
	}
	if st := h.m.Stats(); st.Proxies != 0 {
		t.Fatalf("stats after failures: %+v", st)
	}
	h.m.Close()
	if err := h.m.Register(idFor(refused), refused, SourceLocal, "", false); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	ch, cancel := h.m.Watch(idFor(refused))
	defer cancel()
	if _, ok := <-ch; ok {
		t.Fatal("Watch after Close must return a closed channel")
	}
}

func TestWatchBeforeRegister(t *testing.T) {
	h := newHarness(t, nil)
	h.f.autoBasics()
	svc := testSidecar("web")
	id := idFor(svc)
	ch, cancel := h.m.Watch(id)
	defer cancel()
	noSnap(t, ch, 30*time.Millisecond)
	if st := h.m.Stats(); st.Watchers != 1 || st.Proxies != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := h.m.Register(id, svc, SourceCatalog, "token-1", false); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, ch, leafSerial("01"))
}

func TestNewWatcherGetsCurrentSnapshotAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.f.autoBasics()
	id, ch := h.register(testSidecar("web"))
	first := waitSnap(t, ch, nil)

	ch2, cancel := h.m.Watch(id)
	defer cancel()
	select {
	case s := <-ch2:
		if s != first {
			t.Fatalf("new watcher got version %d, want the current %d", s.Version, first.Version)
		}
	default:
		t.Fatal("a new watcher must find the current snapshot in its channel")
	}
}

func TestSlowWatcherGetsOnlyTheLatest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Coalesce = -1 })
	h.f.autoBasics()
	id, slow := h.register(testSidecar("web"))
	fast, cancel := h.m.Watch(id)
	defer cancel()
	waitSnap(t, fast, leafSerial("01"))
	delivered := h.m.Stats().SnapshotsDelivered
	for i := 2; i <= 6; i++ {
		pushLeaf(t, h, "web", fmt.Sprintf("%02d", i))
		delivered++
		waitDelivered(t, h.m, delivered) // one snapshot per change: the slow watcher never reads
	}
	got := <-slow
	if got.Leaf().SerialNumber != "06" {
		t.Fatalf("slow watcher got serial %s, want only the latest (06)", got.Leaf().SerialNumber)
	}
	select {
	case s := <-slow:
		t.Fatalf("slow watcher has a second snapshot (serial %s)", s.Leaf().SerialNumber)
	default:
	}
	waitSnap(t, fast, leafSerial("06"))
}

func TestCoalescing(t *testing.T) {
	for _, tc := range []struct {
		name     string
		coalesce time.Duration
		burst    int
		// want is how many snapshots the burst may produce: its first
		// event at once (the window since the last snapshot is over),
		// the rest together at the window's end.
		minWant, maxWant uint64
	}{
		{"a burst within the window is two snapshots at most", 200 * time.Millisecond, 10, 1, 2},
		{"no coalescing: about one snapshot per event", -1, 10, 2, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.Coalesce = tc.coalesce })
			h.f.autoBasics()
			_, ch := h.register(testSidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191}))
			pushChain("db", testChain("db", dbTarget))(t, h)
			pushEndpoints(dbTarget, testNodes("db", "10.0.0.1"))(t, h)
			waitSnap(t, ch, upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 1}))
			noSnap(t, ch, max(tc.coalesce, 0)+50*time.Millisecond) // nothing pending, the window is over
			before := h.m.Stats().SnapshotsDelivered

			s := h.f.health.waitSub(t, "db", healthFor("db", "", "dc1"))
			addrs := []string{}
			for i := range tc.burst {
				addrs = append(addrs, fmt.Sprintf("10.0.0.%d", i+1))
				s.send(t, testNodes("db", addrs...))
				time.Sleep(5 * time.Millisecond) // a burst spread over 50ms
			}
			waitSnap(t, ch, upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): tc.burst}))
			time.Sleep(2*max(tc.coalesce, 0) + 20*time.Millisecond)
			n := h.m.Stats().SnapshotsDelivered - before
			if n < tc.minWant || n > tc.maxWant {
				t.Fatalf("burst of %d events gave %d snapshots, want %d..%d", tc.burst, n, tc.minWant, tc.maxWant)
			}
		})
	}
}

// TestCoalescingLeadingEdge pins when the window delays: not the first
// change after a quiet window (delivered at once, where Consul waits for
// its whole window), but a change within the window of the last snapshot
// (held to the window's end). The window is long so that a slow machine
// cannot blur the two.
func TestCoalescingLeadingEdge(t *testing.T) {
	const window = 1500 * time.Millisecond
	h := newHarness(t, func(c *Config) { c.Coalesce = window })
	h.f.autoBasics()
	_, ch := h.register(testSidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191}))
	pushChain("db", testChain("db", dbTarget))(t, h)
	pushEndpoints(dbTarget, testNodes("db", "10.0.0.1"))(t, h)
	waitSnap(t, ch, upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 1}))
	noSnap(t, ch, window+100*time.Millisecond) // the window of the last snapshot is over

	s := h.f.health.waitSub(t, "db", healthFor("db", "", "dc1"))
	two := upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 2})
	sent := time.Now()
	s.send(t, testNodes("db", "10.0.0.1", "10.0.0.2"))
	waitSnap(t, ch, two)
	if d := time.Since(sent); d >= window {
		t.Fatalf("the first change after a quiet window took %v, as long as the window (%v)", d, window)
	}

	s.send(t, testNodes("db", "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	noSnap(t, ch, window/3) // within the window: held
	waitSnap(t, ch, upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 3}))
}

func TestRateLimit(t *testing.T) {
	const proxies = 5
	h := newHarness(t, func(c *Config) {
		c.Coalesce = -1
		c.RateLimit = RateLimit{PerSecond: 20, Burst: 1}
	})
	h.f.autoBasics()
	start := time.Now()
	var chans []<-chan *ConfigSnapshot
	for i := range proxies {
		_, ch := h.register(testSidecar(fmt.Sprintf("svc-%d", i)))
		chans = append(chans, ch)
	}
	for _, ch := range chans {
		waitSnap(t, ch, nil)
	}
	// Burst 1 at 20/s: the first goes at once, the other four wait
	// 50ms each.
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("%d first snapshots took %v; the limit allows no less than 200ms", proxies, el)
	}
}

func TestTokenBucket(t *testing.T) {
	now := time.Unix(0, 0)
	b := newTokenBucket(10, 2, func() time.Time { return now })
	for i, want := range []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond} {
		if got := b.reserve(); got != want {
			t.Fatalf("reservation %d waits %v, want %v", i, got, want)
		}
	}
	b.unreserve()
	b.unreserve()
	now = now.Add(time.Second)
	if got := b.reserve(); got != 0 {
		t.Fatalf("after refilling: wait %v", got)
	}
}

func TestReRegister(t *testing.T) {
	dbUp := structs.Upstream{DestinationName: "db", LocalBindPort: 9191}
	for _, tc := range []struct {
		name    string
		change  func(svc *structs.NodeService)
		token   string
		source  ProxySource
		over    bool
		restart bool
	}{
		{name: "unchanged (new Raft index) does nothing", change: func(s *structs.NodeService) { s.ModifyIndex = 99 }, token: "token-1", source: SourceLocal},
		{name: "another source without overwrite does nothing", change: func(s *structs.NodeService) { s.Port = 1 }, token: "token-1", source: SourceCatalog},
		{name: "a changed definition restarts", change: func(s *structs.NodeService) {
			s.Proxy.Upstreams = append(s.Proxy.Upstreams, structs.Upstream{DestinationName: "cache", LocalBindPort: 9292})
		}, token: "token-1", source: SourceLocal, restart: true},
		{name: "a changed token restarts", change: func(*structs.NodeService) {}, token: "token-2", source: SourceLocal, restart: true},
		{name: "another source with overwrite and a change restarts", change: func(s *structs.NodeService) { s.Port = 1 }, token: "token-1", source: SourceCatalog, over: true, restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.f.autoBasics()
			svc := testSidecar("web", dbUp)
			id, ch := h.register(svc)
			waitSnap(t, ch, nil)
			oldRoots := h.f.roots.waitSub(t, "roots", nil)
			calls := h.f.roots.callCount()

			svc2 := svc.Clone()
			tc.change(svc2)
			if err := h.m.Register(id, svc2, tc.source, tc.token, tc.over); err != nil {
				t.Fatal(err)
			}
			if !tc.restart {
				noSnap(t, ch, 50*time.Millisecond)
				if oldRoots.cancelled() || h.f.roots.callCount() != calls {
					t.Fatal("watches were restarted")
				}
				return
			}
			if !oldRoots.cancelled() {
				t.Fatal("the old state's watches are still running after a restart")
			}
			s := waitSnap(t, ch, func(s *ConfigSnapshot) error {
				if !sameService(s.Service, svc2) {
					return errors.New("old definition")
				}
				return nil
			})
			if s.Version < 2 {
				t.Fatalf("version %d after a restart", s.Version)
			}
			h.f.roots.waitSub(t, "roots (new state)", nil)
			if n := h.f.roots.callCount(); n != calls+1 {
				t.Fatalf("roots watched %d times, want %d", n, calls+1)
			}
			if len(svc2.Proxy.Upstreams) == 2 {
				h.f.chain.waitSub(t, "cache", chainFor("cache"))
			}
		})
	}
}

func TestDeregister(t *testing.T) {
	h := newHarness(t, nil)
	h.f.autoBasics()
	svc := testSidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191})
	id, ch := h.register(svc)
	waitSnap(t, ch, nil)

	h.m.Deregister(id, SourceCatalog) // not the owner: ignored
	if h.m.Stats().Proxies != 1 {
		t.Fatal("deregistered by a source that does not own the proxy")
	}

	h.m.Deregister(id, SourceLocal)
	// Every watch is cancelled by the time Deregister returns.
	for name, n := range map[string]int{
		"roots": len(h.f.roots.active(nil)), "leaf": len(h.f.leaf.active(nil)), "intentions": len(h.f.intentions.active(nil)),
		"config entry": len(h.f.configEntry.active(nil)), "service config": len(h.f.serviceConfig.active(nil)), "chain": len(h.f.chain.active(nil)),
	} {
		if n != 0 {
			t.Errorf("%d %s watches still running", n, name)
		}
	}
	if st := h.m.Stats(); st.Proxies != 0 || st.Watchers != 1 {
		t.Fatalf("stats %+v", st)
	}
	// The watcher stays attached, without snapshots, and a new watcher
	// gets nothing stale.
	noSnap(t, ch, 30*time.Millisecond)
	ch2, cancel2 := h.m.Watch(id)
	noSnap(t, ch2, 10*time.Millisecond)
	cancel2()
	if _, ok := <-ch2; ok {
		t.Fatal("cancel must close the channel")
	}
	cancel2() // harmless

	if err := h.m.Register(id, svc, SourceLocal, "token-1", true); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, ch, nil)
}

func TestCancelForgetsUnregisteredWatch(t *testing.T) {
	h := newHarness(t, nil)
	_, cancel := h.m.Watch(ProxyID{Node: "n", ServiceID: "nothing"})
	if h.m.Stats().Watchers != 1 {
		t.Fatal("watch not counted")
	}
	cancel()
	h.m.mu.Lock()
	n := len(h.m.slots)
	h.m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d slots left after the only watcher of an unregistered proxy left", n)
	}
}

// TestEndpointChangeOnlyAffectsItsProxies: of many proxies, only those
// with the changed upstream get a new snapshot.
func TestEndpointChangeOnlyAffectsItsProxies(t *testing.T) {
	h := newHarness(t, nil)
	h.f.autoBasics()
	h.f.chain.setRespond(func(r *structs.DiscoveryChainRequest) any {
		return testChain(r.Name, target{service: r.Name, dc: "dc1"})
	})
	h.f.health.setRespond(func(*structs.ServiceSpecificRequest) any { return &structs.IndexedCheckServiceNodes{} })
	const proxies, affected = 20, 4
	var chans []<-chan *ConfigSnapshot
	for i := range proxies {
		up := "cold"
		if i < affected {
			up = "hot"
		}
		_, ch := h.register(testSidecar(fmt.Sprintf("svc-%d", i), structs.Upstream{DestinationName: up, LocalBindPort: 9191}))
		chans = append(chans, ch)
	}
	for _, ch := range chans {
		waitSnap(t, ch, func(s *ConfigSnapshot) error {
			for _, u := range s.ConnectProxy.Upstreams {
				if len(u.Endpoints) != 1 {
					return errors.New("endpoints not known yet")
				}
			}
			return nil
		})
	}
	time.Sleep(30 * time.Millisecond)
	before := h.m.Stats()

	hot := h.f.health.active(forService("hot"))
	if len(hot) != affected {
		t.Fatalf("%d hot watches", len(hot))
	}
	nodes := testNodes("hot", "10.0.0.1")
	for _, s := range hot {
		s.send(t, nodes)
	}
	for i, ch := range chans {
		if i < affected {
			waitSnap(t, ch, upstreamHas("hot", "resolver:hot.default.default.dc1", map[string]int{"hot.default.default.dc1": 1}))
		}
	}
	for i, ch := range chans {
		if i >= affected {
			noSnap(t, ch, time.Millisecond)
		}
	}
	after := h.m.Stats()
	if d := after.SnapshotsDelivered - before.SnapshotsDelivered; d != affected {
		t.Fatalf("%d snapshots delivered, want %d", d, affected)
	}
	if d := after.EventsHandled - before.EventsHandled; d != affected {
		t.Fatalf("%d events handled, want %d", d, affected)
	}
}

// TestCloseLeavesNoGoroutine registers, watches, cancels and closes, then
// checks that nothing is left running (beyond what ran before).
func TestCloseLeavesNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	f := newFakes()
	f.autoBasics()
	f.chain.setRespond(func(r *structs.DiscoveryChainRequest) any {
		return testChain(r.Name, target{service: r.Name, dc: "dc1"})
	})
	m, err := New(Config{DataSources: f.dataSources(), Datacenter: "dc1", Coalesce: time.Millisecond, RateLimit: RateLimit{PerSecond: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	var chans []<-chan *ConfigSnapshot
	for i := range 20 {
		svc := testSidecar(fmt.Sprintf("svc-%d", i), structs.Upstream{DestinationName: "db", LocalBindPort: 9191})
		if i%5 == 0 {
			svc = testGateway(structs.ServiceKindTerminatingGateway, fmt.Sprintf("term-%d", i))
		}
		id := idFor(svc)
		if err := m.Register(id, svc, SourceLocal, "t", false); err != nil {
			t.Fatal(err)
		}
		ch, cancel := m.Watch(id)
		if i%2 == 0 {
			cancel()
		} else {
			chans = append(chans, ch)
		}
	}
	waitSnap(t, chans[0], nil)
	m.Close()
	m.Close()
	for _, ch := range chans {
		for range ch { // drain: Close closes every channel
		}
	}
	for _, src := range [][]*sub[*structs.DCSpecificRequest]{f.roots.active(nil)} {
		if len(src) != 0 {
			t.Fatalf("%d watches still running after Close", len(src))
		}
	}
	f.wg.Wait()
	goleak.VerifyNone(t, ignore)
}
