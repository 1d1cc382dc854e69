package state

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestEnsureRegistration(t *testing.T) {
	s := NewStore()
	req := &structs.RegisterRequest{
		ID:              "40e4a748-2192-161a-0510-9bf59fe950b5",
		Node:            "n1",
		Address:         "10.0.0.1",
		TaggedAddresses: map[string]string{"lan": "10.0.0.1"},
		NodeMeta:        map[string]string{"rack": "a"},
		Service:         &structs.NodeService{ID: "web1", Service: "web", Tags: []string{"v1"}, Port: 80},
		Check:           &structs.HealthCheck{Node: "n1", CheckID: "svc-check", ServiceID: "web1", Status: structs.HealthPassing},
		Checks:          structs.HealthChecks{{CheckID: "serfHealth", Status: structs.HealthPassing}},
		WriteRequest:    structs.WriteRequest{Datacenter: "dc1"},
	}
	must(t, s.EnsureRegistration(10, req))

	_, n, err := s.GetNode(nil, "N1") // case-insensitive
	must(t, err)
	want := &structs.Node{ID: req.ID, Node: "n1", Address: "10.0.0.1", Datacenter: "dc1",
		TaggedAddresses: req.TaggedAddresses, Meta: req.NodeMeta, RaftIndex: structs.RaftIndex{CreateIndex: 10, ModifyIndex: 10}}
	if !reflect.DeepEqual(n, want) {
		t.Fatalf("node = %+v, want %+v", n, want)
	}
	_, ns, err := s.NodeServices(nil, "n1")
	must(t, err)
	if svc := ns.Services["web1"]; svc == nil || svc.CreateIndex != 10 || svc.Service != "web" {
		t.Fatalf("service = %+v", svc)
	}
	_, checks, err := s.NodeChecks(nil, "n1")
	must(t, err)
	if len(checks) != 2 {
		t.Fatalf("checks = %d, want 2", len(checks))
	}
	// Check writes fill ServiceName and ServiceTags from the service, and
	// a check without Node gets the registration's.
	for _, c := range checks {
		switch c.CheckID {
		case "svc-check":
			if c.ServiceName != "web" || !reflect.DeepEqual(c.ServiceTags, []string{"v1"}) {
				t.Fatalf("service check = %+v", c)
			}
		case "serfHealth":
			if c.Node != "n1" || c.ServiceName != "" {
				t.Fatalf("node check = %+v", c)
			}
		}
	}

	// The caller's request is not modified.
	if req.Service.CreateIndex != 0 || req.Checks[0].Node != "" {
		t.Fatal("EnsureRegistration modified its input")
	}

	// Re-registering the same thing moves nothing.
	must(t, s.EnsureRegistration(11, req))
	if got := s.LastIndex(); got != 10 {
		t.Fatalf("identical re-registration moved LastIndex to %d", got)
	}

	// SkipNodeUpdate keeps the node as stored.
	skip := &structs.RegisterRequest{Node: "n1", Address: "10.9.9.9", SkipNodeUpdate: true,
		Service: &structs.NodeService{ID: "db", Service: "db"}}
	must(t, s.EnsureRegistration(12, skip))
	_, n, _ = s.GetNode(nil, "n1")
	if n.Address != "10.0.0.1" || n.ModifyIndex != 10 {
		t.Fatalf("SkipNodeUpdate changed the node: %+v", n)
	}
	// But it creates a missing node.
	must(t, s.EnsureRegistration(13, &structs.RegisterRequest{Node: "n2", Address: "10.0.0.2", SkipNodeUpdate: true}))
	if _, n, _ := s.GetNode(nil, "n2"); n == nil {
		t.Fatal("SkipNodeUpdate did not create a missing node")
	}
}

func TestEnsureRegistrationAllOrNothing(t *testing.T) {
	cases := []struct {
		name    string
		req     *structs.RegisterRequest
		wantErr error
	}{
		{"no node name", &structs.RegisterRequest{Address: "1.2.3.4"}, ErrMissingNodeName},
		{"check for another node", &structs.RegisterRequest{Node: "n1", Address: "1.2.3.4",
			Check: &structs.HealthCheck{Node: "other", CheckID: "c"}}, ErrCheckNodeMismatch},
		{"check of a missing service", &structs.RegisterRequest{Node: "n1", Address: "1.2.3.4",
			Service: &structs.NodeService{ID: "web", Service: "web"},
			Checks:  structs.HealthChecks{{CheckID: "c", ServiceID: "nope"}}}, ErrMissingService},
		{"service without a name", &structs.RegisterRequest{Node: "n1", Address: "1.2.3.4",
			Service: &structs.NodeService{ID: "x"}}, ErrMissingServiceName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			err := s.EnsureRegistration(5, tc.req)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := s.LastIndex(); got != 0 {
				t.Fatalf("failed registration left writes behind (LastIndex %d)", got)
			}
			if _, nodes, _ := s.Nodes(nil, nil); len(nodes) != 0 {
				t.Fatalf("failed registration stored nodes: %v", nodes)
			}
		})
	}
	// Consul's texts survive the wrapping.
	s := NewStore()
	err := s.EnsureRegistration(5, cases[2].req)
	if err == nil || err.Error() != `failed inserting check on node "n1": Missing service registration` {
		t.Fatalf("err = %v", err)
	}
}

func TestEnsureNode(t *testing.T) {
	s := NewStore()
	must(t, s.EnsureNode(1, &structs.Node{ID: "id-1", Node: "n1", Address: "a"}))

	// Update keeps CreateIndex, moves ModifyIndex; a no-op update moves nothing.
	must(t, s.EnsureNode(2, &structs.Node{ID: "id-1", Node: "n1", Address: "b"}))
	must(t, s.EnsureNode(3, &structs.Node{ID: "id-1", Node: "n1", Address: "b"}))
	_, n, _ := s.GetNode(nil, "n1")
	if n.CreateIndex != 1 || n.ModifyIndex != 2 || n.Address != "b" {
		t.Fatalf("node = %+v", n)
	}

	// The same ID under a new name renames the node, dropping its
	// services.
	registerService(t, s, 4, "n1", "web", "web")
	must(t, s.EnsureNode(5, &structs.Node{ID: "id-1", Node: "renamed", Address: "b"}))
	if _, n, _ := s.GetNode(nil, "n1"); n != nil {
		t.Fatal("old name still registered after rename")
	}
	if _, n, _ := s.GetNode(nil, "renamed"); n == nil || n.CreateIndex != 5 {
		t.Fatalf("renamed node = %+v", n)
	}
	if _, sn, _ := s.ServiceNodes(nil, "web", nil, false); len(sn) != 0 {
		t.Fatal("services of the old name survived the rename")
	}

	// A live node (passing serfHealth) keeps its name against another ID.
	must(t, s.EnsureNode(6, &structs.Node{ID: "id-2", Node: "live", Address: "c"}))
	registerCheck(t, s, 7, "live", structs.SerfCheckID, "", structs.HealthPassing)
	err := s.EnsureNode(8, &structs.Node{ID: "id-3", Node: "live", Address: "d"})
	if !errors.Is(err, ErrNodeNameReserved) {
		t.Fatalf("err = %v, want ErrNodeNameReserved", err)
	}
	// Once it is failed, the name can be taken.
	registerCheck(t, s, 9, "live", structs.SerfCheckID, "", structs.HealthCritical)
	must(t, s.EnsureNode(10, &structs.Node{ID: "id-3", Node: "live", Address: "d"}))
	if _, n, _ := s.GetNode(nil, "live"); n.ID != "id-3" {
		t.Fatalf("node = %+v", n)
	}

	if err := s.EnsureNode(11, &structs.Node{Address: "x"}); !errors.Is(err, ErrMissingNodeName) {
		t.Fatalf("err = %v, want ErrMissingNodeName", err)
	}
}

func TestEnsureServiceAndCheckErrors(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "n1")
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"service on missing node", s.EnsureService(2, "nope", testService("web", "web")), ErrMissingNode},
		{"service without node", s.EnsureService(2, "", testService("web", "web")), ErrMissingNodeName},
		{"check on missing node", s.EnsureCheck(2, &structs.HealthCheck{Node: "nope", CheckID: "c"}), ErrMissingNode},
		{"check of missing service", s.EnsureCheck(2, &structs.HealthCheck{Node: "n1", CheckID: "c", ServiceID: "x"}), ErrMissingService},
		{"check without ID", s.EnsureCheck(2, &structs.HealthCheck{Node: "n1"}), ErrMissingCheckID},
		{"check without node", s.EnsureCheck(2, &structs.HealthCheck{CheckID: "c"}), ErrMissingNodeName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("err = %v, want %v", tc.err, tc.want)
			}
		})
	}
	if ErrMissingService.Error() != "Missing service registration" || ErrMissingNode.Error() != "Missing node registration" {
		t.Fatal("sentinel texts differ from Consul's")
	}
}

func TestEnsureServiceDefaultsAndUpdates(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "n1")
	// An empty ID defaults to the name.
	must(t, s.EnsureService(2, "n1", &structs.NodeService{Service: "redis", Tags: []string{"a"}}))
	registerCheck(t, s, 3, "n1", "redis-alive", "redis", structs.HealthPassing)

	// Renaming and retagging the service updates its checks.
	must(t, s.EnsureService(4, "n1", &structs.NodeService{ID: "redis", Service: "cache", Tags: []string{"b"}}))
	_, checks, _ := s.ServiceChecks(nil, "cache")
	if len(checks) != 1 || checks[0].ServiceName != "cache" || !reflect.DeepEqual(checks[0].ServiceTags, []string{"b"}) || checks[0].ModifyIndex != 4 {
		t.Fatalf("checks after rename = %+v", checks)
	}
	if _, old, _ := s.ServiceChecks(nil, "redis"); len(old) != 0 {
		t.Fatalf("checks still listed under the old name: %+v", old)
	}
	_, ns, _ := s.NodeServices(nil, "n1")
	if svc := ns.Services["redis"]; svc.CreateIndex != 2 || svc.ModifyIndex != 4 {
		t.Fatalf("service indexes = %+v", svc.RaftIndex)
	}
	// The old name's key is gone: it has no instance left.
	tx := s.db.Txn(false)
	if _, ok := indexValue(tx, nil, serviceIndexKey("redis")); ok {
		t.Fatal("service.redis index key survived its last instance")
	}
	tx.Abort()
}

func TestDeletes(t *testing.T) {
	setup := func(t *testing.T) *Store {
		s := NewStore()
		registerNode(t, s, 1, "n1")
		registerService(t, s, 2, "n1", "web1", "web")
		registerService(t, s, 3, "n1", "db1", "db")
		registerCheck(t, s, 4, "n1", "node-check", "", structs.HealthPassing)
		registerCheck(t, s, 5, "n1", "web-check", "web1", structs.HealthPassing)
		registerCheck(t, s, 6, "n1", "db-check", "db1", structs.HealthPassing)
		return s
	}
	checkIDs := func(s *Store) []string {
		_, checks, _ := s.NodeChecks(nil, "n1")
		var ids []string
		for _, c := range checks {
			ids = append(ids, c.CheckID)
		}
		return ids
	}
	t.Run("DeleteService removes its checks", func(t *testing.T) {
		s := setup(t)
		must(t, s.DeleteService(10, "n1", "web1"))
		if got := checkIDs(s); !reflect.DeepEqual(got, []string{"db-check", "node-check"}) {
			t.Fatalf("checks = %v", got)
		}
		_, ns, _ := s.NodeServices(nil, "n1")
		if _, ok := ns.Services["web1"]; ok || len(ns.Services) != 1 {
			t.Fatalf("services = %v", ns.Services)
		}
		must(t, s.DeleteService(11, "n1", "web1")) // missing: fine
	})
	t.Run("DeleteCheck", func(t *testing.T) {
		s := setup(t)
		must(t, s.DeleteCheck(10, "n1", "node-check"))
		if got := checkIDs(s); !reflect.DeepEqual(got, []string{"db-check", "web-check"}) {
			t.Fatalf("checks = %v", got)
		}
		must(t, s.DeleteCheck(11, "n1", "node-check"))
	})
	t.Run("DeleteNode removes everything", func(t *testing.T) {
		s := setup(t)
		must(t, s.DeleteNode(10, "N1"))
		if _, ns, _ := s.NodeServices(nil, "n1"); ns != nil {
			t.Fatal("node still there")
		}
		_, all, _ := s.ChecksInState(nil, structs.HealthAny)
		_, svcs, _ := s.Services(nil, nil)
		if len(all) != 0 || len(svcs) != 0 {
			t.Fatalf("leftovers: checks %v services %v", all, svcs)
		}
		idx, _, _ := s.NodeServices(nil, "n1")
		if idx != 10 {
			t.Fatalf("index after delete = %d, want 10", idx)
		}
		must(t, s.DeleteNode(11, "n1"))
	})
}

func TestCatalogReads(t *testing.T) {
	s := NewStore()
	must(t, s.EnsureNode(1, &structs.Node{Node: "a", Address: "10.0.0.1", Meta: map[string]string{"env": "prod", "rack": "1"}}))
	must(t, s.EnsureNode(2, &structs.Node{Node: "b", Address: "10.0.0.2", Meta: map[string]string{"env": "dev"}}))
	registerService(t, s, 3, "a", "web1", "web", "v2", "primary")
	registerService(t, s, 4, "b", "web2", "web", "v1", "v2")
	registerService(t, s, 5, "b", "db1", "db")
	must(t, s.EnsureService(6, "a", &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: "web1-proxy",
		Service: "web-sidecar-proxy", Port: 21000, Proxy: structs.ConnectProxyConfig{DestinationServiceName: "web"}}))
	must(t, s.EnsureService(7, "b", &structs.NodeService{ID: "api1", Service: "api", Connect: structs.ServiceConnect{Native: true}}))
	registerCheck(t, s, 8, "a", "serfHealth", "", structs.HealthPassing)
	registerCheck(t, s, 9, "a", "web1-http", "web1", structs.HealthWarning)
	registerCheck(t, s, 10, "b", "web2-http", "web2", structs.HealthCritical)

	t.Run("Nodes", func(t *testing.T) {
		cases := []struct {
			filter map[string]string
			want   []string
		}{
			{nil, []string{"a", "b"}},
			{map[string]string{"env": "prod"}, []string{"a"}},
			{map[string]string{"env": "prod", "rack": "2"}, nil},
		}
		for _, tc := range cases {
			idx, nodes, err := s.Nodes(nil, tc.filter)
			must(t, err)
			var got []string
			for _, n := range nodes {
				got = append(got, n.Node)
			}
			if !reflect.DeepEqual(got, tc.want) || idx != 2 {
				t.Fatalf("filter %v: nodes %v idx %d, want %v idx 2", tc.filter, got, idx, tc.want)
			}
		}
	})

	t.Run("Services", func(t *testing.T) {
		idx, svcs, err := s.Services(nil, nil)
		must(t, err)
		want := map[string][]string{
			"web": {"v2", "primary", "v1"}, "db": {}, "web-sidecar-proxy": {}, "api": {},
		}
		if !reflect.DeepEqual(svcs, want) || idx != 7 {
			t.Fatalf("services = %v idx %d, want %v idx 7", svcs, idx, want)
		}
		_, svcs, _ = s.Services(nil, map[string]string{"env": "dev"})
		want = map[string][]string{"web": {"v1", "v2"}, "db": {}, "api": {}}
		if !reflect.DeepEqual(svcs, want) {
			t.Fatalf("filtered services = %v, want %v", svcs, want)
		}
		// keep sees each instance flattened with its node; a service is
		// listed with the tags of the instances it keeps.
		var seen []string
		_, svcs, _ = s.ServicesWhere(nil, nil, func(sn *structs.ServiceNode) bool {
			seen = append(seen, sn.Node+"/"+sn.ServiceID)
			return sn.ServiceName == "web" && slices.Contains(sn.ServiceTags, "primary")
		})
		want = map[string][]string{"web": {"v2", "primary"}}
		if !reflect.DeepEqual(svcs, want) || len(seen) != 5 {
			t.Fatalf("services of kept instances = %v (saw %v), want %v (every instance seen)", svcs, seen, want)
		}
	})

	t.Run("ServiceNodes", func(t *testing.T) {
		cases := []struct {
			name    string
			service string
			tags    []string
			connect bool
			want    []string // ServiceIDs
		}{
			{"all", "web", nil, false, []string{"web1", "web2"}},
			{"case-insensitive name", "WEB", nil, false, []string{"web1", "web2"}},
			{"one tag", "web", []string{"V2"}, false, []string{"web1", "web2"}},
			{"all tags", "web", []string{"v2", "primary"}, false, []string{"web1"}},
			{"no match", "web", []string{"v3"}, false, nil},
			{"connect proxies", "web", nil, true, []string{"web1-proxy"}},
			{"connect native", "api", nil, true, []string{"api1"}},
			{"missing", "nope", nil, false, nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, sns, err := s.ServiceNodes(nil, tc.service, tc.tags, tc.connect)
				must(t, err)
				var got []string
				for _, sn := range sns {
					got = append(got, sn.ServiceID)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
		_, sns, _ := s.ServiceNodes(nil, "web", nil, false)
		if sns[0].Node != "a" || sns[0].Address != "10.0.0.1" || sns[0].NodeMeta["env"] != "prod" || sns[0].ServicePort != 8080 {
			t.Fatalf("flattened instance = %+v", sns[0])
		}
	})

	t.Run("NodeServices", func(t *testing.T) {
		_, ns, err := s.NodeServices(nil, "a")
		must(t, err)
		if ns.Node.Node != "a" || len(ns.Services) != 2 || ns.Services["web1-proxy"].Proxy.DestinationServiceName != "web" {
			t.Fatalf("node services = %+v", ns)
		}
		_, ns, err = s.NodeServices(nil, "missing")
		must(t, err)
		if ns != nil {
			t.Fatal("missing node returned services")
		}
	})

	t.Run("CheckServiceNodes", func(t *testing.T) {
		_, csn, err := s.CheckServiceNodes(nil, "web", nil, false)
		must(t, err)
		if len(csn) != 2 {
			t.Fatalf("instances = %d", len(csn))
		}
		var got [][]string
		for _, c := range csn {
			var ids []string
			for _, chk := range c.Checks {
				ids = append(ids, chk.CheckID)
			}
			got = append(got, ids)
		}
		// Node checks first, then the instance's own.
		want := [][]string{{"serfHealth", "web1-http"}, {"web2-http"}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("checks = %v, want %v", got, want)
		}
		if csn[0].Node.Node != "a" || csn[0].Service.ID != "web1" || csn[0].Passing() {
			t.Fatalf("first instance = %+v", csn[0])
		}
		_, csn, _ = s.CheckServiceNodes(nil, "web", nil, true)
		if len(csn) != 1 || csn[0].Service.ID != "web1-proxy" || len(csn[0].Checks) != 1 {
			t.Fatalf("connect instances = %+v", csn)
		}
		_, csn, _ = s.CheckServiceNodes(nil, "web", []string{"primary"}, false)
		if len(csn) != 1 || csn[0].Service.ID != "web1" {
			t.Fatalf("tagged instances = %+v", csn)
		}
		if _, csn, _ = s.CheckServiceNodes(nil, "nope", nil, false); csn == nil || len(csn) != 0 {
			t.Fatalf("missing service = %#v, want empty", csn)
		}
	})

	t.Run("checks", func(t *testing.T) {
		ids := func(checks structs.HealthChecks) []string {
			var out []string
			for _, c := range checks {
				out = append(out, c.CheckID)
			}
			return out
		}
		cases := []struct {
			name string
			read func() (uint64, structs.HealthChecks, error)
			want []string
		}{
			{"NodeChecks", func() (uint64, structs.HealthChecks, error) { return s.NodeChecks(nil, "a") }, []string{"serfHealth", "web1-http"}},
			{"ServiceChecks", func() (uint64, structs.HealthChecks, error) { return s.ServiceChecks(nil, "web") }, []string{"web1-http", "web2-http"}},
			{"any", func() (uint64, structs.HealthChecks, error) { return s.ChecksInState(nil, structs.HealthAny) }, []string{"serfHealth", "web1-http", "web2-http"}},
			{"passing", func() (uint64, structs.HealthChecks, error) { return s.ChecksInState(nil, structs.HealthPassing) }, []string{"serfHealth"}},
			{"critical", func() (uint64, structs.HealthChecks, error) { return s.ChecksInState(nil, structs.HealthCritical) }, []string{"web2-http"}},
			{"bogus state", func() (uint64, structs.HealthChecks, error) { return s.ChecksInState(nil, "bogus") }, nil},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, checks, err := tc.read()
				must(t, err)
				if checks == nil {
					t.Fatal("nil list, want empty")
				}
				if got := ids(checks); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			})
		}
	})

	t.Run("results are copies", func(t *testing.T) {
		_, ns, _ := s.NodeServices(nil, "a")
		ns.Services["web1"].Tags[0] = "mutated"
		ns.Node.Meta["env"] = "mutated"
		_, ns, _ = s.NodeServices(nil, "a")
		if ns.Services["web1"].Tags[0] != "v2" || ns.Node.Meta["env"] != "prod" {
			t.Fatal("mutating a result changed the store")
		}
	})
}

func TestServiceIndexes(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "a")
	registerNode(t, s, 2, "b")
	registerService(t, s, 3, "a", "web1", "web")
	registerService(t, s, 4, "b", "db1", "db")
	must(t, s.EnsureService(5, "a", &structs.NodeService{Kind: structs.ServiceKindConnectProxy, ID: "p",
		Service: "web-proxy", Proxy: structs.ConnectProxyConfig{DestinationServiceName: "web"}}))

	webIdx := func() uint64 {
		idx, _, err := s.CheckServiceNodes(nil, "web", nil, false)
		must(t, err)
		return idx
	}
	connectIdx := func() uint64 {
		idx, _, err := s.CheckServiceNodes(nil, "web", nil, true)
		must(t, err)
		return idx
	}
	// The proxy registration moved web's Connect key, not web's own.
	if webIdx() != 3 || connectIdx() != 5 {
		t.Fatalf("web %d connect %d, want 3 and 5", webIdx(), connectIdx())
	}

	steps := []struct {
		name        string
		write       func(idx uint64)
		web, connct bool // whether web's health index / Connect index must move
	}{
		{"other service on other node", func(i uint64) { registerService(t, s, i, "b", "db2", "db") }, false, false},
		{"node check on web's node", func(i uint64) { registerCheck(t, s, i, "a", "serfHealth", "", structs.HealthPassing) }, true, true},
		{"node check elsewhere", func(i uint64) { registerCheck(t, s, i, "b", "serfHealth", "", structs.HealthPassing) }, false, false},
		{"web's own check", func(i uint64) { registerCheck(t, s, i, "a", "web-http", "web1", structs.HealthPassing) }, true, false},
		{"proxy check", func(i uint64) { registerCheck(t, s, i, "a", "proxy-alive", "p", structs.HealthPassing) }, false, true},
		{"web's node address", func(i uint64) { must(t, s.EnsureNode(i, testNode("a", "10.9.9.9"))) }, true, true},
		{"unchanged check", func(i uint64) { registerCheck(t, s, i, "a", "web-http", "web1", structs.HealthPassing) }, false, false},
		{"check turns critical", func(i uint64) { registerCheck(t, s, i, "a", "web-http", "web1", structs.HealthCritical) }, true, false},
		{"delete node check", func(i uint64) { must(t, s.DeleteCheck(i, "a", "serfHealth")) }, true, true},
		{"delete proxy", func(i uint64) { must(t, s.DeleteService(i, "a", "p")) }, false, true},
	}
	idx := uint64(100)
	for _, st := range steps {
		beforeWeb, beforeConnect := webIdx(), connectIdx()
		idx++
		st.write(idx)
		afterWeb, afterConnect := webIdx(), connectIdx()
		if st.web != (afterWeb == idx) || afterWeb < beforeWeb {
			t.Fatalf("%s: web index %d -> %d (write at %d), want moved=%v", st.name, beforeWeb, afterWeb, idx, st.web)
		}
		if st.connct != (afterConnect == idx) || afterConnect < beforeConnect {
			t.Fatalf("%s: connect index %d -> %d (write at %d), want moved=%v", st.name, beforeConnect, afterConnect, idx, st.connct)
		}
	}

	// A service without instances answers the services table index.
	tx := s.db.Txn(false)
	servicesIdx, _ := indexValue(tx, nil, tableServices)
	tx.Abort()
	got, _, _ := s.ServiceNodes(nil, "nope", nil, false)
	if got != servicesIdx || got == 0 {
		t.Fatalf("missing service index = %d, want services table %d", got, servicesIdx)
	}
	// Deleting the last instance moves the answer past everything seen.
	before := webIdx()
	idx++
	must(t, s.DeleteService(idx, "a", "web1"))
	if after := webIdx(); after != idx || after <= before {
		t.Fatalf("after last instance removed: %d (before %d)", after, before)
	}
}

func TestNilAndEmptyAreTheSameRegistration(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "n1")
	must(t, s.EnsureService(2, "n1", &structs.NodeService{ID: "web", Service: "web"}))
	must(t, s.EnsureCheck(3, &structs.HealthCheck{Node: "n1", CheckID: "c", ServiceID: "web", Status: structs.HealthPassing}))
	must(t, s.EnsureService(4, "n1", &structs.NodeService{ID: "web", Service: "web", Tags: []string{}, Meta: map[string]string{},
		Proxy: structs.ConnectProxyConfig{Config: map[string]interface{}{}}}))
	must(t, s.EnsureCheck(5, &structs.HealthCheck{Node: "n1", CheckID: "c", ServiceID: "web", Status: structs.HealthPassing,
		Definition: structs.HealthCheckDefinition{Header: map[string][]string{}}}))
	if got := s.LastIndex(); got != 3 {
		t.Fatalf("re-registration differing only in nil/empty moved LastIndex to %d", got)
	}
	// A real change still writes.
	must(t, s.EnsureService(6, "n1", &structs.NodeService{ID: "web", Service: "web", Tags: []string{"x"}}))
	if got := s.LastIndex(); got != 6 {
		t.Fatalf("LastIndex = %d, want 6", got)
	}
}

// TestNodeLocalityChanges: a registration that changes only the node's
// locality updates the node (and its ModifyIndex); the same again does not.
func TestNodeLocalityChanges(t *testing.T) {
	s := NewStore()
	reg := func(idx uint64, l *structs.Locality) {
		t.Helper()
		must(t, s.EnsureRegistration(idx, &structs.RegisterRequest{ID: "id-1", Node: "n1", Address: "a", Locality: l}))
	}
	reg(1, &structs.Locality{Region: "r", Zone: "z1"})
	reg(2, &structs.Locality{Region: "r", Zone: "z2"})
	reg(3, &structs.Locality{Region: "r", Zone: "z2"})
	_, n, _ := s.GetNode(nil, "n1")
	if n.Locality == nil || n.Locality.Zone != "z2" || n.ModifyIndex != 2 {
		t.Fatalf("node = %+v, locality %+v", n, n.Locality)
	}
	reg(4, nil)
	if _, n, _ = s.GetNode(nil, "n1"); n.Locality != nil || n.ModifyIndex != 4 {
		t.Fatalf("locality not cleared: %+v", n)
	}
}
