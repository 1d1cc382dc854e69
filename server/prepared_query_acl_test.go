package server

import (
	"slices"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// TestPreparedQueryExecuteWithQueryToken: a query's stored Token, when
// set, is the token its executions filter with, whatever the caller's
// (Consul: "used each time the query is executed"); without one the
// caller's decides. Explain and Get show the Token as "<hidden>" to
// callers that may not write ACLs.
func TestPreparedQueryExecuteWithQueryToken(t *testing.T) {
	s, root, toks := aclTestServer(t, map[string]string{
		"web":     `service "web" { policy = "read" }` + "\n" + `node_prefix "" { policy = "read" }`,
		"nothing": `key "x" { policy = "read" }`,
		"qread":   `query_prefix "" { policy = "read" }`,
	})
	mgmt := structs.WriteRequest{Token: root}
	rpc(t, s, structs.MethodCatalogRegister, &structs.RegisterRequest{
		Node: "n1", Address: "10.1.0.1", Service: &structs.NodeService{ID: "web", Service: "web", Port: 80}, WriteRequest: mgmt,
	}, &struct{}{})
	for _, q := range []structs.PreparedQuery{
		{Name: "web-tok", Token: toks["web"].SecretID, Service: structs.ServiceQuery{Service: "web"}},
		{Name: "web-notok", Service: structs.ServiceQuery{Service: "web"}},
		{Name: "web-weak", Token: toks["nothing"].SecretID, Service: structs.ServiceQuery{Service: "web"}},
	} {
		var id string
		rpc(t, s, structs.MethodPreparedQueryApply, &structs.PreparedQueryRequest{Op: structs.PreparedQueryCreate, Query: &q, WriteRequest: mgmt}, &id)
	}
	for _, tc := range []struct {
		name, caller, query string
		want                []string
	}{
		{"query's token reads for a weak caller", toks["nothing"].SecretID, "web-tok", []string{"n1"}},
		{"no query token: the caller's", toks["nothing"].SecretID, "web-notok", nil},
		{"no query token: management", root, "web-notok", []string{"n1"}},
		{"query's weak token binds management", root, "web-weak", nil},
		{"anonymous caller, query's token", "", "web-tok", []string{"n1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out structs.PreparedQueryExecuteResponse
			rpc(t, s, structs.MethodPreparedQueryExecute, &structs.PreparedQueryExecuteRequest{QueryIDOrName: tc.query, QueryOptions: structs.QueryOptions{Token: tc.caller}}, &out)
			var got []string
			for _, n := range out.Nodes {
				got = append(got, n.Node.Node)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("nodes %v, want %v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, caller, want string
	}{
		{"query:read sees it hidden", toks["qread"].SecretID, "<hidden>"},
		{"acl:write sees it", root, toks["web"].SecretID},
	} {
		t.Run("explain and get: "+tc.name, func(t *testing.T) {
			q := structs.QueryOptions{Token: tc.caller}
			var explain structs.PreparedQueryExplainResponse
			rpc(t, s, structs.MethodPreparedQueryExplain, &structs.PreparedQueryExecuteRequest{QueryIDOrName: "web-tok", QueryOptions: q}, &explain)
			if explain.Query.Token != tc.want {
				t.Fatalf("explain Token %q, want %q", explain.Query.Token, tc.want)
			}
			var got structs.IndexedPreparedQueries
			rpc(t, s, structs.MethodPreparedQueryGet, &structs.PreparedQuerySpecificRequest{QueryID: explain.Query.ID, QueryOptions: q}, &got)
			if len(got.Queries) != 1 || got.Queries[0].Token != tc.want {
				t.Fatalf("get %+v, want Token %q", got.Queries, tc.want)
			}
		})
	}
	// The store keeps the token: redaction is of replies only.
	_, stored, err := s.fsm.State().PreparedQueryResolve(nil, "web-tok", "")
	if err != nil || stored == nil || stored.Token != toks["web"].SecretID {
		t.Fatalf("stored query %+v, %v", stored, err)
	}
}
