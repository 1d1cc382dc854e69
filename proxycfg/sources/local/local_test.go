package local

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	agentlocal "github.com/trellis-mesh/trellis/agent/local"
	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/proxycfg/internal/mgrtest"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	state *agentlocal.State
	m     *proxycfg.Manager
	src   *Source
}

func newFixture(t *testing.T, resync time.Duration) *fixture {
	store := state.NewStore()
	mgrtest.SeedCA(t, store, 1)
	m := mgrtest.Manager(t, func() *state.Store { return store }, nil)
	st, err := agentlocal.NewState(agentlocal.Config{NodeName: "n1", Datacenter: "dc1", AdvertiseAddr: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	src, err := New(Config{NodeName: "n1", State: st, Manager: m, ResyncInterval: resync})
	if err != nil {
		t.Fatal(err)
	}
	src.Start()
	t.Cleanup(src.Stop) // before the manager's cleanup (registered earlier)
	return &fixture{state: st, m: m, src: src}
}

func (f *fixture) registerWeb(t *testing.T, token string, upstreams ...string) {
	t.Helper()
	sc := &structs.ServiceDefinition{Proxy: &structs.ConnectProxyConfig{}}
	for i, u := range upstreams {
		sc.Proxy.Upstreams = append(sc.Proxy.Upstreams, structs.Upstream{DestinationName: u, LocalBindPort: 9000 + i})
	}
	def := &structs.ServiceDefinition{Name: "web", Port: 8080, Connect: &structs.ServiceDefinitionConnect{SidecarService: sc}}
	if _, err := f.state.RegisterService(def, token, false); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) waitProxies(t *testing.T, n int) {
	t.Helper()
	dstest.WaitFor(t, fmt.Sprintf("%d registered proxies", n), func() bool { return f.m.Stats().Proxies == n })
}

// TestLocalProxiesFollowLocalState: registering a sidecar in local state
// registers it with the manager (and its snapshot can be watched through
// the source), changing it re-registers it, deregistering the service
// deregisters it; ordinary services are left alone.
func TestLocalProxiesFollowLocalState(t *testing.T) {
	f := newFixture(t, time.Hour) // no periodic resync: changes alone must do it
	if _, err := f.state.RegisterService(&structs.ServiceDefinition{Name: "plain", Port: 1}, "", false); err != nil {
		t.Fatal(err)
	}
	// Watch before the proxy exists: the watch waits for it.
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := f.src.Watch(ctx, proxycfg.ProxyID{ServiceID: "web-sidecar-proxy", Token: "stream-token"})
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()

	f.registerWeb(t, "reg-token", "api")
	f.waitProxies(t, 1)
	snap := mgrtest.NextSnapshot(t, ch)
	if snap.Service.ID != "web-sidecar-proxy" || snap.ProxyID != f.src.ProxyID("web-sidecar-proxy") || len(snap.ConnectProxy.Upstreams) != 1 {
		t.Fatalf("snapshot: id %+v service %s upstreams %d", snap.ProxyID, snap.Service.ID, len(snap.ConnectProxy.Upstreams))
	}
	if snap.ProxyID.Token != "" {
		t.Fatal("a local proxy's ID must not carry a token")
	}

	// A changed definition: the proxy restarts with it.
	f.registerWeb(t, "reg-token", "api", "db")
	for snap = mgrtest.NextSnapshot(t, ch); len(snap.ConnectProxy.Upstreams) != 2; snap = mgrtest.NextSnapshot(t, ch) {
	}

	// An ingress gateway is served too.
	if _, err := f.state.RegisterService(&structs.ServiceDefinition{Kind: structs.ServiceKindIngressGateway, Name: "ingress", Port: 8443}, "", false); err != nil {
		t.Fatal(err)
	}
	f.waitProxies(t, 2)

	if _, err := f.state.RemoveService("web"); err != nil {
		t.Fatal(err)
	}
	f.waitProxies(t, 1)
	if _, err := f.state.RemoveService("ingress"); err != nil {
		t.Fatal(err)
	}
	f.waitProxies(t, 0)
}

// TestLocalResyncRepairs: a registration the manager lost (here: removed
// behind the source's back) comes back with the periodic resync.
func TestLocalResyncRepairs(t *testing.T) {
	f := newFixture(t, 50*time.Millisecond)
	f.registerWeb(t, "")
	f.waitProxies(t, 1)
	f.m.Deregister(f.src.ProxyID("web-sidecar-proxy"), proxycfg.SourceLocal)
	if f.m.Stats().Proxies != 0 {
		t.Fatal("deregistration did not take")
	}
	f.waitProxies(t, 1)
}

// TestLocalStopDeregisters: Stop removes every proxy the source
// registered.
func TestLocalStopDeregisters(t *testing.T) {
	f := newFixture(t, time.Hour)
	f.registerWeb(t, "")
	f.waitProxies(t, 1)
	f.src.Stop()
	if n := f.m.Stats().Proxies; n != 0 {
		t.Fatalf("%d proxies after Stop", n)
	}
}
