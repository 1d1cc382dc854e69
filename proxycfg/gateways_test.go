package proxycfg

import (
	"fmt"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func testGateway(kind structs.ServiceKind, name string) *structs.NodeService {
	return &structs.NodeService{Kind: kind, ID: name, Service: name, Address: "10.0.0.50", Port: 8443}
}

// gatewayEntries answers ConfigEntry watches: the given entries by
// (kind, name), "not found" for anything else (the mesh entry included).
func gatewayEntries(entries ...structs.ConfigEntry) func(*structs.ConfigEntryQuery) any {
	return func(q *structs.ConfigEntryQuery) any {
		for _, e := range entries {
			if e.GetKind() == q.Kind && e.GetName() == q.Name {
				return &structs.ConfigEntryResponse{Entry: e}
			}
		}
		return noEntry
	}
}

func forService(name string) func(*structs.ServiceSpecificRequest) bool {
	return func(r *structs.ServiceSpecificRequest) bool { return r.ServiceName == name }
}

func TestGatewayStateMachines(t *testing.T) {
	ingressEntry := &structs.IngressGatewayConfigEntry{
		Kind: structs.IngressGateway, Name: "ingress",
		Listeners: []structs.IngressListener{
			{Port: 8080, Protocol: "http", Services: []structs.IngressService{{Name: "api"}, {Name: "web"}}},
			{Port: 9000, Protocol: "tcp", Services: []structs.IngressService{{Name: "db"}}},
		},
	}
	ingressServices := func(withDB bool) *structs.IndexedGatewayServices {
		out := &structs.IndexedGatewayServices{Services: []*structs.GatewayService{
			{Gateway: "ingress", Service: "api", GatewayKind: structs.ServiceKindIngressGateway, Port: 8080, Protocol: "http"},
			{Gateway: "ingress", Service: "web", GatewayKind: structs.ServiceKindIngressGateway, Port: 8080, Protocol: "http", Hosts: []string{"web.example.com"}},
		}}
		if withDB {
			out.Services = append(out.Services, &structs.GatewayService{Gateway: "ingress", Service: "db", GatewayKind: structs.ServiceKindIngressGateway, Port: 9000, Protocol: "tcp"})
		}
		return out
	}
	termServices := func(withLegacy bool) *structs.IndexedGatewayServices {
		out := &structs.IndexedGatewayServices{Services: []*structs.GatewayService{
			{Gateway: "term", Service: "billing", GatewayKind: structs.ServiceKindTerminatingGateway, CAFile: "/ca.pem", SNI: "billing.internal"},
		}}
		if withLegacy {
			out.Services = append(out.Services, &structs.GatewayService{Gateway: "term", Service: "legacy", GatewayKind: structs.ServiceKindTerminatingGateway})
		}
		return out
	}
	plainHealth := func(name string) func(*structs.ServiceSpecificRequest) bool {
		return func(r *structs.ServiceSpecificRequest) bool { return r.ServiceName == name && !r.Connect }
	}
	connectHealth := func(name string) func(*structs.ServiceSpecificRequest) bool {
		return func(r *structs.ServiceSpecificRequest) bool { return r.ServiceName == name && r.Connect }
	}
	gatewaysOf := func(dc string) func(*structs.ServiceKindRequest) bool {
		return func(r *structs.ServiceKindRequest) bool {
			return r.Datacenter == dc && r.Kind == structs.ServiceKindMeshGateway
		}
	}

	cases := []struct {
		name  string
		svc   *structs.NodeService
		setup func(f *fakes)
		steps []step
	}{
		{
			name: "ingress gateway",
			svc:  testGateway(structs.ServiceKindIngressGateway, "ingress"),
			setup: func(f *fakes) {
				f.autoBasics()
				f.configEntry.setRespond(gatewayEntries(ingressEntry))
			},
			steps: []step{
				{
					name: "listeners, chains with the listener protocol, endpoints",
					do: func(t *testing.T, h *harness) {
						h.f.leaf.waitSub(t, "gateway leaf", func(r *LeafRequest) bool { return r.Service == "ingress" })
						h.f.gatewayServices.waitSub(t, "ingress", forService("ingress")).send(t, ingressServices(true))
						for _, name := range []string{"api", "web", "db"} {
							c := h.f.chain.waitSub(t, name, chainFor(name))
							if want := map[string]string{"api": "http", "web": "http", "db": "tcp"}[name]; c.req.OverrideProtocol != want {
								t.Fatalf("%s chain protocol %q, want %q", name, c.req.OverrideProtocol, want)
							}
							tg := target{service: name, dc: "dc1"}
							c.send(t, testChain(name, tg))
							pushEndpoints(tg, testNodes(name, "10.1.0.1"))(t, h)
						}
					},
					want: func(s *ConfigSnapshot) error {
						ig := s.IngressGateway
						if ig == nil || ig.Leaf == nil || ig.Config != ingressEntry || len(ig.Listeners) != 2 || len(ig.Upstreams) != 3 {
							return fmt.Errorf("ingress %+v", ig)
						}
						l := ig.Listeners[IngressListenerKey{Protocol: "http", Port: 8080}]
						if l == nil || l.Config == nil || l.Config.Port != 8080 || len(l.Upstreams) != 2 || l.Services[1].Hosts[0] != "web.example.com" {
							return fmt.Errorf("http listener %+v", l)
						}
						for _, id := range []UpstreamID{"api", "web", "db"} {
							if u := ig.Upstreams.Get(id); u == nil || u.Chain == nil || len(u.Endpoints[string(id)+".default.default.dc1"]) != 1 {
								return fmt.Errorf("upstream %s: %+v", id, u)
							}
						}
						return nil
					},
				},
				{
					name: "a removed service loses its chain and endpoints watches",
					do: func(t *testing.T, h *harness) {
						h.f.gatewayServices.waitSub(t, "ingress", nil).send(t, ingressServices(false))
						h.f.chain.waitNone(t, "db", chainFor("db"))
						h.f.health.waitNone(t, "db", forService("db"))
					},
					want: func(s *ConfigSnapshot) error {
						ig := s.IngressGateway
						if len(ig.Listeners) != 1 || len(ig.Upstreams) != 2 || ig.Upstreams.Get("db") != nil {
							return fmt.Errorf("listeners %v upstreams %v", ig.Listeners, ig.Upstreams)
						}
						return nil
					},
				},
			},
		},
		{
			name:  "terminating gateway",
			svc:   testGateway(structs.ServiceKindTerminatingGateway, "term"),
			setup: (*fakes).autoBasics,
			steps: []step{
				{
					name: "linked services with endpoints, leaves, intentions, config",
					do: func(t *testing.T, h *harness) {
						h.f.gatewayServices.waitSub(t, "term", forService("term")).send(t, termServices(true))
						h.f.health.waitSub(t, "billing", plainHealth("billing")).send(t, testNodes("billing", "192.168.0.1", "192.168.0.2"))
						h.f.health.waitSub(t, "legacy", plainHealth("legacy")).send(t, testNodes("legacy", "192.168.1.1"))
					},
					want: func(s *ConfigSnapshot) error {
						tg := s.TerminatingGateway
						if tg == nil || len(tg.Services) != 2 {
							return fmt.Errorf("terminating %+v", tg)
						}
						b := tg.Services["billing"]
						if !b.Ready() || len(b.Endpoints) != 2 || b.Leaf.Service != "billing" || b.Link.SNI != "billing.internal" || !tg.Services["legacy"].Ready() {
							return fmt.Errorf("billing %+v", b)
						}
						return nil
					},
				},
				{
					name: "unlinking a service cancels its five watches",
					do: func(t *testing.T, h *harness) {
						h.f.gatewayServices.waitSub(t, "term", nil).send(t, termServices(false))
						h.f.health.waitNone(t, "legacy health", plainHealth("legacy"))
						h.f.intentions.waitNone(t, "legacy intentions", forService("legacy"))
						h.f.leaf.waitNone(t, "legacy leaf", func(r *LeafRequest) bool { return r.Service == "legacy" })
						h.f.serviceConfig.waitNone(t, "legacy config", func(r *structs.ServiceConfigRequest) bool { return r.Name == "legacy" })
						h.f.configEntry.waitNone(t, "legacy resolver", func(r *structs.ConfigEntryQuery) bool { return r.Name == "legacy" })
						h.f.health.waitSub(t, "billing", plainHealth("billing"))
					},
					want: func(s *ConfigSnapshot) error {
						if svcs := s.TerminatingGateway.Services; len(svcs) != 1 || svcs["billing"] == nil {
							return fmt.Errorf("services %v", svcs)
						}
						return nil
					},
				},
			},
		},
		{
			// Until the resolver query has answered, a linked service is
			// not ready: served earlier, it would lose its subsets and
			// connect timeout until the answer came (Consul's
			// ServiceResolversSet).
			name: "terminating gateway waits for the resolver answer",
			svc:  testGateway(structs.ServiceKindTerminatingGateway, "term"),
			setup: func(f *fakes) {
				f.autoBasics()
				f.configEntry.setRespond(func(q *structs.ConfigEntryQuery) any {
					if q.Name == "legacy" {
						return nil // answered by the second step
					}
					return noEntry
				})
			},
			steps: []step{
				{
					name: "legacy's resolver unknown",
					do: func(t *testing.T, h *harness) {
						h.f.gatewayServices.waitSub(t, "term", forService("term")).send(t, termServices(true))
						h.f.health.waitSub(t, "billing", plainHealth("billing")).send(t, testNodes("billing", "192.168.0.1"))
						h.f.health.waitSub(t, "legacy", plainHealth("legacy")).send(t, testNodes("legacy", "192.168.1.1"))
					},
					want: func(s *ConfigSnapshot) error {
						svcs := s.TerminatingGateway.Services
						b, l := svcs["billing"], svcs["legacy"]
						if b == nil || !b.Ready() || b.Resolver != nil || l == nil || l.Ready() || len(l.Endpoints) != 1 {
							return fmt.Errorf("billing %+v legacy %+v", b, l)
						}
						return nil
					},
				},
				{
					name: "legacy's resolver arrives",
					do: func(t *testing.T, h *harness) {
						h.f.configEntry.waitSub(t, "legacy resolver", func(r *structs.ConfigEntryQuery) bool { return r.Name == "legacy" }).
							send(t, &structs.ConfigEntryResponse{Entry: &structs.ServiceResolverConfigEntry{
								Kind: structs.ServiceResolver, Name: "legacy", ConnectTimeout: structs.Duration(10 * time.Second),
							}})
					},
					want: func(s *ConfigSnapshot) error {
						l := s.TerminatingGateway.Services["legacy"]
						if !l.Ready() || l.Resolver == nil || time.Duration(l.Resolver.ConnectTimeout) != 10*time.Second {
							return fmt.Errorf("legacy %+v", l)
						}
						return nil
					},
				},
			},
		},
		{
			name: "mesh gateway",
			svc:  testGateway(structs.ServiceKindMeshGateway, "mesh-gateway"),
			setup: func(f *fakes) {
				f.autoBasics()
				f.configEntryList.setRespond(func(q *structs.ConfigEntryQuery) any {
					return &structs.IndexedConfigEntries{Kind: q.Kind, Entries: []structs.ConfigEntry{
						&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "db",
							Subsets: map[string]structs.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "v1"`}}},
					}}
				})
			},
			steps: []step{
				{
					name: "services, resolvers, remote gateways",
					do: func(t *testing.T, h *harness) {
						h.f.serviceList.waitSub(t, "services", nil).send(t, &structs.IndexedServices{Services: map[string][]string{
							"db": nil, "web": nil, structs.ConsulServiceName: nil,
						}})
						h.f.datacenters.waitSub(t, "datacenters", nil).send(t, &DatacenterList{Datacenters: []string{"dc1", "dc2"}})
						h.f.health.waitSub(t, "db", connectHealth("db")).send(t, testNodes("db", "10.0.1.1"))
						h.f.health.waitSub(t, "web", connectHealth("web")).send(t, testNodes("web", "10.0.2.1", "10.0.2.2"))
						h.f.health.waitNone(t, "consul", forService(structs.ConsulServiceName))
						h.f.byKind.waitNone(t, "dc1 gateways", gatewaysOf("dc1"))
						h.f.byKind.waitSub(t, "dc2 gateways", gatewaysOf("dc2")).send(t, testNodes("gw", "172.16.0.1"))
					},
					want: func(s *ConfigSnapshot) error {
						mg := s.MeshGateway
						if mg == nil || len(mg.Services) != 2 || len(mg.Services["web"]) != 2 || mg.Resolvers["db"] == nil ||
							len(mg.Datacenters) != 1 || len(mg.GatewaysByDatacenter["dc2"]) != 1 {
							return fmt.Errorf("mesh gateway %+v", mg)
						}
						return nil
					},
				},
				{
					name: "gone services and datacenters lose their watches",
					do: func(t *testing.T, h *harness) {
						h.f.serviceList.waitSub(t, "services", nil).send(t, &structs.IndexedServices{Services: map[string][]string{"db": nil}})
						h.f.datacenters.waitSub(t, "datacenters", nil).send(t, &DatacenterList{Datacenters: []string{"dc1"}})
						h.f.health.waitNone(t, "web", connectHealth("web"))
						h.f.byKind.waitNone(t, "dc2 gateways", gatewaysOf("dc2"))
					},
					want: func(s *ConfigSnapshot) error {
						mg := s.MeshGateway
						if len(mg.Services) != 1 || mg.Services["db"] == nil || len(mg.Datacenters) != 0 || len(mg.GatewaysByDatacenter) != 0 {
							return fmt.Errorf("mesh gateway %+v", mg)
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
			tc.setup(h.f)
			_, ch := h.register(tc.svc)
			for _, st := range tc.steps {
				st.do(t, h)
				snap := waitSnap(t, ch, st.want)
				if snap.Kind != tc.svc.Kind {
					t.Fatalf("snapshot kind %q", snap.Kind)
				}
			}
		})
	}
}
