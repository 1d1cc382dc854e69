package httpapi

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/structs"
)

// malformedFilterErr is what the official client reports for the filter
// "foo": Consul's 500 and message (go-bexpr's).
const malformedFilterErr = `Unexpected response code: 500 (Failed to create boolean expression evaluator: 1:4 (3): no match found, expected: "!=", ".", "==", "[", [ \t\r\n] or [a-zA-Z0-9_])`

// fixedLocal is a LocalAgent with fixed services and checks, enough for
// the agent's read endpoints (the real one lives in package agent, which
// imports this package).
type fixedLocal struct {
	services map[string]*structs.NodeService
	checks   structs.HealthChecks
}

var errReadOnly = errors.New("read-only test agent")

func (f *fixedLocal) RegisterService(*structs.ServiceDefinition, string, bool) error {
	return errReadOnly
}
func (f *fixedLocal) DeregisterService(string) error            { return errReadOnly }
func (f *fixedLocal) Services() map[string]*structs.NodeService { return f.services }
func (f *fixedLocal) Service(id string) *structs.NodeService    { return f.services[id] }
func (f *fixedLocal) WatchService(id string) (*structs.NodeService, string, <-chan struct{}) {
	return f.services[id], "hash", nil
}

// Checks returns copies, as the real agent does.
func (f *fixedLocal) Checks() structs.HealthChecks {
	out := make(structs.HealthChecks, 0, len(f.checks))
	for _, c := range f.checks {
		cp := *c
		out = append(out, &cp)
	}
	return out
}
func (f *fixedLocal) RegisterCheck(*structs.CheckDefinition, string) error { return errReadOnly }
func (f *fixedLocal) DeregisterCheck(string) error                         { return errReadOnly }
func (f *fixedLocal) UpdateTTL(string, string, string) error               { return errReadOnly }
func (f *fixedLocal) SetMaintenance(string, bool, string) error            { return errReadOnly }

// startFilterAgent runs a real server with catalog data and an HTTP API
// over it that also serves local services and checks, and returns an
// official client and the API's base URL.
func startFilterAgent(t *testing.T) (*api.Client, string) {
	t.Helper()
	_, srv := startRealServer(t)
	local := &fixedLocal{
		services: map[string]*structs.NodeService{
			"redis1": {ID: "redis1", Service: "redis", Tags: []string{"primary", "production"}, Meta: map[string]string{"env": "production"}, Port: 1234},
			"redis3": {ID: "redis3", Service: "redis", Tags: []string{"primary", "qa"}, Meta: map[string]string{"env": "qa"}, Port: 1235},
			"web-sidecar-proxy": {Kind: structs.ServiceKindConnectProxy, ID: "web-sidecar-proxy", Service: "web-sidecar-proxy", Port: 21000,
				Proxy: structs.ConnectProxyConfig{DestinationServiceName: "web", Upstreams: []structs.Upstream{{DestinationName: "redis", LocalBindPort: 6379}}}},
		},
		checks: structs.HealthChecks{
			{Node: "node1", CheckID: "service:redis1", Name: "redis", Status: structs.HealthPassing, ServiceID: "redis1", ServiceName: "redis", ServiceTags: []string{"primary"}},
			{Node: "node1", CheckID: "service:redis3", Name: "redis", Status: structs.HealthCritical, ServiceID: "redis3", ServiceName: "redis"},
			{Node: "node1", CheckID: "mem", Name: "memory", Status: structs.HealthWarning},
		},
	}
	h, err := New(Config{RPC: srv, NodeName: "node1", Datacenter: testDC, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	c, url := officialClient(t, h)

	for _, reg := range []*api.CatalogRegistration{
		{
			Node: "web-1", Address: "10.0.0.1", NodeMeta: map[string]string{"rack": "r1"},
			Service: &api.AgentService{ID: "web-v1", Service: "web", Tags: []string{"primary"}, Meta: map[string]string{"version": "v1"}, Port: 8080},
			Checks: api.HealthChecks{
				{CheckID: "web-1-node", Name: "node", Status: api.HealthPassing},
				{CheckID: "web-v1-check", Name: "web", ServiceID: "web-v1", Status: api.HealthPassing},
			},
		},
		{
			Node: "web-2", Address: "10.0.0.2", NodeMeta: map[string]string{"rack": "r2"},
			Service: &api.AgentService{ID: "web-v2", Service: "web", Tags: []string{"secondary"}, Meta: map[string]string{"version": "v2"}, Port: 8081},
			Checks:  api.HealthChecks{{CheckID: "web-v2-check", Name: "web", ServiceID: "web-v2", Status: api.HealthCritical}},
		},
		{
			Node: "web-2", Address: "10.0.0.2", NodeMeta: map[string]string{"rack": "r2"},
			Service: &api.AgentService{Kind: api.ServiceKindConnectProxy, ID: "web-v2-proxy", Service: "web-sidecar-proxy", Port: 21000,
				Proxy: &api.AgentServiceConnectProxyConfig{DestinationServiceName: "web", DestinationServiceID: "web-v2",
					Upstreams: []api.Upstream{{DestinationName: "db", LocalBindPort: 9191}}}},
		},
	} {
		if _, err := c.Catalog().Register(reg, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, ixn := range []*api.Intention{
		{SourceName: "web", DestinationName: "db", Action: api.IntentionActionAllow},
		{SourceName: "api", DestinationName: "db", Action: api.IntentionActionDeny},
	} {
		if _, err := c.Connect().IntentionUpsert(ixn, nil); err != nil {
			t.Fatal(err)
		}
	}
	return c, url
}

func sorted(ids []string) []string {
	slices.Sort(ids)
	if ids == nil {
		ids = []string{}
	}
	return ids
}

func TestFilterWithOfficialClient(t *testing.T) {
	c, _ := startFilterAgent(t)
	q := func(filter string) *api.QueryOptions { return &api.QueryOptions{Filter: filter} }
	// Each read lists the IDs of what it returned.
	reads := map[string]func(filter string) ([]string, error){
		"catalog nodes": func(f string) ([]string, error) {
			nodes, _, err := c.Catalog().Nodes(q(f))
			var ids []string
			for _, n := range nodes {
				ids = append(ids, n.Node)
			}
			return sorted(ids), err
		},
		"catalog services": func(f string) ([]string, error) {
			svcs, _, err := c.Catalog().Services(q(f))
			var ids []string
			for name, tags := range svcs {
				ids = append(ids, name+":"+strings.Join(sorted(tags), ","))
			}
			return sorted(ids), err
		},
		"catalog service": func(f string) ([]string, error) {
			svcs, _, err := c.Catalog().Service("web", "", q(f))
			var ids []string
			for _, s := range svcs {
				ids = append(ids, s.ServiceID)
			}
			return sorted(ids), err
		},
		"catalog connect": func(f string) ([]string, error) {
			svcs, _, err := c.Catalog().Connect("web", "", q(f))
			var ids []string
			for _, s := range svcs {
				ids = append(ids, s.ServiceID)
			}
			return sorted(ids), err
		},
		"catalog node": func(f string) ([]string, error) {
			node, _, err := c.Catalog().Node("web-2", q(f))
			if node == nil {
				return nil, err
			}
			var ids []string
			for id := range node.Services {
				ids = append(ids, id)
			}
			return sorted(ids), err
		},
		"health service": func(f string) ([]string, error) {
			entries, _, err := c.Health().Service("web", "", false, q(f))
			var ids []string
			for _, e := range entries {
				ids = append(ids, e.Service.ID)
			}
			return sorted(ids), err
		},
		"health connect": func(f string) ([]string, error) {
			entries, _, err := c.Health().Connect("web", "", false, q(f))
			var ids []string
			for _, e := range entries {
				ids = append(ids, e.Service.ID)
			}
			return sorted(ids), err
		},
		"health checks": func(f string) ([]string, error) {
			checks, _, err := c.Health().Checks("web", q(f))
			var ids []string
			for _, h := range checks {
				ids = append(ids, h.CheckID)
			}
			return sorted(ids), err
		},
		"health node": func(f string) ([]string, error) {
			checks, _, err := c.Health().Node("web-1", q(f))
			var ids []string
			for _, h := range checks {
				ids = append(ids, h.CheckID)
			}
			return sorted(ids), err
		},
		"health state": func(f string) ([]string, error) {
			checks, _, err := c.Health().State(api.HealthAny, q(f))
			var ids []string
			for _, h := range checks {
				ids = append(ids, h.CheckID)
			}
			return sorted(ids), err
		},
		"intentions": func(f string) ([]string, error) {
			ixns, _, err := c.Connect().Intentions(q(f))
			var ids []string
			for _, x := range ixns {
				ids = append(ids, x.SourceName+">"+x.DestinationName)
			}
			return sorted(ids), err
		},
		"agent services": func(f string) ([]string, error) {
			svcs, err := c.Agent().ServicesWithFilter(f)
			var ids []string
			for id, s := range svcs {
				if s.ID != id {
					return nil, errors.New("service under another ID: " + id)
				}
				ids = append(ids, id)
			}
			return sorted(ids), err
		},
		"agent checks": func(f string) ([]string, error) {
			checks, err := c.Agent().ChecksWithFilter(f)
			var ids []string
			for id := range checks {
				ids = append(ids, id)
			}
			return sorted(ids), err
		},
	}
	cases := []struct {
		read, filter string
		want         []string
	}{
		{"catalog nodes", `Meta.rack == r2`, []string{"web-2"}},
		{"catalog nodes", `Node matches "^web-"`, []string{"web-1", "web-2"}},
		{"catalog nodes", `Meta.rack == r9`, []string{}},
		// Services with an instance the filter selects, with the tags of
		// the selected instances only (as Consul builds them).
		{"catalog services", `ServiceMeta.version == v2`, []string{"web:secondary"}},
		{"catalog services", `NodeMeta.rack == r2`, []string{"web-sidecar-proxy:", "web:secondary"}},
		{"catalog services", `ServiceName == web`, []string{"web:primary,secondary"}},
		{"catalog services", `ServiceKind == "connect-proxy"`, []string{"web-sidecar-proxy:"}},
		{"catalog services", `ServiceName == nothing`, []string{}},
		{"catalog service", `ServiceMeta.version == v2`, []string{"web-v2"}},
		{"catalog service", `NodeMeta.rack == r1`, []string{"web-v1"}},
		{"catalog connect", `ServiceProxy.Upstreams.DestinationName == db`, []string{"web-v2-proxy"}},
		{"catalog connect", `ServiceProxy.Upstreams.DestinationName == cache`, []string{}},
		{"catalog node", `Kind == "connect-proxy"`, []string{"web-v2-proxy"}},
		{"catalog node", `Service == nothing`, []string{}},
		{"health service", `Service.Meta.version == v2`, []string{"web-v2"}},
		{"health service", `Checks.Status == critical`, []string{"web-v2"}},
		{"health service", `Service.Meta.version == v3`, []string{}},
		{"health connect", `Service.Proxy.DestinationServiceID == "web-v2"`, []string{"web-v2-proxy"}},
		{"health checks", `Status == critical`, []string{"web-v2-check"}},
		{"health node", `ServiceName != ""`, []string{"web-v1-check"}},
		{"health state", `Node == "web-2"`, []string{"web-v2-check"}},
		{"intentions", `SourceName == web`, []string{"web>db"}},
		{"intentions", `Action == deny`, []string{"api>db"}},
		// Consul's documented agent example.
		{"agent services", `Meta.env == "qa"`, []string{"redis3"}},
		{"agent services", `"primary" in Tags and Port == 1234`, []string{"redis1"}},
		{"agent services", `Kind == "connect-proxy" and Proxy.Upstreams.DestinationName == redis`, []string{"web-sidecar-proxy"}},
		{"agent services", `Weights.Passing == 1 and Service == redis`, []string{"redis1", "redis3"}},
		{"agent services", `Service == nothing`, []string{}},
		{"agent checks", `Status != passing`, []string{"mem", "service:redis3"}},
		{"agent checks", `"primary" in ServiceTags`, []string{"service:redis1"}},
		{"agent checks", `ServiceName == ""`, []string{"mem"}},
		{"agent checks", `Status == maintenance`, []string{}},
	}
	for _, tc := range cases {
		got, err := reads[tc.read](tc.filter)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s with %q: %q %v, want %q", tc.read, tc.filter, got, err, tc.want)
		}
	}
	// Without a filter, nothing is lost.
	if all, err := reads["health service"](""); err != nil || !slices.Equal(all, []string{"web-v1", "web-v2"}) {
		t.Errorf("unfiltered health service: %q %v", all, err)
	}
	// A malformed expression is Consul's 500 on every endpoint.
	for name, read := range reads {
		if _, err := read("foo"); err == nil || err.Error() != malformedFilterErr {
			t.Errorf("%s with a malformed filter: %v, want %q", name, err, malformedFilterErr)
		}
	}
}

// TestFilterWireAnswers checks what the official client cannot tell apart:
// a filter that matches nothing is 200 [] (not null, not 404), and the
// refusals' statuses and bodies.
func TestFilterWireAnswers(t *testing.T) {
	_, base := startFilterAgent(t)
	cases := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/v1/health/service/web?filter=Service.Meta.version+%3D%3D+v9", 200, "[]"},
		{"/v1/catalog/nodes?filter=Meta.rack+%3D%3D+r9", 200, "[]"},
		{"/v1/health/state/any?filter=Node+%3D%3D+nobody", 200, "[]"},
		{"/v1/connect/intentions?filter=SourceName+%3D%3D+nobody", 200, "[]"},
		{"/v1/agent/services?filter=Service+%3D%3D+nobody", 200, "{}"},
		{"/v1/catalog/node/web-2?filter=Service+%3D%3D+nobody", 200, ""},
		{"/v1/health/service/web?filter=foo", 500,
			`Failed to create boolean expression evaluator: 1:4 (3): no match found, expected: "!=", ".", "==", "[", [ \t\r\n] or [a-zA-Z0-9_]`},
		{"/v1/agent/checks?filter=Status+%3D%3D", 500,
			`Failed to create boolean expression evaluator: 1:10 (9): no match found, expected: "-", "0", "\"", "` + "`" + `", [ \t\r\n], [1-9] or [a-zA-Z]`},
		{"/v1/catalog/services?filter=ServiceName+%3D%3D+nothing", 200, "{}"},
		{"/v1/catalog/services?filter=ServiceName+%3D%3D", 500,
			`Failed to create boolean expression evaluator: 1:15 (14): no match found, expected: "-", "0", "\"", "` + "`" + `", [ \t\r\n], [1-9] or [a-zA-Z]`},
	}
	for _, tc := range cases {
		resp, err := http.Get(base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.wantCode || (tc.wantBody != "" && string(body) != tc.wantBody) {
			t.Errorf("%s: %d %s, want %d %s", tc.path, resp.StatusCode, body, tc.wantCode, tc.wantBody)
		}
		if tc.wantCode == 200 && strings.HasPrefix(tc.path, "/v1/catalog/node/") && !strings.Contains(string(body), `"Services":{}`) {
			t.Errorf("%s: %s, want the node with no services", tc.path, body)
		}
	}
}
