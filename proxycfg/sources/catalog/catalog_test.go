package catalog

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/agent/leafcert"
	agentlocal "github.com/trellis-mesh/trellis/agent/local"
	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/proxycfg/internal/mgrtest"
	localsource "github.com/trellis-mesh/trellis/proxycfg/sources/local"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture is a real server with the wiring a server agent has: its leaf
// manager, a proxycfg manager over the server-local data sources, its
// local state with the local config source, and the catalog source.
type fixture struct {
	srv   *server.Server
	m     *proxycfg.Manager
	local *agentlocal.State
	src   *Source
}

func newFixture(t *testing.T) *fixture {
	srv, _ := dstest.StartServer(t, "s1")
	lm, err := leafcert.New(leafcert.Config{RPC: srv, Datacenter: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	lm.Start()
	t.Cleanup(lm.Stop)
	m := mgrtest.Manager(t, srv.StateStore, lm)
	st, err := agentlocal.NewState(agentlocal.Config{NodeName: "s1", Datacenter: "dc1", AdvertiseAddr: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := localsource.New(localsource.Config{NodeName: "s1", State: st, Manager: m})
	if err != nil {
		t.Fatal(err)
	}
	ls.Start()
	t.Cleanup(ls.Stop)
	src, err := New(Config{NodeName: "s1", LocalState: st, LocalSource: ls, Manager: m, Store: srv.StateStore, RetryMin: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	// The upstream every test proxy uses: one instance with its sidecar.
	dstest.Register(t, srv, "n-api", &structs.NodeService{ID: "api", Service: "api", Port: 8080})
	dstest.Register(t, srv, "n-api", dstest.Sidecar("api", 21000))
	return &fixture{srv: srv, m: m, local: st, src: src}
}

func (f *fixture) proxies() int { return f.m.Stats().Proxies }

// apiEndpoints is the number of endpoints of the snapshot's api upstream
// (every target together).
func apiEndpoints(s *proxycfg.ConfigSnapshot) int {
	up := s.ConnectProxy.Upstreams.Get("api")
	if up == nil {
		return -1
	}
	n := 0
	for _, eps := range up.Endpoints {
		n += len(eps)
	}
	return n
}

// TestCatalogProxyWatchedThroughServer: a proxy registered in the catalog
// on another node (as by a client agent) is served by the server: its
// watchers share one registration, which follows the catalog, and the
// server drops it within a second of the last watcher leaving.
func TestCatalogProxyWatchedThroughServer(t *testing.T) {
	f := newFixture(t)
	dstest.Register(t, f.srv, "client1", &structs.NodeService{ID: "web", Service: "web", Port: 8080})
	dstest.Register(t, f.srv, "client1", dstest.Sidecar("web", 21000, "api"))

	ctx1, cancel1 := context.WithCancel(context.Background())
	ch1, err := f.src.Watch(ctx1, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy", Node: "client1", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel1()
	ctx2, cancel2 := context.WithCancel(context.Background())
	ch2, err := f.src.Watch(ctx2, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy", Node: "client1", Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel2()

	snap := mgrtest.NextSnapshot(t, ch1)
	for apiEndpoints(snap) != 1 {
		snap = mgrtest.NextSnapshot(t, ch1)
	}
	if snap.ProxyID != (proxycfg.ProxyID{Node: "client1", ServiceID: "web-sidecar-proxy", Token: "tok"}) || snap.ConnectProxy.Leaf == nil {
		t.Fatalf("snapshot of %+v, leaf %v", snap.ProxyID, snap.ConnectProxy.Leaf)
	}
	mgrtest.NextSnapshot(t, ch2)
	if n := f.proxies(); n != 1 {
		t.Fatalf("%d proxies registered for two watchers of one proxy", n)
	}

	// The registration changes in the catalog: the proxy follows.
	dstest.Register(t, f.srv, "client1", dstest.Sidecar("web", 21000, "api", "db"))
	for len(snap.ConnectProxy.Upstreams) != 2 {
		snap = mgrtest.NextSnapshot(t, ch1)
	}

	// One watcher leaves: the proxy stays; the last leaves: it goes.
	cancel1()
	time.Sleep(100 * time.Millisecond)
	if n := f.proxies(); n != 1 {
		t.Fatalf("%d proxies with one watcher left", n)
	}
	left := time.Now()
	cancel2()
	dstest.WaitFor(t, "the proxy's deregistration", func() bool { return f.proxies() == 0 })
	if d := time.Since(left); d > time.Second {
		t.Fatalf("the proxy was dropped %s after its last watcher left, want < 1s", d)
	}
	if st := f.m.Stats(); st.Watchers != 0 {
		t.Fatalf("stats after the last watcher: %+v", st)
	}
}

// TestCatalogDeregistrationAndReturn: a proxy removed from the catalog is
// deregistered from the manager (its watcher stays attached), and served
// again when it is registered again.
func TestCatalogDeregistrationAndReturn(t *testing.T) {
	f := newFixture(t)
	dstest.Register(t, f.srv, "client1", dstest.Sidecar("web", 21000, "api"))
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := f.src.Watch(ctx, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy", Node: "client1"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	mgrtest.NextSnapshot(t, ch)

	dstest.Call(t, f.srv, structs.MethodCatalogDeregister, &structs.DeregisterRequest{Node: "client1", ServiceID: "web-sidecar-proxy"}, &struct{}{})
	dstest.WaitFor(t, "the proxy's deregistration", func() bool { return f.proxies() == 0 })

	dstest.Register(t, f.srv, "client1", dstest.Sidecar("web", 21000, "api"))
	dstest.WaitFor(t, "the proxy's return", func() bool { return f.proxies() == 1 })
	if s := mgrtest.NextSnapshot(t, ch); s.Service.ID != "web-sidecar-proxy" {
		t.Fatalf("snapshot of %s", s.Service.ID)
	}
}

// TestCatalogWatchWaitsForRegistration: an Envoy that connects before its
// registration reached the servers waits, then gets its snapshot.
func TestCatalogWatchWaitsForRegistration(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := f.src.Watch(ctx, proxycfg.ProxyID{ServiceID: "late-sidecar-proxy", Node: "client2"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	mgrtest.NoSnapshot(t, ch, 300*time.Millisecond)
	if n := f.proxies(); n != 0 {
		t.Fatalf("%d proxies before the registration", n)
	}

	sc := dstest.Sidecar("late", 21000, "api")
	sc.ID, sc.Service = "late-sidecar-proxy", "late-sidecar-proxy"
	dstest.Register(t, f.srv, "client2", sc)
	snap := mgrtest.NextSnapshot(t, ch)
	if snap.Service.ID != "late-sidecar-proxy" || snap.ProxyID.Node != "client2" {
		t.Fatalf("snapshot of %+v", snap.ProxyID)
	}

	// Cancelling a watch that is still waiting is clean too.
	ctxWaiting, cancelWaiting := context.WithCancel(context.Background())
	_, err = f.src.Watch(ctxWaiting, proxycfg.ProxyID{ServiceID: "never-sidecar-proxy", Node: "client3"})
	if err != nil {
		t.Fatal(err)
	}
	cancelWaiting()
	cancelWaiting() // twice is harmless
}

// TestCatalogHandsLocalProxiesToTheLocalSource: a proxy registered to this
// very agent is served from the local source's registration (no second
// registration from the catalog).
func TestCatalogHandsLocalProxiesToTheLocalSource(t *testing.T) {
	f := newFixture(t)
	def := &structs.ServiceDefinition{Name: "web", Port: 8080, Connect: &structs.ServiceDefinitionConnect{
		SidecarService: &structs.ServiceDefinition{Proxy: &structs.ConnectProxyConfig{Upstreams: []structs.Upstream{{DestinationName: "api", LocalBindPort: 9000}}}},
	}}
	if _, err := f.local.RegisterService(def, "", false); err != nil {
		t.Fatal(err)
	}
	dstest.WaitFor(t, "the local registration", func() bool { return f.proxies() == 1 })
	// Also in the catalog under this node, as anti-entropy would put it.
	dstest.Register(t, f.srv, "s1", dstest.Sidecar("web", 21000, "api"))

	ctx, cancel := context.WithCancel(context.Background())
	ch, err := f.src.Watch(ctx, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy", Node: "s1", Token: "stream-token"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	snap := mgrtest.NextSnapshot(t, ch)
	if snap.ProxyID != (proxycfg.ProxyID{Node: "s1", ServiceID: "web-sidecar-proxy"}) {
		t.Fatalf("served from %+v, want the local registration", snap.ProxyID)
	}
	time.Sleep(100 * time.Millisecond)
	if n := f.proxies(); n != 1 {
		t.Fatalf("%d proxies: the catalog source registered a local proxy again", n)
	}
}

// TestCatalogCloseDeregisters: Close drops every proxy the source
// registered and refuses new watches.
func TestCatalogCloseDeregisters(t *testing.T) {
	f := newFixture(t)
	dstest.Register(t, f.srv, "client1", dstest.Sidecar("web", 21000, "api"))
	ctx, cancel := context.WithCancel(context.Background())
	_, err := f.src.Watch(ctx, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy", Node: "client1"})
	if err != nil {
		t.Fatal(err)
	}
	dstest.WaitFor(t, "the registration", func() bool { return f.proxies() == 1 })
	f.src.Close()
	if n := f.proxies(); n != 0 {
		t.Fatalf("%d proxies after Close", n)
	}
	cancel() // still safe
	if _, err := f.src.Watch(context.Background(), proxycfg.ProxyID{ServiceID: "web-sidecar-proxy", Node: "client1"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch after Close = %v", err)
	}
}
