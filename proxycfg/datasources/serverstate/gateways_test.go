package serverstate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/mgrtest"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// TestProxiesFollowTerminatingGatewayLinks: a real manager over a real
// store. Linking legacy (an ordinary service outside the mesh) to a
// terminating gateway makes the gateway the Connect endpoint of legacy
// for a sidecar's explicit upstream, a transparent proxy's implicit
// upstreams and a mesh gateway's services; removing the entry takes it
// away again.
func TestProxiesFollowTerminatingGatewayLinks(t *testing.T) {
	store := state.NewStore()
	mgrtest.SeedCA(t, store, 1)
	idx := uint64(10)
	register := func(node, addr string, svc *structs.NodeService) {
		t.Helper()
		idx++
		if err := store.EnsureRegistration(idx, &structs.RegisterRequest{Node: node, Address: addr, Service: svc}); err != nil {
			t.Fatal(err)
		}
	}
	register("ext", "203.0.113.20", &structs.NodeService{ID: "legacy", Service: "legacy", Port: 80})
	register("gw", "10.0.0.50", &structs.NodeService{Kind: structs.ServiceKindTerminatingGateway, ID: "term", Service: "term", Port: 8443})
	web := &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: "web-sidecar-proxy", Service: "web-sidecar-proxy", Port: 21000,
		Proxy: structs.ConnectProxyConfig{DestinationServiceName: "web", DestinationServiceID: "web", LocalServicePort: 8080,
			Upstreams: []structs.Upstream{{DestinationName: "legacy", LocalBindPort: 9191}}}}
	tp := &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: "tp-sidecar-proxy", Service: "tp-sidecar-proxy", Port: 21001,
		Proxy: structs.ConnectProxyConfig{DestinationServiceName: "tp", DestinationServiceID: "tp", LocalServicePort: 8080,
			Mode: structs.ProxyModeTransparent}}
	mgw := &structs.NodeService{Kind: structs.ServiceKindMeshGateway, ID: "mesh-gateway", Service: "mesh-gateway", Port: 8443}
	for _, svc := range []*structs.NodeService{web, tp, mgw} {
		register("app", "10.0.0.1", svc)
	}

	m := mgrtest.Manager(t, func() *state.Store { return store }, nil)
	watch := func(svc *structs.NodeService) <-chan *proxycfg.ConfigSnapshot {
		id := proxycfg.ProxyID{Node: "app", ServiceID: svc.ID}
		if err := m.Register(id, svc, proxycfg.SourceLocal, "", true); err != nil {
			t.Fatal(err)
		}
		ch, cancel := m.Watch(id)
		t.Cleanup(cancel)
		return ch
	}
	webCh, tpCh, mgwCh := watch(web), watch(tp), watch(mgw)

	// addrs lists the addresses an upstream's targets resolve to; nil when
	// the proxy has no such upstream.
	addrs := func(u *proxycfg.UpstreamSnapshot) []string {
		if u == nil {
			return nil
		}
		out := []string{}
		for _, eps := range u.Endpoints {
			for _, n := range eps {
				out = append(out, n.Service.Address+n.Node.Address)
			}
		}
		slices.Sort(out)
		return out
	}
	views := []struct {
		name string
		ch   <-chan *proxycfg.ConfigSnapshot
		get  func(*proxycfg.ConfigSnapshot) []string
	}{
		{"sidecar upstream", webCh, func(s *proxycfg.ConfigSnapshot) []string {
			return addrs(s.ConnectProxy.Upstreams.Get("legacy"))
		}},
		// The transparent proxy dials the service by its virtual IP, which
		// the link gives it: the upstream's chain carries it.
		{"transparent proxy", tpCh, func(s *proxycfg.ConfigSnapshot) []string {
			u := s.ConnectProxy.Upstreams.Get("legacy")
			if u == nil || u.Chain == nil {
				return addrs(u)
			}
			return append(addrs(u), u.Chain.AutoVirtualIPs...)
		}},
		{"mesh gateway", mgwCh, func(s *proxycfg.ConfigSnapshot) []string {
			eps, ok := s.MeshGateway.Services["legacy"]
			if !ok {
				return nil
			}
			out := []string{}
			for _, n := range eps {
				out = append(out, n.Service.Address+n.Node.Address)
			}
			return out
		}},
	}
	// Before the link the transparent proxy has no legacy upstream at
	// all, the others one without endpoints.
	before := map[string][]string{"sidecar upstream": {}, "transparent proxy": nil, "mesh gateway": {}}
	// web and tp have 240.0.0.1 and .2 from their sidecars.
	linked := map[string][]string{"sidecar upstream": {"10.0.0.50"}, "transparent proxy": {"10.0.0.50", "240.0.0.3"},
		"mesh gateway": {"10.0.0.50"}}
	await := func(step string, want func(view string) []string) {
		t.Helper()
		for _, v := range views {
			deadline := time.After(10 * time.Second)
			var got []string
			for done := false; !done; {
				select {
				case s := <-v.ch:
					got = v.get(s)
					done = slices.Equal(got, want(v.name)) && (got == nil) == (want(v.name) == nil)
				case <-deadline:
					t.Fatalf("%s: %s: endpoints %q, want %q", step, v.name, got, want(v.name))
				}
			}
		}
	}
	await("before the link", func(v string) []string { return before[v] })

	idx++
	if err := store.EnsureConfigEntry(idx, &structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "term",
		Services: []structs.LinkedService{{Name: "legacy"}}}); err != nil {
		t.Fatal(err)
	}
	await("entry written", func(v string) []string { return linked[v] })

	idx++
	if err := store.DeleteConfigEntry(idx, structs.TerminatingGateway, "term"); err != nil {
		t.Fatal(err)
	}
	await("entry deleted", func(v string) []string { return before[v] })
}
