package acl

import (
	"fmt"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// check is one question and its expected answer.
type check struct {
	method  string
	segment string
	want    Decision
}

// ask calls the Authorizer method a check names.
func ask(t *testing.T, a *Authorizer, c check) Decision {
	t.Helper()
	seg := map[string]func(string) Decision{
		"AgentRead": a.AgentRead, "AgentWrite": a.AgentWrite,
		"EventRead": a.EventRead, "EventWrite": a.EventWrite,
		"IdentityRead": a.IdentityRead, "IdentityWrite": a.IdentityWrite,
		"IntentionRead": a.IntentionRead, "IntentionWrite": a.IntentionWrite,
		"KeyRead": a.KeyRead, "KeyList": a.KeyList, "KeyWrite": a.KeyWrite, "KeyWritePrefix": a.KeyWritePrefix,
		"NodeRead": a.NodeRead, "NodeWrite": a.NodeWrite,
		"QueryRead": a.QueryRead, "QueryWrite": a.QueryWrite,
		"ServiceRead": a.ServiceRead, "ServiceWrite": a.ServiceWrite,
		"SessionRead": a.SessionRead, "SessionWrite": a.SessionWrite,
	}
	global := map[string]func() Decision{
		"ACLRead": a.ACLRead, "ACLWrite": a.ACLWrite, "Snapshot": a.Snapshot,
		"IdentityReadAll": a.IdentityReadAll, "IdentityWriteAny": a.IdentityWriteAny,
		"IntentionDefaultAllow": a.IntentionDefaultAllow,
		"KeyringRead":           a.KeyringRead, "KeyringWrite": a.KeyringWrite,
		"MeshRead": a.MeshRead, "MeshWrite": a.MeshWrite,
		"NodeReadAll":  a.NodeReadAll,
		"OperatorRead": a.OperatorRead, "OperatorWrite": a.OperatorWrite,
		"PeeringRead": a.PeeringRead, "PeeringWrite": a.PeeringWrite,
		"ServiceReadAll": a.ServiceReadAll, "ServiceWriteAny": a.ServiceWriteAny,
	}
	if f, ok := seg[c.method]; ok {
		return f(c.segment)
	}
	if f, ok := global[c.method]; ok {
		return f()
	}
	t.Fatalf("no method %s", c.method)
	return Deny
}

func mustParse(t *testing.T, texts ...string) []*Rules {
	t.Helper()
	var out []*Rules
	for _, s := range texts {
		r, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		out = append(out, r)
	}
	return out
}

// TestAuthorizer runs the precedence rules of Consul's rules reference:
// exact over prefix, the longest prefix, deny over write over list over
// read across policies, write implying read (and list for keys), the
// fallbacks of mesh and peering to operator and of intentions to the
// service rule, and the default policy under it all.
func TestAuthorizer(t *testing.T) {
	cases := []struct {
		name     string
		policies []string
		def      string
		checks   []check
	}{
		{
			name: "rules reference key example",
			policies: []string{`
key_prefix "" { policy = "read" }
key_prefix "foo/" { policy = "write" }
key_prefix "foo/private/" { policy = "deny" }
key "foo/bar/secret" { policy = "deny" }
operator = "read"`},
			def: "deny",
			checks: []check{
				{"KeyRead", "anything", Allow},
				{"KeyWrite", "anything", Deny},
				{"KeyWrite", "foo/x", Allow},
				{"KeyRead", "foo/x", Allow},
				{"KeyRead", "foo/private/x", Deny},
				{"KeyWrite", "foo/private/x", Deny},
				{"KeyRead", "foo/bar/secret", Deny},
				{"KeyRead", "foo/bar/secret2", Allow},
				{"KeyWrite", "foo/bar/secret2", Allow},
				{"KeyList", "anything", Deny},
				{"KeyList", "foo/", Allow},
				{"KeyWritePrefix", "foo/", Deny},
				{"KeyWritePrefix", "foo/public/", Allow},
				{"KeyWritePrefix", "", Deny},
				{"OperatorRead", "", Allow},
				{"OperatorWrite", "", Deny},
			},
		},
		{
			name:     "exact beats prefix, even a deny prefix",
			policies: []string{`key_prefix "app/" { policy = "deny" } key "app/config" { policy = "read" }`},
			def:      "allow",
			checks: []check{
				{"KeyRead", "app/config", Allow},
				{"KeyWrite", "app/config", Deny},
				{"KeyRead", "app/other", Deny},
				{"KeyRead", "other", Allow},
			},
		},
		{
			name:     "longest prefix wins",
			policies: []string{`service_prefix "" { policy = "deny" } service_prefix "api" { policy = "read" } service_prefix "api-admin" { policy = "deny" } service_prefix "api-admin-ro" { policy = "write" }`},
			def:      "allow",
			checks: []check{
				{"ServiceRead", "web", Deny},
				{"ServiceRead", "api", Allow},
				{"ServiceRead", "api-public", Allow},
				{"ServiceWrite", "api-public", Deny},
				{"ServiceRead", "api-admin", Deny},
				{"ServiceRead", "api-admin-x", Deny},
				{"ServiceWrite", "api-admin-ro", Allow},
			},
		},
		{
			name: "deny beats write beats read across policies at one segment",
			policies: []string{
				`key "a" { policy = "read" } key "b" { policy = "write" } key_prefix "c/" { policy = "read" } node "n" { policy = "write" }`,
				`key "a" { policy = "write" } key "b" { policy = "deny" } key_prefix "c/" { policy = "list" } node "n" { policy = "read" }`,
			},
			def: "allow",
			checks: []check{
				{"KeyWrite", "a", Allow},
				{"KeyRead", "b", Deny},
				{"KeyList", "c/", Allow},
				{"KeyRead", "c/x", Allow},
				{"KeyWrite", "c/x", Deny},
				{"NodeWrite", "n", Allow},
			},
		},
		{
			name:     "write implies read and list",
			policies: []string{`key_prefix "w/" { policy = "write" } agent "a" { policy = "write" } event "e" { policy = "write" } query "q" { policy = "write" } session "s" { policy = "write" } identity "i" { policy = "write" }`},
			def:      "deny",
			checks: []check{
				{"KeyRead", "w/x", Allow}, {"KeyList", "w/", Allow}, {"KeyWrite", "w/x", Allow},
				{"AgentRead", "a", Allow}, {"AgentWrite", "a", Allow}, {"AgentRead", "b", Deny},
				{"EventRead", "e", Allow}, {"EventWrite", "e", Allow},
				{"QueryRead", "q", Allow}, {"QueryWrite", "q", Allow},
				{"SessionRead", "s", Allow}, {"SessionWrite", "s", Allow}, {"SessionRead", "t", Deny},
				{"IdentityRead", "i", Allow}, {"IdentityWrite", "i", Allow}, {"IdentityWriteAny", "", Allow},
			},
		},
		{
			name:     "list grants list and read, not write",
			policies: []string{`key_prefix "l/" { policy = "list" }`},
			def:      "deny",
			checks:   []check{{"KeyList", "l/", Allow}, {"KeyRead", "l/x", Allow}, {"KeyWrite", "l/x", Deny}},
		},
		{
			name:     "read does not grant list",
			policies: []string{`key_prefix "r/" { policy = "read" }`},
			def:      "allow",
			checks:   []check{{"KeyList", "r/", Deny}, {"KeyRead", "r/x", Allow}, {"KeyList", "other/", Allow}},
		},
		{
			name:     "default allow fills the gaps but never grants acl",
			policies: []string{`key "secret" { policy = "deny" }`},
			def:      "allow",
			checks: []check{
				{"KeyRead", "secret", Deny}, {"KeyRead", "public", Allow}, {"ServiceWrite", "web", Allow},
				{"OperatorWrite", "", Allow}, {"ACLRead", "", Deny}, {"ACLWrite", "", Deny}, {"Snapshot", "", Deny},
				{"IntentionDefaultAllow", "", Allow},
			},
		},
		{
			name:     "default deny",
			policies: []string{`key "public" { policy = "read" }`},
			def:      "deny",
			checks: []check{
				{"KeyRead", "public", Allow}, {"KeyRead", "other", Deny}, {"ServiceRead", "web", Deny},
				{"NodeRead", "n", Deny}, {"KeyringRead", "", Deny}, {"MeshRead", "", Deny}, {"PeeringRead", "", Deny},
				{"IntentionDefaultAllow", "", Deny}, {"ServiceReadAll", "", Deny}, {"NodeReadAll", "", Deny},
			},
		},
		{
			name:     "acl rule",
			policies: []string{`acl = "read"`},
			def:      "deny",
			checks:   []check{{"ACLRead", "", Allow}, {"ACLWrite", "", Deny}, {"Snapshot", "", Deny}},
		},
		{
			name:     "keyring rule",
			policies: []string{`keyring = "write"`},
			def:      "deny",
			checks:   []check{{"KeyringRead", "", Allow}, {"KeyringWrite", "", Allow}},
		},
		{
			name:     "mesh and peering fall back to operator",
			policies: []string{`operator = "write"`},
			def:      "deny",
			checks: []check{
				{"MeshRead", "", Allow}, {"MeshWrite", "", Allow}, {"PeeringRead", "", Allow}, {"PeeringWrite", "", Allow},
			},
		},
		{
			name:     "own mesh and peering rules beat operator",
			policies: []string{`operator = "write" mesh = "read" peering = "deny"`},
			def:      "allow",
			checks: []check{
				{"MeshRead", "", Allow}, {"MeshWrite", "", Deny}, {"PeeringRead", "", Deny}, {"OperatorWrite", "", Allow},
			},
		},
		{
			name:     "operator read gives mesh read only",
			policies: []string{`operator = "read"`},
			def:      "allow",
			checks:   []check{{"MeshRead", "", Allow}, {"MeshWrite", "", Deny}, {"PeeringWrite", "", Deny}},
		},
		{
			name: "intentions follow the service rule unless set",
			policies: []string{`
service "web" { policy = "write" }
service "db" { policy = "read" intentions = "write" }
service "secret" { policy = "deny" }
service "ro" { policy = "write" intentions = "deny" }
service_prefix "api-" { policy = "read" }`},
			def: "allow",
			checks: []check{
				{"IntentionRead", "web", Allow}, {"IntentionWrite", "web", Deny},
				{"IntentionRead", "db", Allow}, {"IntentionWrite", "db", Allow},
				{"IntentionRead", "secret", Deny},
				{"IntentionRead", "ro", Deny},
				{"IntentionRead", "api-x", Allow}, {"IntentionWrite", "api-x", Deny},
				{"IntentionWrite", "other", Allow},
				{"IntentionWrite", "*", Deny},
				{"IntentionRead", "*", Allow},
			},
		},
		{
			name: "explicit intentions merge across policies",
			policies: []string{
				`service "web" { policy = "deny" }`,
				`service "web" { policy = "read" intentions = "write" }`,
			},
			def:    "deny",
			checks: []check{{"ServiceRead", "web", Deny}, {"IntentionWrite", "web", Allow}},
		},
		{
			name:     "wildcard intention write needs every service",
			policies: []string{`service_prefix "" { policy = "read" intentions = "write" }`},
			def:      "deny",
			checks:   []check{{"IntentionWrite", "*", Allow}, {"IntentionWrite", "x", Allow}},
		},
		{
			name:     "read all needs the catch-all and no denial",
			policies: []string{`service_prefix "" { policy = "read" } node_prefix "" { policy = "read" } node "hidden" { policy = "deny" }`},
			def:      "deny",
			checks: []check{
				{"ServiceReadAll", "", Allow}, {"NodeReadAll", "", Deny}, {"NodeRead", "visible", Allow},
			},
		},
		{
			name:     "read all without a catch-all is the default's",
			policies: []string{`service "web" { policy = "read" }`},
			def:      "allow",
			checks:   []check{{"ServiceReadAll", "", Allow}, {"ServiceWriteAny", "", Allow}},
		},
		{
			name:     "write any",
			policies: []string{`service_prefix "" { policy = "deny" } service "web" { policy = "write" }`},
			def:      "deny",
			checks:   []check{{"ServiceWriteAny", "", Allow}, {"ServiceReadAll", "", Deny}, {"ServiceRead", "web", Allow}},
		},
		{
			name:     "write any denied by a catch-all deny",
			policies: []string{`service_prefix "" { policy = "deny" } service "web" { policy = "read" }`},
			def:      "allow",
			checks:   []check{{"ServiceWriteAny", "", Deny}, {"IdentityWriteAny", "", Allow}, {"IdentityReadAll", "", Allow}},
		},
		{
			name:     "write prefix needs write on every rule below",
			policies: []string{`key_prefix "a/" { policy = "write" } key "a/b/locked" { policy = "read" }`},
			def:      "allow",
			checks: []check{
				{"KeyWritePrefix", "a/", Deny}, {"KeyWritePrefix", "a/c/", Allow}, {"KeyWritePrefix", "a/b/", Deny},
				{"KeyWritePrefix", "z/", Allow}, {"KeyWritePrefix", "", Deny},
			},
		},
		{
			name:     "write prefix with no rule is the default's",
			policies: []string{`key "x" { policy = "write" }`},
			def:      "deny",
			checks:   []check{{"KeyWritePrefix", "y/", Deny}, {"KeyWritePrefix", "x", Deny}},
		},
		{
			name:     "global-management",
			policies: []string{structs.ACLPolicyGlobalManagementRules},
			def:      "deny",
			checks: []check{
				{"ACLWrite", "", Allow}, {"Snapshot", "", Allow}, {"AgentWrite", "n", Allow}, {"EventWrite", "e", Allow},
				{"IdentityWrite", "i", Allow}, {"KeyWrite", "k", Allow}, {"KeyWritePrefix", "", Allow}, {"KeyList", "", Allow},
				{"KeyringWrite", "", Allow}, {"NodeWrite", "n", Allow}, {"NodeReadAll", "", Allow},
				{"OperatorWrite", "", Allow}, {"MeshWrite", "", Allow}, {"PeeringWrite", "", Allow},
				{"QueryWrite", "q", Allow}, {"ServiceWrite", "s", Allow}, {"ServiceReadAll", "", Allow},
				{"IntentionWrite", "s", Allow}, {"IntentionWrite", "*", Allow}, {"SessionWrite", "n", Allow},
				{"IntentionDefaultAllow", "", Deny},
			},
		},
		{
			name:     "global-read-only",
			policies: []string{structs.ACLPolicyGlobalReadOnlyRules},
			def:      "deny",
			checks: []check{
				{"ACLRead", "", Allow}, {"ACLWrite", "", Deny}, {"AgentRead", "n", Allow}, {"AgentWrite", "n", Deny},
				{"KeyRead", "k", Allow}, {"KeyWrite", "k", Deny}, {"KeyringRead", "", Allow}, {"NodeReadAll", "", Allow},
				{"OperatorRead", "", Allow}, {"MeshRead", "", Allow}, {"PeeringRead", "", Allow}, {"QueryRead", "q", Allow},
				{"ServiceReadAll", "", Allow}, {"ServiceWrite", "s", Deny}, {"IntentionRead", "s", Allow},
				{"IntentionWrite", "s", Deny}, {"SessionRead", "n", Allow}, {"EventRead", "e", Allow},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			def, err := DefaultPolicy(tc.def)
			if err != nil {
				t.Fatal(err)
			}
			a := NewPolicyAuthorizer("acc", def, mustParse(t, tc.policies...)...)
			for _, c := range tc.checks {
				if got := ask(t, a, c); got != c.want {
					t.Errorf("%s(%q) = %s, want %s", c.method, c.segment, got, c.want)
				}
			}
		})
	}
}

// TestStaticAuthorizers checks the three policies without rules.
func TestStaticAuthorizers(t *testing.T) {
	methods := []string{"ACLRead", "ACLWrite", "Snapshot", "AgentRead", "AgentWrite", "EventRead", "EventWrite",
		"IdentityRead", "IdentityWrite", "IdentityReadAll", "IdentityWriteAny", "IntentionRead", "IntentionWrite",
		"IntentionDefaultAllow", "KeyRead", "KeyList", "KeyWrite", "KeyWritePrefix", "KeyringRead", "KeyringWrite",
		"MeshRead", "MeshWrite", "NodeRead", "NodeReadAll", "NodeWrite", "OperatorRead", "OperatorWrite",
		"PeeringRead", "PeeringWrite", "QueryRead", "QueryWrite", "ServiceRead", "ServiceReadAll", "ServiceWrite",
		"ServiceWriteAny", "SessionRead", "SessionWrite"}
	isACL := map[string]bool{"ACLRead": true, "ACLWrite": true, "Snapshot": true}
	for _, tc := range []struct {
		name      string
		a         *Authorizer
		want, acl Decision
	}{
		{"allow", AllowAll(), Allow, Deny},
		{"deny", DenyAll(), Deny, Deny},
		{"manage", ManageAll(), Allow, Allow},
		{"no rules over deny", NewPolicyAuthorizer("x", DenyAll()), Deny, Deny},
		{"no rules over allow", NewPolicyAuthorizer("x", AllowAll()), Allow, Deny},
	} {
		for _, m := range methods {
			want := tc.want
			if isACL[m] {
				want = tc.acl
			}
			if got := ask(t, tc.a, check{method: m, segment: "x"}); got != want {
				t.Errorf("%s: %s = %s, want %s", tc.name, m, got, want)
			}
		}
	}
	if _, err := DefaultPolicy("manage"); err == nil {
		t.Error(`DefaultPolicy("manage") accepted`)
	}
}

func ExampleNewPolicyAuthorizer() {
	rules, _ := Parse(`key_prefix "app/" { policy = "write" }`)
	authz := NewPolicyAuthorizer("6a1253d2-1785-24fd-91c2-f8e78c745511", DenyAll(), rules)
	fmt.Println(authz.KeyWrite("app/config"), authz.KeyWrite("other"))
	fmt.Println(authz.Denied(ResourceKey, AccessWrite, "other"))
	// Output:
	// allow deny
	// Permission denied: token with AccessorID '6a1253d2-1785-24fd-91c2-f8e78c745511' lacks permission 'key:write' on "other"
}
