package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// registerInstance registers node with one instance of svc and one check
// on it in status.
func registerInstance(t *testing.T, s *Server, node, svc string, tags []string, meta map[string]string, status string) {
	t.Helper()
	rpc(t, s, structs.MethodCatalogRegister, &structs.RegisterRequest{
		Node: node, Address: "10.1.0." + node[len(node)-1:],
		Service: &structs.NodeService{ID: svc, Service: svc, Port: 80, Tags: tags, Meta: meta},
		Checks:  structs.HealthChecks{{Node: node, CheckID: "svc:" + svc, Name: "svc", Status: status, ServiceID: svc}},
	}, &struct{}{})
}

func createQuery(t *testing.T, s *Server, q structs.PreparedQuery) string {
	t.Helper()
	var id string
	rpc(t, s, structs.MethodPreparedQueryApply, &structs.PreparedQueryRequest{Op: structs.PreparedQueryCreate, Query: &q}, &id)
	return id
}

func executeNodes(t *testing.T, s *Server, args structs.PreparedQueryExecuteRequest) (structs.PreparedQueryExecuteResponse, []string) {
	t.Helper()
	var out structs.PreparedQueryExecuteResponse
	rpc(t, s, structs.MethodPreparedQueryExecute, &args, &out)
	var names []string
	for _, n := range out.Nodes {
		names = append(names, n.Node.Node)
	}
	return out, names
}

func TestPreparedQueryExecute(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	registerInstance(t, s, "n1", "web", []string{"v1", "primary"}, map[string]string{"env": "prod"}, structs.HealthPassing)
	registerInstance(t, s, "n2", "web", []string{"v1"}, map[string]string{"env": "prod"}, structs.HealthWarning)
	registerInstance(t, s, "n3", "web", []string{"v2"}, nil, structs.HealthCritical)
	registerInstance(t, s, "n4", "db-customer", []string{"primary"}, nil, structs.HealthPassing)
	s.applyCoordinates(structs.Coordinates{
		{Node: "n1", Coord: coordAt(0.9)}, {Node: "n2", Coord: coordAt(0.1)}, {Node: "n3", Coord: coordAt(0.2)},
	})

	tmpl := structs.QueryTemplateOptions{Type: structs.QueryTemplateTypeNamePrefixMatch, Regexp: `^geo-(.*?)-([^-]*)$`}
	for _, q := range []structs.PreparedQuery{
		{Name: "web-all", Service: structs.ServiceQuery{Service: "web"}},
		{Name: "web-passing", Service: structs.ServiceQuery{Service: "web", OnlyPassing: true}},
		{Name: "web-ignore", Service: structs.ServiceQuery{Service: "web", IgnoreCheckIDs: []string{"svc:web"}}},
		{Name: "web-not-primary", Service: structs.ServiceQuery{Service: "web", Tags: []string{"V1", "!primary"}}},
		{Name: "web-meta", Service: structs.ServiceQuery{Service: "web", ServiceMeta: map[string]string{"env": "prod"}, Near: "n1"}},
		{Name: "web-near-agent", Service: structs.ServiceQuery{Service: "web", Near: "_agent", IgnoreCheckIDs: []string{"svc:web"}}},
		{Name: "geo-", Template: tmpl, Service: structs.ServiceQuery{Service: "${match(1)}", Tags: []string{"${match(2)}"},
			Failover: structs.QueryFailoverOptions{NearestN: 2, Datacenters: []string{"dc2"}}}},
	} {
		createQuery(t, s, q)
	}
	sorted := func(in []string) []string { out := slices.Clone(in); slices.Sort(out); return out }
	tests := []struct {
		name   string
		args   structs.PreparedQueryExecuteRequest
		want   []string
		sorted bool // compare in order (near sorting), else as a set
	}{
		{name: "critical dropped", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-all"}, want: []string{"n1", "n2"}},
		{name: "only passing", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "WEB-PASSING"}, want: []string{"n1"}},
		{name: "ignored check", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-ignore"}, want: []string{"n1", "n2", "n3"}},
		{name: "tags and negation", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-not-primary"}, want: []string{"n2"}},
		{name: "service meta, query's Near", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-meta"}, want: []string{"n1", "n2"}, sorted: true},
		{name: "?near overrides", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-meta", Source: structs.QuerySource{Node: "n2"}}, want: []string{"n2", "n1"}, sorted: true},
		{name: "near _agent", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-near-agent", Agent: structs.QuerySource{Node: "n3"}}, want: []string{"n3", "n2", "n1"}, sorted: true},
		{name: "near _ip", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-ignore", Source: structs.QuerySource{Node: "_ip"}, SourceIP: "10.1.0.1"}, want: []string{"n1", "n3", "n2"}, sorted: true},
		{name: "limit", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-near-agent", Agent: structs.QuerySource{Node: "n3"}, Limit: 1}, want: []string{"n3"}, sorted: true},
		{name: "template", args: structs.PreparedQueryExecuteRequest{QueryIDOrName: "geo-db-customer-primary"}, want: []string{"n4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, got := executeNodes(t, s, tt.args)
			if !tt.sorted {
				got = sorted(got)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("nodes = %v, want %v", got, tt.want)
			}
			if out.Datacenter != "dc1" || out.Failovers != 0 {
				t.Fatalf("datacenter %q failovers %d", out.Datacenter, out.Failovers)
			}
		})
	}

	// A template's failover runs when nothing answers here, and reports
	// the datacenters it could ask: none.
	out, got := executeNodes(t, s, structs.PreparedQueryExecuteRequest{QueryIDOrName: "geo-nothing-here"})
	if len(got) != 0 || out.Failovers != 0 || out.Service != "nothing" {
		t.Fatalf("failover = %+v", out)
	}
	var explain structs.PreparedQueryExplainResponse
	rpc(t, s, structs.MethodPreparedQueryExplain, &structs.PreparedQueryExecuteRequest{QueryIDOrName: "geo-db-customer-primary"}, &explain)
	if explain.Query.Service.Service != "db-customer" || !slices.Equal(explain.Query.Service.Tags, []string{"primary"}) {
		t.Fatalf("explain = %+v", explain.Query.Service)
	}
	err := structs.MethodPreparedQueryExecute.Call(context.Background(), s, &structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-none"}, &out)
	if !errors.Is(err, structs.ErrQueryNotFound) {
		t.Fatalf("unknown query: %v", err)
	}
}

func TestPreparedQueryApply(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	id := createQuery(t, s, structs.PreparedQuery{Name: "web", Service: structs.ServiceQuery{Service: "web"}})
	bad := []struct {
		name string
		op   structs.PreparedQueryOp
		q    structs.PreparedQuery
		want string
	}{
		{"no service", structs.PreparedQueryCreate, structs.PreparedQuery{Name: "x"}, "Must provide a Service name to query"},
		{"name collision", structs.PreparedQueryCreate, structs.PreparedQuery{Name: "WEB", Service: structs.ServiceQuery{Service: "web"}}, "name 'WEB' aliases an existing query name"},
		{"invalid session", structs.PreparedQueryCreate, structs.PreparedQuery{Session: "nope", Service: structs.ServiceQuery{Service: "web"}}, `invalid session "nope"`},
		{"bad template type", structs.PreparedQueryCreate, structs.PreparedQuery{Template: structs.QueryTemplateOptions{Type: "other"}, Service: structs.ServiceQuery{Service: "web"}}, "Bad Template: Bad Type 'other'"},
		{"bad regexp", structs.PreparedQueryCreate, structs.PreparedQuery{Template: structs.QueryTemplateOptions{Type: "name_prefix_match", Regexp: "("}, Service: structs.ServiceQuery{Service: "web"}}, "Bad Template: Bad Regexp"},
		{"bad interpolation", structs.PreparedQueryCreate, structs.PreparedQuery{Template: structs.QueryTemplateOptions{Type: "name_prefix_match"}, Service: structs.ServiceQuery{Service: "${nope}"}}, "Bad Template: unknown variable accessed: nope"},
		{"bad TTL", structs.PreparedQueryCreate, structs.PreparedQuery{Service: structs.ServiceQuery{Service: "web"}, DNS: structs.QueryDNSOptions{TTL: "x"}}, "Bad DNS TTL 'x'"},
		{"update missing", structs.PreparedQueryUpdate, structs.PreparedQuery{ID: "00000000-0000-0000-0000-000000000000", Service: structs.ServiceQuery{Service: "web"}}, "Cannot modify non-existent prepared query"},
		{"delete missing", structs.PreparedQueryDelete, structs.PreparedQuery{ID: "00000000-0000-0000-0000-000000000000"}, "Cannot delete non-existent prepared query"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var out string
			err := structs.MethodPreparedQueryApply.Call(context.Background(), s, &structs.PreparedQueryRequest{Op: tt.op, Query: &tt.q}, &out)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	var got structs.IndexedPreparedQueries
	rpc(t, s, structs.MethodPreparedQueryApply, &structs.PreparedQueryRequest{Op: structs.PreparedQueryUpdate,
		Query: &structs.PreparedQuery{ID: id, Name: "web2", Service: structs.ServiceQuery{Service: "web"}}}, new(string))
	rpc(t, s, structs.MethodPreparedQueryGet, &structs.PreparedQuerySpecificRequest{QueryID: id}, &got)
	if len(got.Queries) != 1 || got.Queries[0].Name != "web2" {
		t.Fatalf("after update = %+v", got.Queries)
	}
	rpc(t, s, structs.MethodPreparedQueryApply, &structs.PreparedQueryRequest{Op: structs.PreparedQueryDelete, Query: &structs.PreparedQuery{ID: id}}, new(string))
	rpc(t, s, structs.MethodPreparedQueryList, &structs.DCSpecificRequest{}, &got)
	if len(got.Queries) != 0 {
		t.Fatalf("after delete = %+v", got.Queries)
	}
	err := structs.MethodPreparedQueryGet.Call(context.Background(), s, &structs.PreparedQuerySpecificRequest{QueryID: id}, &got)
	if !errors.Is(err, structs.ErrQueryNotFound) {
		t.Fatalf("get deleted = %v", err)
	}
}
