package state

import (
	"reflect"
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/connect/discoverychain"
	"github.com/trellis-mesh/trellis/structs"
)

func sidecar(id, dest string, port int) *structs.NodeService {
	return &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: id, Service: dest + "-sidecar-proxy", Port: port,
		Proxy: structs.ConnectProxyConfig{DestinationServiceName: dest}}
}

func native(id, name string, port int) *structs.NodeService {
	return &structs.NodeService{ID: id, Service: name, Port: port, Connect: structs.ServiceConnect{Native: true}}
}

func vipOf(t *testing.T, s *Store, service string) string {
	t.Helper()
	_, v, err := s.ServiceVirtualIP(nil, service)
	must(t, err)
	if v == nil {
		return ""
	}
	return v.IP
}

// TestVirtualIPAssignment walks the life of virtual IPs: which
// registrations assign one, the tagged address the instances carry, when an
// address is freed and which address the next service gets.
func TestVirtualIPAssignment(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "n1")
	idx := uint64(1)
	next := func() uint64 { idx++; return idx }
	steps := []struct {
		name  string
		apply func() error
		// want is every service's virtual IP after the step ("" none).
		want map[string]string
	}{
		{"a plain service joins no mesh", func() error {
			return s.EnsureService(next(), "n1", testService("db1", "db"))
		}, map[string]string{"db": ""}},
		{"a sidecar gives its destination the first address", func() error {
			return s.EnsureService(next(), "n1", sidecar("web-proxy", "web", 21000))
		}, map[string]string{"web": "240.0.0.1", "web-sidecar-proxy": ""}},
		{"a Connect-native instance gets the next", func() error {
			return s.EnsureService(next(), "n1", native("api1", "api", 9090))
		}, map[string]string{"web": "240.0.0.1", "api": "240.0.0.2"}},
		{"a second instance shares its service's", func() error {
			return s.EnsureService(next(), "n1", native("api2", "api", 9091))
		}, map[string]string{"api": "240.0.0.2"}},
		{"a service-resolver gives its service one before any instance", func() error {
			return s.EnsureConfigEntry(next(), &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "billing"})
		}, map[string]string{"billing": "240.0.0.3"}},
		{"the last sidecar leaving frees its destination's", func() error {
			return s.DeleteService(next(), "n1", "web-proxy")
		}, map[string]string{"web": "", "api": "240.0.0.2", "billing": "240.0.0.3"}},
		{"a freed address is the next one given", func() error {
			return s.EnsureService(next(), "n1", sidecar("cart-proxy", "cart", 21001))
		}, map[string]string{"cart": "240.0.0.1"}},
		{"one of two instances leaving keeps it", func() error {
			return s.DeleteService(next(), "n1", "api1")
		}, map[string]string{"api": "240.0.0.2"}},
		{"an instance leaving the mesh frees it", func() error {
			return s.EnsureService(next(), "n1", testService("api2", "api"))
		}, map[string]string{"api": ""}},
		{"an instance of a chain's service keeps it when the entry goes", func() error {
			if err := s.EnsureService(next(), "n1", sidecar("billing-proxy", "billing", 21002)); err != nil {
				return err
			}
			return s.DeleteConfigEntry(next(), structs.ServiceResolver, "billing")
		}, map[string]string{"billing": "240.0.0.3"}},
		{"a service a terminating gateway fronts joins the mesh", func() error {
			return s.EnsureConfigEntry(next(), &structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "tgw",
				Services: []structs.LinkedService{{Name: "legacy"}, {Name: "cart"}}})
		}, map[string]string{"legacy": "240.0.0.2", "cart": "240.0.0.1"}},
		{"unlinking frees it unless a sidecar keeps it", func() error {
			return s.EnsureConfigEntry(next(), &structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "tgw"})
		}, map[string]string{"legacy": "", "cart": "240.0.0.1"}},
		{"a wildcard fronts the plain services", func() error {
			if err := s.EnsureService(next(), "n1", testService("ledger1", "ledger")); err != nil {
				return err
			}
			return s.EnsureConfigEntry(next(), &structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "tgw",
				Services: []structs.LinkedService{{Name: "*"}}})
		}, map[string]string{"api": "240.0.0.2", "db": "240.0.0.4", "ledger": "240.0.0.5", "legacy": ""}},
		{"deleting the gateway entry frees what it gave", func() error {
			return s.DeleteConfigEntry(next(), structs.TerminatingGateway, "tgw")
		}, map[string]string{"api": "", "db": "", "ledger": "", "cart": "240.0.0.1"}},
		{"deleting the node frees what its instances held", func() error {
			return s.DeleteNode(next(), "n1")
		}, map[string]string{"billing": "", "cart": ""}},
	}
	for _, st := range steps {
		if err := st.apply(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		for svc, want := range st.want {
			if got := vipOf(t, s, svc); got != want {
				t.Fatalf("%s: virtual IP of %q = %q, want %q", st.name, svc, got, want)
			}
		}
	}
}

// TestVirtualIPTaggedAddress checks the consul-virtual tagged address on
// mesh instances (with the instance's own port, as Consul's), that
// re-registering without it is no change, and that it replaces a value
// sent by the agent.
func TestVirtualIPTaggedAddress(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "n1")
	proxy := sidecar("web-proxy", "web", 21000)
	proxy.TaggedAddresses = map[string]structs.ServiceAddress{structs.TaggedAddressVirtualIP: {Address: "1.2.3.4", Port: 1}}
	must(t, s.EnsureService(2, "n1", proxy))
	must(t, s.EnsureService(3, "n1", native("web1", "web", 8080)))
	must(t, s.EnsureService(4, "n1", testService("db1", "db")))

	_, ns, err := s.NodeServices(nil, "n1")
	must(t, err)
	for id, want := range map[string]*structs.ServiceAddress{
		"web-proxy": {Address: "240.0.0.1", Port: 21000},
		"web1":      {Address: "240.0.0.1", Port: 8080},
		"db1":       nil,
	} {
		got, ok := ns.Services[id].TaggedAddresses[structs.TaggedAddressVirtualIP]
		if (want == nil) != !ok || (want != nil && got != *want) {
			t.Fatalf("%s: consul-virtual = %+v (present %v), want %+v", id, got, ok, want)
		}
	}

	ws := memdb.NewWatchSet()
	_, _, err = s.NodeServices(ws, "n1")
	must(t, err)
	must(t, s.EnsureService(5, "n1", sidecar("web-proxy", "web", 21000)))
	if !quiet(ws) {
		t.Fatal("re-registering a mesh instance without its virtual IP changed the catalog")
	}
}

// TestAssignManualServiceVIPs follows consul/api's own test of the
// endpoint: manual IPs move between services, and a service without an
// assignment changes nothing.
func TestAssignManualServiceVIPs(t *testing.T) {
	s := NewStore()
	for i, name := range []string{"one", "two", "three"} {
		must(t, s.EnsureConfigEntry(uint64(i+1), &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: name}))
	}
	steps := []struct {
		service   string
		ips       []string
		wantFound bool
		wantFrom  []string
		// wantManual is every service's manual IPs after the step.
		wantManual map[string][]string
	}{
		{"missing", []string{"1.1.1.1", "2.2.2.2"}, false, nil, map[string][]string{"one": nil}},
		{"one", []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}, true, nil, map[string][]string{"one": {"1.1.1.1", "2.2.2.2", "3.3.3.3"}}},
		{"two", []string{"2.2.2.2"}, true, []string{"one"}, map[string][]string{"one": {"1.1.1.1", "3.3.3.3"}, "two": {"2.2.2.2"}}},
		{"three", []string{"3.3.3.3"}, true, []string{"one"}, map[string][]string{"one": {"1.1.1.1"}, "three": {"3.3.3.3"}}},
		{"missing", []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}, false, nil, map[string][]string{"one": {"1.1.1.1"}, "two": {"2.2.2.2"}}},
		{"one", []string{"1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4", "4.4.4.4"}, true, []string{"three", "two"},
			map[string][]string{"one": {"1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"}, "two": nil, "three": nil}},
	}
	for i, st := range steps {
		found, from, err := s.AssignManualServiceVIPs(uint64(10+i), st.service, st.ips)
		must(t, err)
		if found != st.wantFound || !reflect.DeepEqual(from, st.wantFrom) {
			t.Fatalf("step %d: found %v from %v, want %v %v", i, found, from, st.wantFound, st.wantFrom)
		}
		for svc, want := range st.wantManual {
			_, v, err := s.ServiceVirtualIP(nil, svc)
			must(t, err)
			if v == nil || !reflect.DeepEqual(v.ManualIPs, want) {
				t.Fatalf("step %d: %s = %+v, want manual %v", i, svc, v, want)
			}
		}
	}
}

// TestDiscoveryChainCarriesVirtualIPs checks that a chain read returns
// its service's addresses and wakes when they change.
func TestDiscoveryChainCarriesVirtualIPs(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "n1")
	read := func(ws memdb.WatchSet) *structs.CompiledDiscoveryChain {
		t.Helper()
		_, chain, err := s.ServiceDiscoveryChain(ws, discoverychain.CompileRequest{
			ServiceName: "web", EvaluateInDatacenter: "dc1", EvaluateInTrustDomain: "abc.consul",
		})
		must(t, err)
		return chain
	}
	ws := memdb.NewWatchSet()
	if c := read(ws); c.AutoVirtualIPs != nil {
		t.Fatalf("chain of a service outside the mesh has %v", c.AutoVirtualIPs)
	}
	must(t, s.EnsureService(2, "n1", sidecar("web-proxy", "web", 21000)))
	if !fires(ws) {
		t.Fatal("the chain's watch did not fire when its service got a virtual IP")
	}
	_, _, err := s.AssignManualServiceVIPs(3, "web", []string{"10.1.1.1"})
	must(t, err)
	if c := read(nil); !reflect.DeepEqual(c.AutoVirtualIPs, []string{"240.0.0.1"}) || !reflect.DeepEqual(c.ManualVirtualIPs, []string{"10.1.1.1"}) {
		t.Fatalf("chain virtual IPs = %v %v", c.AutoVirtualIPs, c.ManualVirtualIPs)
	}
}
