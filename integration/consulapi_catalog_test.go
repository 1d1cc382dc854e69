package integration

import (
	"slices"
	"testing"

	"github.com/hashicorp/consul/api"
)

// extRegistration is a catalog registration of an external node with one
// service and one service check.
func extRegistration(node, addr, id, name string, tags []string, port int, status string) *api.CatalogRegistration {
	return &api.CatalogRegistration{
		Node:    node,
		Address: addr,
		Service: &api.AgentService{ID: id, Service: name, Tags: tags, Port: port},
		Checks: api.HealthChecks{{
			Node: node, CheckID: "check-" + id, Name: "check " + id, Status: status, ServiceID: id,
		}},
	}
}

func registerAll(t *testing.T, c *api.Client, regs ...*api.CatalogRegistration) {
	t.Helper()
	for _, r := range regs {
		if _, err := c.Catalog().Register(r, nil); err != nil {
			t.Fatalf("register %s/%s: %v", r.Node, r.Service.ID, err)
		}
	}
}

// apiCatalog: register, services (tags deduplicated), service (by tag),
// nodes, node, the answers for missing names, deregister.
func apiCatalog(t *testing.T, c *api.Client) {
	cat := c.Catalog()
	registerAll(t, c,
		extRegistration("apicat-a", "10.77.0.1", "web-1", "apicat-web", []string{"v1", "primary"}, 8080, api.HealthPassing),
		extRegistration("apicat-b", "10.77.0.2", "web-2", "apicat-web", []string{"v2", "v1"}, 8081, api.HealthCritical),
		extRegistration("apicat-b", "10.77.0.2", "db-1", "apicat-db", nil, 5432, api.HealthPassing),
	)

	services, meta, err := cat.Services(nil)
	if err != nil {
		t.Fatal(err)
	}
	if meta.LastIndex == 0 {
		t.Error("catalog services: X-Consul-Index is 0")
	}
	webTags := slices.Clone(services["apicat-web"])
	slices.Sort(webTags)
	if want := []string{"primary", "v1", "v2"}; !slices.Equal(webTags, want) {
		t.Errorf("Services()[apicat-web] = %v, want the deduplicated tags %v", services["apicat-web"], want)
	}
	if _, ok := services["apicat-db"]; !ok {
		t.Errorf("Services() lacks apicat-db: %v", services)
	}

	all, _, err := cat.Service("apicat-web", "", nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("Service(apicat-web) = %d instances, %v; want 2", len(all), err)
	}
	primary, _, err := cat.Service("apicat-web", "primary", nil)
	if err != nil || len(primary) != 1 {
		t.Fatalf("Service(apicat-web, primary) = %d instances, %v; want 1", len(primary), err)
	}
	p := primary[0]
	if p.Node != "apicat-a" || p.Address != "10.77.0.1" || p.ServiceID != "web-1" || p.ServiceName != "apicat-web" ||
		p.ServicePort != 8080 || !slices.Equal(p.ServiceTags, []string{"v1", "primary"}) {
		t.Errorf("Service(apicat-web, primary)[0] = %+v", p)
	}
	v1, _, err := cat.Service("apicat-web", "v1", nil)
	if err != nil || len(v1) != 2 {
		t.Errorf("Service(apicat-web, v1) = %d instances, %v; want 2", len(v1), err)
	}
	none, _, err := cat.Service("apicat-nonexistent", "", nil)
	if err != nil || len(none) != 0 {
		t.Errorf("Service of a missing name = %v, %v; want empty, no error", none, err)
	}

	nodes, _, err := cat.Nodes(nil)
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{}
	for _, n := range nodes {
		addrs[n.Node] = n.Address
	}
	if addrs["apicat-a"] != "10.77.0.1" || addrs["apicat-b"] != "10.77.0.2" {
		t.Errorf("Nodes() = %v, want apicat-a and apicat-b with their addresses", addrs)
	}

	node, _, err := cat.Node("apicat-b", nil)
	if err != nil || node == nil || node.Node == nil {
		t.Fatalf("Node(apicat-b) = %+v, %v", node, err)
	}
	if node.Node.Address != "10.77.0.2" || len(node.Services) != 2 || node.Services["web-2"] == nil || node.Services["db-1"] == nil {
		t.Errorf("Node(apicat-b) = node %+v, services %v", node.Node, node.Services)
	} else if s := node.Services["db-1"]; s.Service != "apicat-db" || s.Port != 5432 {
		t.Errorf("Node(apicat-b).Services[db-1] = %+v", s)
	}
	missing, _, err := cat.Node("apicat-no-such-node", nil)
	if err != nil || missing != nil {
		t.Errorf("Node of a missing name = %+v, %v; want nil, no error", missing, err)
	}

	if _, err := cat.Deregister(&api.CatalogDeregistration{Node: "apicat-b", ServiceID: "db-1"}, nil); err != nil {
		t.Fatal(err)
	}
	node, _, err = cat.Node("apicat-b", nil)
	if err != nil || node == nil || len(node.Services) != 1 || node.Services["web-2"] == nil {
		t.Errorf("after deregistering db-1, Node(apicat-b) = %+v, %v", node, err)
	}
	if dbs, _, err := cat.Service("apicat-db", "", nil); err != nil || len(dbs) != 0 {
		t.Errorf("after deregister, Service(apicat-db) = %v, %v", dbs, err)
	}
}

// apiHealth: health service with and without passing-only and with a tag,
// and an instance that turns passing once its check does.
func apiHealth(t *testing.T, c *api.Client) {
	h := c.Health()
	registerAll(t, c,
		extRegistration("apihealth-1", "10.78.0.1", "pay-1", "apihealth-pay", []string{"blue"}, 9000, api.HealthPassing),
		extRegistration("apihealth-2", "10.78.0.2", "pay-2", "apihealth-pay", []string{"green"}, 9000, api.HealthCritical),
	)
	ids := func(entries []*api.ServiceEntry) []string {
		var out []string
		for _, e := range entries {
			out = append(out, e.Service.ID)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name    string
		tag     string
		passing bool
		want    []string
	}{
		{"all", "", false, []string{"pay-1", "pay-2"}},
		{"passing only", "", true, []string{"pay-1"}},
		{"tag", "green", false, []string{"pay-2"}},
		{"tag and passing", "green", true, nil},
	}
	for _, tt := range tests {
		entries, meta, err := h.Service("apihealth-pay", tt.tag, tt.passing, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := ids(entries); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Health().Service = %v, want %v", tt.name, got, tt.want)
		}
		if meta.LastIndex == 0 {
			t.Errorf("%s: X-Consul-Index is 0", tt.name)
		}
	}

	entries, _, err := h.Service("apihealth-pay", "", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		want := api.HealthPassing
		if e.Service.ID == "pay-2" {
			want = api.HealthCritical
		}
		if e.Node == nil || e.Node.Node != "apihealth-"+e.Service.ID[len("pay-"):] {
			t.Errorf("entry %s: node %+v", e.Service.ID, e.Node)
		}
		if got := e.Checks.AggregatedStatus(); got != want {
			t.Errorf("entry %s: aggregated status %s, want %s (checks %+v)", e.Service.ID, got, want, e.Checks)
		}
	}

	registerAll(t, c, extRegistration("apihealth-2", "10.78.0.2", "pay-2", "apihealth-pay", []string{"green"}, 9000, api.HealthPassing))
	entries, _, err = h.Service("apihealth-pay", "", true, nil)
	if err != nil || !slices.Equal(ids(entries), []string{"pay-1", "pay-2"}) {
		t.Errorf("after pay-2 turned passing: %v, %v", ids(entries), err)
	}
	missing, _, err := h.Service("apihealth-nonexistent", "", false, nil)
	if err != nil || len(missing) != 0 {
		t.Errorf("health of a missing service = %v, %v; want empty, no error", missing, err)
	}
}
