package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
)

// TestConsulClientPreparedQuery: the official client's PreparedQuery()
// calls against a real server: create, list, get, update, execute (by ID,
// name and template), explain and delete.
func TestConsulClientPreparedQuery(t *testing.T) {
	c, _, _ := startRealServerURL(t)
	for _, n := range []struct{ node, status string }{{"n1", api.HealthPassing}, {"n2", api.HealthWarning}, {"n3", api.HealthCritical}} {
		_, err := c.Catalog().Register(&api.CatalogRegistration{Node: n.node, Address: "10.0.0.1",
			Service: &api.AgentService{ID: "web", Service: "web", Tags: []string{"v1"}, Port: 80},
			Check:   &api.AgentCheck{Node: n.node, CheckID: "web-check", Name: "web", Status: n.status, ServiceID: "web"}}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	pq := c.PreparedQuery()
	id, _, err := pq.Create(&api.PreparedQueryDefinition{Name: "web", Service: api.ServiceQuery{Service: "web", Tags: []string{"v1"}}, DNS: api.QueryDNSOptions{TTL: "10s"}}, nil)
	if err != nil || id == "" {
		t.Fatalf("create: %q %v", id, err)
	}
	tmplID, _, err := pq.Create(&api.PreparedQueryDefinition{Name: "svc-", Template: api.QueryTemplate{Type: "name_prefix_match"},
		Service: api.ServiceQuery{Service: "${name.suffix}", OnlyPassing: true}}, nil)
	if err != nil {
		t.Fatalf("create template: %v", err)
	}
	list, _, err := pq.List(nil)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	got, _, err := pq.Get(id, nil)
	if err != nil || len(got) != 1 || got[0].Name != "web" || got[0].DNS.TTL != "10s" {
		t.Fatalf("get: %+v %v", got, err)
	}
	upd := got[0]
	upd.Service.OnlyPassing = false
	upd.Service.Tags = nil
	if _, err := pq.Update(upd, nil); err != nil {
		t.Fatalf("update: %v", err)
	}
	for _, tt := range []struct {
		name  string
		nodes int
	}{{id, 2}, {"web", 2}, {"svc-web", 1}} {
		res, _, err := pq.Execute(tt.name, nil)
		if err != nil || len(res.Nodes) != tt.nodes || res.Service != "web" || res.Datacenter != testDC || res.Failovers != 0 {
			t.Fatalf("execute %s: %+v %v", tt.name, res, err)
		}
	}
	if res, _, err := pq.Execute("web", nil); err != nil || res.DNS.TTL != "10s" {
		t.Fatalf("execute DNS: %+v %v", res, err)
	}
	// The client has no Explain; its raw reader decodes Consul's answer.
	var ex struct{ Query api.PreparedQueryDefinition }
	_, err = c.Raw().Query("/v1/query/svc-web/explain", &ex, nil)
	if err != nil || ex.Query.ID != tmplID || ex.Query.Service.Service != "web" {
		t.Fatalf("explain: %+v %v", ex, err)
	}
	if _, err := pq.Delete(id, nil); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, _, err := pq.Get(id, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("get deleted: %v", err)
	}
}

// TestPreparedQueryStatuses: Consul's statuses and texts for bad input and
// missing queries; nothing is stored by a refused write.
func TestPreparedQueryStatuses(t *testing.T) {
	c, base, _ := startRealServerURL(t)
	if _, _, err := c.PreparedQuery().Create(&api.PreparedQueryDefinition{Name: "taken", Service: api.ServiceQuery{Service: "web"}}, nil); err != nil {
		t.Fatal(err)
	}
	missing := "00000000-0000-0000-0000-000000000001"
	tests := []struct {
		method, path, body string
		code               int
		text               string
	}{
		{"POST", "/v1/query", `{"Name":"x"}`, 500, "Must provide a Service name to query"},
		{"POST", "/v1/query", `{"Name":"TAKEN","Service":{"Service":"web"}}`, 500, "name 'TAKEN' aliases an existing query name"},
		{"POST", "/v1/query", `{"Session":"nope","Service":{"Service":"web"}}`, 500, `invalid session "nope"`},
		{"POST", "/v1/query", `{"Template":{"Type":"bogus"},"Service":{"Service":"web"}}`, 500, "Bad Template: Bad Type 'bogus'"},
		{"POST", "/v1/query", `{"Template":{"Type":"name_prefix_match","Regexp":"("},"Service":{"Service":"web"}}`, 500, "Bad Template: Bad Regexp"},
		{"POST", "/v1/query", `{"Name":`, 400, "Request decode failed"},
		{"PUT", "/v1/query", `{}`, 405, ""},
		{"GET", "/v1/query/" + missing, "", 404, "Query not found"},
		{"GET", "/v1/query/nope/execute", "", 404, "Query not found"},
		{"GET", "/v1/query/nope/explain", "", 404, "Query not found"},
		{"GET", "/v1/query/taken/execute?limit=x", "", 400, "Bad limit"},
		{"GET", "/v1/query/taken/execute?connect=x", "", 400, "Bad connect"},
		{"GET", "/v1/query/taken/execute?connect=true", "", 200, `"Service":"web"`},
		{"PUT", "/v1/query/" + missing, `{"Service":{"Service":"web"}}`, 500, "Cannot modify non-existent prepared query"},
		{"DELETE", "/v1/query/" + missing, "", 500, "Cannot delete non-existent prepared query"},
		{"PUT", "/v1/query/taken/execute", "", 405, ""},
		{"GET", "/v1/query", "", 200, `"Name":"taken"`},
		{"GET", "/v1/query/taken/execute", "", 200, `"Nodes":[]`},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, base+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.text) {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, body, tt.code, tt.text)
			}
		})
	}
	if list, _, err := c.PreparedQuery().List(nil); err != nil || len(list) != 1 {
		t.Fatalf("refused writes stored something: %+v %v", list, err)
	}
}
