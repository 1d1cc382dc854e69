package state

import (
	"reflect"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/structs"
)

func terminating(name string, services ...structs.LinkedService) *structs.TerminatingGatewayConfigEntry {
	return &structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: name, Services: services}
}

func ingress(name string, listeners ...structs.IngressListener) *structs.IngressGatewayConfigEntry {
	return &structs.IngressGatewayConfigEntry{Kind: structs.IngressGateway, Name: name, Listeners: listeners}
}

func termRow(gw, svc string, wildcard bool, sni string) *structs.GatewayService {
	return &structs.GatewayService{Gateway: gw, Service: svc, GatewayKind: structs.ServiceKindTerminatingGateway,
		SNI: sni, FromWildcard: wildcard, AutoHostRewrite: true}
}

func ingressRow(gw, svc string, port int, wildcard bool) *structs.GatewayService {
	return &structs.GatewayService{Gateway: gw, Service: svc, GatewayKind: structs.ServiceKindIngressGateway,
		Port: port, Protocol: "tcp", FromWildcard: wildcard}
}

// gatewayFixture links services to a terminating gateway (one by name,
// the rest through a wildcard) and registers the gateway's instance on
// node b (used by the snapshot tests).
func gatewayFixture(t *testing.T, s *Store, idx uint64) {
	t.Helper()
	must(t, s.EnsureConfigEntry(idx, terminating("term",
		structs.LinkedService{Name: "legacy", SNI: "legacy.example"},
		structs.LinkedService{Name: "*", CAFile: "ca.pem"})))
	must(t, s.EnsureService(idx+1, "b", &structs.NodeService{Kind: structs.ServiceKindTerminatingGateway,
		ID: "term1", Service: "term", Port: 8443}))
}

// TestGatewayServicesTable follows the table through the writes it is
// derived from: each step's rows for the gateway, and whether a watch on
// them taken before the step fired.
func TestGatewayServicesTable(t *testing.T) {
	type step struct {
		name  string
		write func(t *testing.T, s *Store, idx uint64)
		gw    string
		want  []*structs.GatewayService
		fires bool
	}
	proxy := func(id, dest string) *structs.NodeService {
		return &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: id, Service: dest + "-sidecar-proxy",
			Proxy: structs.ConnectProxyConfig{DestinationServiceName: dest}}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "terminating wildcard follows typical services", steps: []step{
			{name: "entry", gw: "term", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) {
					must(t, s.EnsureConfigEntry(idx, terminating("term",
						structs.LinkedService{Name: "api", SNI: "api.example"}, structs.LinkedService{Name: "*"})))
				},
				want: []*structs.GatewayService{termRow("term", "api", false, "api.example"),
					termRow("term", "db", true, ""), termRow("term", "web", true, "")}},
			{name: "new service joins the wildcard", gw: "term", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) { registerService(t, s, idx, "a", "cache1", "cache") },
				want: []*structs.GatewayService{termRow("term", "api", false, "api.example"),
					termRow("term", "cache", true, ""), termRow("term", "db", true, ""), termRow("term", "web", true, "")}},
			{name: "a sidecar is not a typical service", gw: "term", fires: false,
				write: func(t *testing.T, s *Store, idx uint64) { must(t, s.EnsureService(idx, "b", proxy("db1-proxy", "db"))) },
				want: []*structs.GatewayService{termRow("term", "api", false, "api.example"),
					termRow("term", "cache", true, ""), termRow("term", "db", true, ""), termRow("term", "web", true, "")}},
			{name: "the gateway's own instance is not linked", gw: "term", fires: false,
				write: func(t *testing.T, s *Store, idx uint64) {
					must(t, s.EnsureService(idx, "b", &structs.NodeService{Kind: structs.ServiceKindTerminatingGateway, ID: "term", Service: "term"}))
				},
				want: []*structs.GatewayService{termRow("term", "api", false, "api.example"),
					termRow("term", "cache", true, ""), termRow("term", "db", true, ""), termRow("term", "web", true, "")}},
			{name: "last instance deregisters", gw: "term", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) { must(t, s.DeleteService(idx, "a", "cache1")) },
				want: []*structs.GatewayService{termRow("term", "api", false, "api.example"),
					termRow("term", "db", true, ""), termRow("term", "web", true, "")}},
			{name: "node deregisters", gw: "term", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) { must(t, s.DeleteNode(idx, "a")) },
				want:  []*structs.GatewayService{termRow("term", "api", false, "api.example"), termRow("term", "db", true, "")}},
			{name: "entry loses its wildcard", gw: "term", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) {
					must(t, s.EnsureConfigEntry(idx, terminating("term",
						structs.LinkedService{Name: "api", SNI: "api2.example", DisableAutoHostRewrite: true})))
				},
				want: []*structs.GatewayService{{Gateway: "term", Service: "api", GatewayKind: structs.ServiceKindTerminatingGateway, SNI: "api2.example"}}},
			{name: "unrelated entry", gw: "term", fires: false,
				write: func(t *testing.T, s *Store, idx uint64) { must(t, s.EnsureConfigEntry(idx, sd("api", "http"))) },
				want:  []*structs.GatewayService{{Gateway: "term", Service: "api", GatewayKind: structs.ServiceKindTerminatingGateway, SNI: "api2.example"}}},
			{name: "entry deleted", gw: "term", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) {
					must(t, s.DeleteConfigEntry(idx, structs.TerminatingGateway, "term"))
				},
				want: []*structs.GatewayService{}},
		}},
		{name: "ingress wildcard follows Connect services", steps: []step{
			{name: "entry", gw: "ing", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) {
					must(t, s.EnsureConfigEntry(idx, ingress("ing",
						structs.IngressListener{Port: 9999, Protocol: "tcp", Services: []structs.IngressService{{Name: "db"}}},
						structs.IngressListener{Port: 8080, Protocol: "tcp", Services: []structs.IngressService{{Name: "*"}}})))
				},
				want: []*structs.GatewayService{ingressRow("ing", "web", 8080, true), ingressRow("ing", "db", 9999, false)}},
			{name: "a sidecar brings its service in", gw: "ing", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) { must(t, s.EnsureService(idx, "b", proxy("db1-proxy", "db"))) },
				want: []*structs.GatewayService{ingressRow("ing", "db", 8080, true), ingressRow("ing", "web", 8080, true),
					ingressRow("ing", "db", 9999, false)}},
			{name: "a typical service does not", gw: "ing", fires: false,
				write: func(t *testing.T, s *Store, idx uint64) { registerService(t, s, idx, "a", "cache1", "cache") },
				want: []*structs.GatewayService{ingressRow("ing", "db", 8080, true), ingressRow("ing", "web", 8080, true),
					ingressRow("ing", "db", 9999, false)}},
			{name: "the sidecar leaves", gw: "ing", fires: true,
				write: func(t *testing.T, s *Store, idx uint64) { must(t, s.DeleteService(idx, "b", "db1-proxy")) },
				want:  []*structs.GatewayService{ingressRow("ing", "web", 8080, true), ingressRow("ing", "db", 9999, false)}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := watchFixture(t)
			idx := uint64(100)
			var lastIdx uint64
			for _, st := range tt.steps {
				ws := memdb.NewWatchSet()
				_, _, err := s.GatewayServices(ws, st.gw)
				must(t, err)
				st.write(t, s, idx)
				if got := !quiet(ws); got != st.fires {
					t.Errorf("%s: watch fired = %v, want %v", st.name, got, st.fires)
				}
				gidx, got, err := s.GatewayServices(nil, st.gw)
				must(t, err)
				if !reflect.DeepEqual(got, st.want) {
					t.Errorf("%s: rows\n got %s\nwant %s", st.name, dump(got), dump(st.want))
				}
				if st.fires && gidx != idx {
					t.Errorf("%s: index %d, want %d", st.name, gidx, idx)
				}
				if gidx < lastIdx {
					t.Errorf("%s: index went back from %d to %d", st.name, lastIdx, gidx)
				}
				lastIdx = gidx
				idx++
			}
		})
	}
}

// TestConnectHealthIncludesTerminatingGateways: a service linked to a
// terminating gateway answers Connect health reads with the gateway's
// instances after its own endpoints, and the read wakes and moves its
// index on link, unlink and gateway health changes.
func TestConnectHealthIncludesTerminatingGateways(t *testing.T) {
	s := watchFixture(t)
	must(t, s.EnsureService(20, "b", &structs.NodeService{Kind: structs.ServiceKindTerminatingGateway, ID: "term1", Service: "term", Port: 8443}))
	registerService(t, s, 21, "b", "legacy1", "legacy")

	ids := func(svc string) (uint64, []string, memdb.WatchSet) {
		t.Helper()
		ws := memdb.NewWatchSet()
		idx, nodes, err := s.CheckServiceNodes(ws, svc, nil, true)
		must(t, err)
		_, sn, err := s.ServiceNodes(nil, svc, nil, true)
		must(t, err)
		var out []string
		for _, n := range nodes {
			out = append(out, n.Node.Node+"/"+n.Service.ID)
		}
		if len(sn) != len(nodes) {
			t.Fatalf("ServiceNodes(connect) has %d instances, CheckServiceNodes %d", len(sn), len(nodes))
		}
		return idx, out, ws
	}
	steps := []struct {
		name  string
		svc   string
		write func(idx uint64)
		want  []string
	}{
		{"linked by name", "legacy", func(idx uint64) {
			must(t, s.EnsureConfigEntry(idx, terminating("term", structs.LinkedService{Name: "legacy"})))
		}, []string{"b/term1"}},
		{"gateway health", "legacy", func(idx uint64) {
			registerCheck(t, s, idx, "b", "term-alive", "term1", structs.HealthCritical)
		}, []string{"b/term1"}},
		{"sidecars come first", "web", func(idx uint64) {
			must(t, s.EnsureConfigEntry(idx, terminating("term", structs.LinkedService{Name: "legacy"}, structs.LinkedService{Name: "web"})))
		}, []string{"a/web1-proxy", "b/term1"}},
		{"unlinked", "legacy", func(idx uint64) {
			must(t, s.EnsureConfigEntry(idx, terminating("term", structs.LinkedService{Name: "web"})))
		}, nil},
		{"gateway deregisters", "web", func(idx uint64) { must(t, s.DeleteService(idx, "b", "term1")) }, []string{"a/web1-proxy"}},
	}
	idx := uint64(30)
	for _, st := range steps {
		before, _, ws := ids(st.svc)
		st.write(idx)
		if !fires(ws) {
			t.Errorf("%s: connect health watch did not fire", st.name)
		}
		after, got, _ := ids(st.svc)
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: instances %v, want %v", st.name, got, st.want)
		}
		if after == before {
			t.Errorf("%s: index stayed %d", st.name, after)
		}
		idx++
	}
}

func TestLinkedServicesAndServiceGateways(t *testing.T) {
	s := watchFixture(t)
	must(t, s.EnsureConfigEntry(20, terminating("t1", structs.LinkedService{Name: "db"})))
	must(t, s.EnsureConfigEntry(21, terminating("t2", structs.LinkedService{Name: "db"}, structs.LinkedService{Name: "web"})))
	must(t, s.EnsureConfigEntry(22, ingress("i1",
		structs.IngressListener{Port: 80, Protocol: "tcp", Services: []structs.IngressService{{Name: "api"}}})))
	_, names, err := s.LinkedServices(nil, structs.ServiceKindTerminatingGateway)
	must(t, err)
	if want := []string{"db", "web"}; !reflect.DeepEqual(names, want) {
		t.Errorf("LinkedServices = %v, want %v", names, want)
	}
	_, rows, err := s.ServiceGateways(nil, "DB", structs.ServiceKindTerminatingGateway)
	must(t, err)
	if len(rows) != 2 || rows[0].Gateway != "t1" || rows[1].Gateway != "t2" {
		t.Errorf("ServiceGateways(DB) = %s", dump(rows))
	}
	_, rows, err = s.ServiceGateways(nil, "api", structs.ServiceKindTerminatingGateway)
	must(t, err)
	if len(rows) != 0 {
		t.Errorf("ServiceGateways(api, terminating) = %s", dump(rows))
	}
}
