package structs

import (
	"slices"
	"testing"
)

// TestFilterConsulDocExamples runs the examples of Consul's filtering
// documentation (api-docs/features/filtering) on its sample data, through
// the replies of the endpoints they are written for, with the operators
// and selector forms the page lists.
func TestFilterConsulDocExamples(t *testing.T) {
	weights := &Weights{Passing: 1, Warning: 1}
	// GET /v1/agent/services: the agent's services, filtered as a node's
	// services are.
	agentServices := func() Filterable {
		return &IndexedNodeServices{NodeServices: &NodeServices{Node: &Node{Node: "node-1"}, Services: map[string]*NodeService{
			"redis1": {ID: "redis1", Service: "redis", Tags: []string{"primary", "production"}, Meta: map[string]string{"env": "production", "foo": "bar"}, Port: 1234, Weights: weights},
			"redis2": {ID: "redis2", Service: "redis", Tags: []string{"secondary", "production"}, Meta: map[string]string{"env": "production", "foo": "bar"}, Port: 1235, Weights: weights},
			"redis3": {ID: "redis3", Service: "redis", Tags: []string{"primary", "qa"}, Meta: map[string]string{"env": "qa"}, Port: 1234, Weights: weights},
		}}}
	}
	// GET /v1/catalog/service/api-internal.
	catalogService := func() Filterable {
		svc := func(node, addr string, meta map[string]string, tags []string, env string) *ServiceNode {
			return &ServiceNode{Node: node, Address: addr, Datacenter: "dc1", NodeMeta: meta, ServiceID: "api-internal", ServiceName: "api-internal",
				ServiceTags: tags, ServiceWeights: *weights, ServiceMeta: map[string]string{"environment": env}, ServicePort: 9090}
		}
		return &IndexedServiceNodes{ServiceNodes: ServiceNodes{
			svc("node-1", "198.18.0.1", map[string]string{"agent": "true", "arch": "i386", "os": "darwin"}, []string{"tag"}, "qa"),
			svc("node-2", "198.18.0.2", map[string]string{"arch": "arm", "os": "linux"}, []string{"test", "tag"}, "production"),
			svc("node-4", "198.18.0.4", map[string]string{"arch": "i386", "os": "freebsd"}, []string{}, "qa"),
		}}
	}
	// GET /v1/health/node/node-1.
	healthNode := func() Filterable {
		return &IndexedHealthChecks{HealthChecks: HealthChecks{
			{Node: "node-1", CheckID: "node-health", Name: "Node level check", Status: HealthCritical, ServiceTags: []string{}},
			{Node: "node-1", CheckID: "svc-web-health", Name: "Service level check - web", Status: HealthWarning, ServiceName: "web", ServiceTags: []string{}},
		}}
	}
	ids := func(r Filterable) []string {
		var out []string
		switch r := r.(type) {
		case *IndexedNodeServices:
			for id := range r.NodeServices.Services {
				out = append(out, id)
			}
		case *IndexedServiceNodes:
			for _, sn := range r.ServiceNodes {
				out = append(out, sn.Node)
			}
		case *IndexedHealthChecks:
			for _, c := range r.HealthChecks {
				out = append(out, c.CheckID)
			}
		}
		slices.Sort(out)
		return out
	}
	cases := []struct {
		reply func() Filterable
		expr  string
		want  []string
	}{
		// The page's three examples.
		{agentServices, `Meta.env == "qa"`, []string{"redis3"}},
		{catalogService, `NodeMeta.os == "linux"`, []string{"node-2"}},
		{healthNode, `ServiceName != ""`, []string{"svc-web-health"}},
		// Its two forms of a map key selector.
		{catalogService, `ServiceMeta.environment == qa`, []string{"node-1", "node-4"}},
		{catalogService, `ServiceMeta["environment"] == "production"`, []string{"node-2"}},
		// Each matching operator.
		{catalogService, `NodeMeta.arch != i386`, []string{"node-2"}},
		{catalogService, `ServiceTags is empty`, []string{"node-4"}},
		{catalogService, `ServiceTags is not empty`, []string{"node-1", "node-2"}},
		{agentServices, `"primary" in Tags`, []string{"redis1", "redis3"}},
		{agentServices, `"primary" not in Tags`, []string{"redis2"}},
		{catalogService, `ServiceTags contains "test"`, []string{"node-2"}},
		{catalogService, `ServiceTags not contains "test"`, []string{"node-1", "node-4"}},
		{healthNode, `Name matches "^Service level"`, []string{"svc-web-health"}},
		{healthNode, `Name not matches "web$"`, []string{"node-health"}},
		// Values: numbers, and raw strings in backticks.
		{agentServices, `Port == 1235`, []string{"redis2"}},
		{agentServices, "Meta.foo == `bar` and Weights.Passing == 1", []string{"redis1", "redis2"}},
		// "<E1> and not <E2> or <E3>" is "(<E1> and (not <E2>)) or <E3>".
		{agentServices, `"primary" in Tags and not Meta.env == qa or Port == 1235`, []string{"redis1", "redis2"}},
		{agentServices, `("primary" in Tags and (not Meta.env == qa)) or Port == 1235`, []string{"redis1", "redis2"}},
		{agentServices, `"primary" in Tags and not (Meta.env == qa or Port == 1235)`, []string{"redis1"}},
	}
	for _, tc := range cases {
		reply := tc.reply()
		f, err := CompileFilterFor(tc.expr, reply.FilterElem())
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		reply.FilterResult(f.Evaluate)
		if got := ids(reply); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.expr, got, tc.want)
		}
	}
}
