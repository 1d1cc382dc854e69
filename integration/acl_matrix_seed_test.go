package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// The objects seedMatrix writes with the management token, which the
// table's lists must show or hide.
const (
	seedAppNode = "app-node" // catalog node with service app-web
	seedDBNode  = "db-node"  // catalog node with service db
)

// seedMatrix writes, with the management token, what the lists of the
// table show: KV keys under app/ and other/, catalog nodes with an app and
// a db service, agent services with TTL checks, sessions on the client
// and on a server, events, prepared queries, config entries and
// intentions, one of each inside and one outside the write token's
// prefixes.
func (f *aclFixture) seedMatrix(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	puts := []struct{ path, body string }{
		{"/v1/kv/app/a", "1"},
		{"/v1/kv/other/b", "2"},
		{"/v1/catalog/register", `{"Node":"app-node","Address":"10.0.0.1","Service":{"Service":"app-web","Port":80},
			"Check":{"CheckID":"app-web-check","Name":"app-web","ServiceID":"app-web","Status":"passing"}}`},
		{"/v1/catalog/register", `{"Node":"db-node","Address":"10.0.0.2","Service":{"Service":"db","Port":5432},
			"Check":{"CheckID":"db-check","Name":"db","ServiceID":"db","Status":"passing"}}`},
		{"/v1/agent/service/register", `{"Name":"app-api","Port":8080,"Check":{"TTL":"10m"}}`},
		{"/v1/agent/service/register", `{"Name":"db-agent","Port":5433,"Check":{"TTL":"10m"}}`},
		{"/v1/session/create", `{"Name":"s-client"}`},
		{"/v1/event/fire/app-deploy", ""},
		{"/v1/event/fire/other-deploy", ""},
		{"/v1/config", `{"Kind":"service-defaults","Name":"app-web","Protocol":"http"}`},
		{"/v1/config", `{"Kind":"service-defaults","Name":"db","Protocol":"tcp"}`},
		{"/v1/config", `{"Kind":"proxy-defaults","Name":"global","Meta":{"by":"seed"}}`},
		{"/v1/connect/intentions/exact?source=web&destination=app-web", `{"Action":"allow"}`},
		{"/v1/connect/intentions/exact?source=web&destination=db", `{"Action":"allow"}`},
	}
	for _, p := range puts {
		if _, err := f.mgmtDo(ctx, 200, "PUT", p.path, p.body); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	b, err := f.mgmtDo(ctx, 200, "PUT", "/v1/session/create", `{"Name":"s-server","Node":"server-0"}`)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	var sess struct{ ID string }
	if err := json.Unmarshal(b, &sess); err != nil {
		t.Fatal(err)
	}
	f.serverSession = sess.ID
	for _, q := range []string{`{"Name":"app-q","Service":{"Service":"app-web"}}`, `{"Name":"db-q","Service":{"Service":"db"}}`} {
		if _, err := f.mgmtDo(ctx, 200, "POST", "/v1/query", q); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	// The agent's services reach the catalog by anti-entropy, and the
	// events the client's own list by gossip.
	eventually(t, 30*time.Second, "agent services in the catalog", func() error {
		return f.mgmtHas(ctx, "/v1/catalog/services", mapKeys, "app-api", "db-agent")
	})
	eventually(t, 30*time.Second, "events in the client's list", func() error {
		return f.mgmtHas(ctx, "/v1/event/list", sortedJSON(func(e struct{ Name string }) string { return e.Name }), "app-deploy", "other-deploy")
	})
}

// mgmtHas is nil when the management token's list at path has every name.
func (f *aclFixture) mgmtHas(ctx context.Context, path string, list func([]byte) ([]string, error), names ...string) error {
	return f.mgmtList(ctx, path, list, names, true)
}

// mgmtLacks is nil when the management token's list at path has none of
// names.
func (f *aclFixture) mgmtLacks(ctx context.Context, path string, list func([]byte) ([]string, error), names ...string) error {
	return f.mgmtList(ctx, path, list, names, false)
}

func (f *aclFixture) mgmtList(ctx context.Context, path string, list func([]byte) ([]string, error), names []string, want bool) error {
	b, err := f.mgmtDo(ctx, 200, "GET", path, "")
	if err != nil {
		return err
	}
	got, err := list(b)
	if err != nil {
		return err
	}
	for _, n := range names {
		if slices.Contains(got, n) != want {
			return fmt.Errorf("%s lists %q: has %q is %v, want %v", path, got, n, !want, want)
		}
	}
	return nil
}

// mgmtStatus is nil when GET path with the management token answers want.
func (f *aclFixture) mgmtStatus(ctx context.Context, path string, want int) error {
	_, err := f.mgmtDo(ctx, want, "GET", path, "")
	return err
}

// Decoders of the lists the table compares.
var (
	listKeys    = sortedJSON(func(e struct{ Key string }) string { return e.Key })
	listNodes   = sortedJSON(func(e struct{ Node string }) string { return e.Node })
	listNames   = sortedJSON(func(e struct{ Name string }) string { return e.Name })
	listHealth  = sortedJSON(func(e struct{ Node struct{ Node string } }) string { return e.Node.Node })
	listChecks  = sortedJSON(func(e struct{ Node, CheckID string }) string { return e.Node + "/" + e.CheckID })
	listIntents = sortedJSON(func(e struct{ SourceName, DestinationName string }) string {
		return e.SourceName + "->" + e.DestinationName
	})
	listSessions = listNames
)

// listExecute lists the nodes of a prepared query's answer.
func listExecute(b []byte) ([]string, error) {
	var r struct{ Nodes json.RawMessage }
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode %q: %w", b, err)
	}
	return listHealth(r.Nodes)
}

// listTokens lists a token list's AccessorIDs, each with "hidden" or
// "shown" for its SecretID: a token that may only read ACLs sees no
// secret.
func listTokens(b []byte) ([]string, error) {
	return sortedJSON(func(e struct{ AccessorID, SecretID string }) string {
		if e.SecretID == "<hidden>" {
			return e.AccessorID + " hidden"
		}
		return e.AccessorID + " shown"
	})(b)
}
