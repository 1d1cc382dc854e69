package proxycfg

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// step is one stage of a state-machine test: do pushes events (and may
// assert on the watches the fakes saw), then want must accept a
// delivered snapshot.
type step struct {
	name string
	do   func(t *testing.T, h *harness)
	want func(s *ConfigSnapshot) error
}

// Matchers for the fakes' recorded requests.
func chainFor(name string) func(*structs.DiscoveryChainRequest) bool {
	return func(r *structs.DiscoveryChainRequest) bool { return r.Name == name }
}

func healthFor(service, filter, dc string) func(*structs.ServiceSpecificRequest) bool {
	return func(r *structs.ServiceSpecificRequest) bool {
		return r.ServiceName == service && r.QueryOptions.Filter == filter && r.Datacenter == dc && r.Connect
	}
}

// pushChain sends a chain to the one running chain watch of name.
func pushChain(name string, resp *structs.DiscoveryChainResponse) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		h.f.chain.waitSub(t, "chain "+name, chainFor(name)).send(t, resp)
	}
}

// pushEndpoints sends endpoints to the one running health watch of a
// target.
func pushEndpoints(tg target, nodes *structs.IndexedCheckServiceNodes) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		h.f.health.waitSub(t, "target "+tg.id(), healthFor(tg.service, tg.filter, tg.dc)).send(t, nodes)
	}
}

func steps(fns ...func(*testing.T, *harness)) func(*testing.T, *harness) {
	return func(t *testing.T, h *harness) {
		for _, fn := range fns {
			fn(t, h)
		}
	}
}

// upstreamHas checks an upstream's chain start node and the number of
// endpoints per target (exactly those targets).
func upstreamHas(id UpstreamID, start string, endpoints map[string]int) func(*ConfigSnapshot) error {
	return func(s *ConfigSnapshot) error {
		if s.ConnectProxy == nil {
			return errors.New("not a connect-proxy snapshot")
		}
		u := s.ConnectProxy.Upstreams.Get(id)
		if u == nil {
			return fmt.Errorf("no upstream %q", id)
		}
		if u.Chain == nil || u.Chain.StartNode != start {
			return fmt.Errorf("upstream %q chain %+v, want start %q", id, u.Chain, start)
		}
		if len(u.Endpoints) != len(endpoints) {
			return fmt.Errorf("upstream %q has endpoints for %d targets, want %d", id, len(u.Endpoints), len(endpoints))
		}
		for tid, n := range endpoints {
			eps, ok := u.Endpoints[tid]
			if !ok || len(eps) != n {
				return fmt.Errorf("upstream %q target %s: %d endpoints (known %v), want %d", id, tid, len(eps), ok, n)
			}
		}
		return nil
	}
}

var (
	dbTarget = target{service: "db", dc: "dc1"}
	dbV1     = target{service: "db", subset: "v1", filter: `Service.Meta.version == "v1"`, dc: "dc1"}
	dbV2     = target{service: "db", subset: "v2", filter: `Service.Meta.version == "v2"`, dc: "dc1"}
)

func TestConnectProxyStateMachine(t *testing.T) {
	dbUp := structs.Upstream{DestinationName: "db", LocalBindPort: 9191}
	cacheDC2 := structs.Upstream{DestinationName: "cache", Datacenter: "dc2", LocalBindPort: 9292, MeshGateway: structs.MeshGatewayConfig{Mode: "local"}}
	cacheTarget := target{service: "cache", dc: "dc2", mgw: "local"}

	cases := []struct {
		name  string
		proxy *structs.NodeService
		// setup prepares the fakes before the proxy registers (nil: the
		// test answers every watch itself).
		setup func(f *fakes)
		steps []step
	}{
		{
			name:  "basics: roots, leaf, intentions, mesh, config",
			proxy: testSidecar("web"),
			steps: []step{
				{
					name: "nothing delivered until intentions are known",
					do: func(t *testing.T, h *harness) {
						h.f.roots.waitSub(t, "roots", nil).send(t, basicRoots)
						h.f.leaf.waitSub(t, "leaf web", func(r *LeafRequest) bool { return r.Service == "web" && r.Datacenter == "dc1" && r.Token == "token-1" }).
							send(t, testLeaf("web", "01"))
						h.f.configEntry.waitSub(t, "mesh", func(r *structs.ConfigEntryQuery) bool { return r.Kind == structs.MeshConfig }).
							send(t, &structs.ConfigEntryResponse{Entry: &structs.MeshConfigEntry{TransparentProxy: structs.TransparentProxyMeshConfig{MeshDestinationsOnly: true}}})
						h.f.serviceConfig.waitSub(t, "config web", func(r *structs.ServiceConfigRequest) bool { return r.Name == "web" }).
							send(t, &structs.ServiceConfigResponse{Protocol: "http"})
					},
				},
				{
					name: "intentions make it valid",
					do: func(t *testing.T, h *harness) {
						h.f.intentions.waitSub(t, "intentions web", func(r *structs.ServiceSpecificRequest) bool { return r.ServiceName == "web" }).
							send(t, &structs.IndexedIntentions{Intentions: structs.Intentions{
								{SourceName: "api", DestinationName: "web", Action: structs.IntentionActionAllow, Precedence: 9},
								{SourceName: "*", DestinationName: "web", Action: structs.IntentionActionDeny, Precedence: 8},
							}})
					},
					want: func(s *ConfigSnapshot) error {
						cp := s.ConnectProxy
						switch {
						case s.Kind != structs.ServiceKindConnectProxy || cp == nil:
							return errors.New("wrong kind")
						case s.TrustDomain() != basicRoots.TrustDomain || s.Roots.ActiveRootID != "root-1":
							return fmt.Errorf("roots %+v", s.Roots)
						case s.Leaf() == nil || s.Leaf().SerialNumber != "01":
							return fmt.Errorf("leaf %+v", s.Leaf())
						case len(cp.Intentions) != 2 || cp.Intentions[0].SourceName != "api":
							return fmt.Errorf("intentions %v", cp.Intentions)
						case s.MeshConfig == nil || !s.MeshConfig.TransparentProxy.MeshDestinationsOnly:
							return fmt.Errorf("mesh %+v", s.MeshConfig)
						case cp.ServiceConfig.Protocol != "http" || !s.IntentionDefaultAllow:
							return fmt.Errorf("config %+v default allow %v", cp.ServiceConfig, s.IntentionDefaultAllow)
						case s.Version != 1 || s.Service.ID != "web-sidecar-proxy" || s.ProxyID.Token != "token-1":
							return fmt.Errorf("version %d service %s", s.Version, s.Service.ID)
						}
						return nil
					},
				},
				{
					name: "leaf renewal and root rotation",
					do: func(t *testing.T, h *harness) {
						h.f.leaf.waitSub(t, "leaf web", nil).send(t, testLeaf("web", "02"))
						h.f.roots.waitSub(t, "roots", nil).send(t, testRoots(basicRoots.TrustDomain, "root-2"))
					},
					want: func(s *ConfigSnapshot) error {
						if s.Leaf().SerialNumber != "02" || s.Roots.ActiveRootID != "root-2" {
							return fmt.Errorf("leaf %s root %s", s.Leaf().SerialNumber, s.Roots.ActiveRootID)
						}
						return nil
					},
				},
			},
		},
		{
			name:  "chain changes add and cancel target watches",
			proxy: testSidecar("web", dbUp),
			setup: (*fakes).autoBasics,
			steps: []step{
				{
					name: "default chain, then its endpoints",
					do: steps(
						pushChain("db", testChain("db", dbTarget)),
						pushEndpoints(dbTarget, testNodes("db", "10.0.1.1", "10.0.1.2")),
					),
					want: upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 2}),
				},
				{
					name: "a splitter replaces the target by two subsets",
					do: func(t *testing.T, h *harness) {
						old := h.f.health.waitSub(t, "db", healthFor("db", "", "dc1"))
						pushChain("db", testChain("db", dbV1, dbV2))(t, h)
						h.f.health.waitNone(t, "db (default target)", healthFor("db", "", "dc1"))
						if !old.cancelled() {
							t.Fatal("the old target's watch was not cancelled")
						}
						// An event of the cancelled watch that was already in
						// flight must be ignored, even though it reaches the
						// channel.
						old.ch <- UpdateEvent{CorrelationID: old.corr, Result: testNodes("db", "10.9.9.9")}
						pushEndpoints(dbV1, testNodes("db", "10.0.1.1"))(t, h)
						pushEndpoints(dbV2, testNodes("db", "10.0.2.1", "10.0.2.2", "10.0.2.3"))(t, h)
					},
					want: upstreamHas("db", "splitter:db.default.default", map[string]int{dbV1.id(): 1, dbV2.id(): 3}),
				},
				{
					name: "back to the default chain: subsets cancelled, a fresh target watch",
					do: func(t *testing.T, h *harness) {
						before := len(h.f.health.matching(true, healthFor("db", "", "dc1")))
						pushChain("db", testChain("db", dbTarget))(t, h)
						h.f.health.waitNone(t, "db v1", healthFor("db", dbV1.filter, "dc1"))
						h.f.health.waitNone(t, "db v2", healthFor("db", dbV2.filter, "dc1"))
						s := h.f.health.waitSub(t, "db", healthFor("db", "", "dc1"))
						if after := len(h.f.health.matching(true, healthFor("db", "", "dc1"))); after != before+1 {
							t.Fatalf("default target watched %d times, want %d", after, before+1)
						}
						s.send(t, testNodes("db", "10.0.1.7"))
					},
					want: upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 1}),
				},
				{
					name: "an error keeps the last endpoints; an empty list is known-empty",
					do: func(t *testing.T, h *harness) {
						s := h.f.health.waitSub(t, "db", healthFor("db", "", "dc1"))
						s.sendEvent(t, UpdateEvent{CorrelationID: s.corr, Err: errors.New("rpc error")})
						s.send(t, &structs.IndexedCheckServiceNodes{})
					},
					want: upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 0}),
				},
			},
		},
		{
			name:  "remote datacenter through the local mesh gateways",
			proxy: testSidecar("web", cacheDC2),
			setup: (*fakes).autoBasics,
			steps: []step{{
				name: "chain, target endpoints in dc2, gateways of dc1",
				do: func(t *testing.T, h *harness) {
					ch := h.f.chain.waitSub(t, "chain cache", chainFor("cache"))
					if ch.req.EvaluateInDatacenter != "dc2" || ch.req.Datacenter != "dc1" || ch.req.OverrideMeshGateway.Mode != "local" {
						t.Fatalf("chain request %+v", ch.req)
					}
					ch.send(t, testChain("cache", cacheTarget))
					pushEndpoints(cacheTarget, testNodes("cache", "10.2.0.1"))(t, h)
					h.f.byKind.waitSub(t, "dc1 gateways", func(r *structs.ServiceKindRequest) bool {
						return r.Kind == structs.ServiceKindMeshGateway && r.Datacenter == "dc1"
					}).send(t, testNodes("gw", "10.0.0.100"))
				},
				want: func(s *ConfigSnapshot) error {
					u := s.ConnectProxy.Upstreams.Get("cache?dc=dc2")
					if u == nil || len(u.Endpoints[cacheTarget.id()]) != 1 || len(u.GatewayEndpoints["dc1"]) != 1 {
						return fmt.Errorf("upstream %+v", u)
					}
					if dc := MeshGatewayDatacenter(u.Chain.Targets[cacheTarget.id()], s.Datacenter); dc != "dc1" {
						return fmt.Errorf("gateway dc %q", dc)
					}
					if u.Upstream.LocalBindPort != 9292 {
						return fmt.Errorf("definition %+v", u.Upstream)
					}
					return nil
				},
			}},
		},
		{
			name:  "central upstream config changes the chain request",
			proxy: testSidecar("web", dbUp),
			setup: autoBasicsButConfig,
			steps: []step{
				{
					name: "no chain watch before the central config",
					do: func(t *testing.T, h *harness) {
						cfg := h.f.serviceConfig.waitSub(t, "config", nil)
						if got := cfg.req.Upstreams; len(got) != 1 || got[0] != "db" {
							t.Fatalf("config request upstreams %v", got)
						}
						time.Sleep(20 * time.Millisecond)
						if n := h.f.chain.callCount(); n != 0 {
							t.Fatalf("%d chain watches before the config", n)
						}
						cfg.send(t, &structs.ServiceConfigResponse{Protocol: "http", UpstreamConfigs: map[string]*structs.UpstreamConfig{
							"db": {Protocol: "http", ConnectTimeoutMs: 2500},
						}})
						c := h.f.chain.waitSub(t, "db", chainFor("db"))
						if c.req.OverrideProtocol != "http" || c.req.OverrideConnectTimeout != 2500*time.Millisecond {
							t.Fatalf("chain request %+v", c.req)
						}
						c.send(t, testChain("db", dbTarget))
						pushEndpoints(dbTarget, testNodes("db", "10.0.1.1"))(t, h)
					},
					want: upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 1}),
				},
				{
					name: "a new protocol restarts the chain watch, keeping endpoints meanwhile",
					do: func(t *testing.T, h *harness) {
						old := h.f.chain.waitSub(t, "db", chainFor("db"))
						h.f.serviceConfig.waitSub(t, "config", nil).send(t, &structs.ServiceConfigResponse{Protocol: "http", UpstreamConfigs: map[string]*structs.UpstreamConfig{
							"db": {Protocol: "grpc"},
						}})
						c := h.f.chain.waitSub(t, "db grpc", func(r *structs.DiscoveryChainRequest) bool { return r.Name == "db" && r.OverrideProtocol == "grpc" })
						if !old.cancelled() {
							t.Fatal("old chain watch not cancelled")
						}
						c.send(t, testChain("db", dbTarget))
					},
					want: func(s *ConfigSnapshot) error {
						u := s.ConnectProxy.Upstreams.Get("db")
						if u.Config == nil || u.Config.Protocol != "grpc" || len(u.Endpoints[dbTarget.id()]) != 1 {
							return fmt.Errorf("upstream %+v", u)
						}
						return nil
					},
				},
			},
		},
		{
			name:  "transparent mode: implicit upstreams follow intentions",
			proxy: testSidecar("web"),
			setup: autoBasicsButConfig,
			steps: []step{
				{
					name: "central config turns on transparent mode",
					do: func(t *testing.T, h *harness) {
						h.f.serviceConfig.waitSub(t, "config", nil).send(t, &structs.ServiceConfigResponse{
							Mode: structs.ProxyModeTransparent, UpstreamDefaults: &structs.UpstreamConfig{ConnectTimeoutMs: 1234},
						})
						h.f.intentionUpstreams.waitSub(t, "web", func(r *structs.ServiceSpecificRequest) bool { return r.ServiceName == "web" }).
							send(t, &structs.ServiceNames{Services: []string{"api", "db", "web"}})
						if r := h.f.chain.waitSub(t, "api", chainFor("api")).req; r.OverrideConnectTimeout != 1234*time.Millisecond {
							t.Fatalf("implicit upstream chain request %+v: the upstream defaults do not apply", r)
						}
						pushChain("api", testChain("api", target{service: "api", dc: "dc1"}))(t, h)
						pushChain("db", testChain("db", dbTarget))(t, h)
						if n := len(h.f.chain.active(chainFor("web"))); n != 0 {
							t.Fatal("the service became its own upstream")
						}
					},
					want: func(s *ConfigSnapshot) error {
						cp := s.ConnectProxy
						if cp.Mode != structs.ProxyModeTransparent || len(cp.Upstreams) != 2 ||
							cp.Upstreams.Get("api") == nil || cp.Upstreams.Get("api").Chain == nil || !cp.Upstreams.Get("db").Upstream.CentrallyConfigured {
							return fmt.Errorf("mode %q upstreams %v", cp.Mode, cp.Upstreams)
						}
						return nil
					},
				},
				{
					name: "an upstream no longer allowed is dropped with its watches",
					do: func(t *testing.T, h *harness) {
						h.f.intentionUpstreams.waitSub(t, "web", nil).send(t, &structs.ServiceNames{Services: []string{"api"}})
						h.f.chain.waitNone(t, "db", chainFor("db"))
						h.f.health.waitNone(t, "db", healthFor("db", "", "dc1"))
					},
					want: func(s *ConfigSnapshot) error {
						if ups := s.ConnectProxy.Upstreams; len(ups) != 1 || ups.Get("api") == nil {
							return fmt.Errorf("upstreams %v", ups)
						}
						return nil
					},
				},
			},
		},
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if tc.setup != nil {
				tc.setup(h.f)
			}
			_, ch := h.register(tc.proxy)
			var last *ConfigSnapshot
			for _, st := range tc.steps {
				if st.do != nil {
					st.do(t, h)
				}
				if st.want == nil {
					noSnap(t, ch, 30*time.Millisecond)
					continue
				}
				snap := waitSnap(t, ch, st.want)
				if last != nil && snap.Version <= last.Version {
					t.Fatalf("%s: version %d after %d", st.name, snap.Version, last.Version)
				}
				last = snap
			}
		})
	}
}

// autoBasicsButConfig answers every basic watch except the central
// config, which the test sends itself.
func autoBasicsButConfig(f *fakes) {
	f.autoBasics()
	f.serviceConfig.setRespond(nil)
}

// TestSnapshotsAreImmutable checks that a delivered snapshot never changes
// when the state moves on.
func TestSnapshotsAreImmutable(t *testing.T) {
	h := newHarness(t, nil)
	h.f.autoBasics()
	_, ch := h.register(testSidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191}))
	pushChain("db", testChain("db", dbTarget))(t, h)
	pushEndpoints(dbTarget, testNodes("db", "10.0.1.1"))(t, h)
	first := waitSnap(t, ch, upstreamHas("db", "resolver:"+dbTarget.id(), map[string]int{dbTarget.id(): 1}))
	firstUp := first.ConnectProxy.Upstreams.Get("db")

	pushEndpoints(dbTarget, testNodes("db", "10.0.1.1", "10.0.1.2"))(t, h)
	pushChain("db", testChain("db", dbV1))(t, h)
	waitSnap(t, ch, upstreamHas("db", "resolver:"+dbV1.id(), map[string]int{}))

	if got := first.ConnectProxy.Upstreams.Get("db"); got != firstUp || len(got.Endpoints) != 1 ||
		len(got.Endpoints[dbTarget.id()]) != 1 || got.Chain.StartNode != "resolver:"+dbTarget.id() {
		t.Fatalf("delivered snapshot changed: %+v", got)
	}
}
