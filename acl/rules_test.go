package acl

import (
	"reflect"
	"strings"
	"testing"
)

// TestParse reads each resource of the language in HCL and in JSON, with
// the examples of Consul's rules reference.
func TestParse(t *testing.T) {
	cases := []struct {
		name string
		hcl  string
		json string
		want *Rules
	}{
		{"empty", ``, `{}`, &Rules{}},
		{"acl", `acl = "write"`, `{"acl": "write"}`, &Rules{ACL: AccessWrite}},
		{"keyring", `keyring = "read"`, `{"keyring": "read"}`, &Rules{Keyring: AccessRead}},
		{"operator", `operator = "deny"`, `{"operator": "deny"}`, &Rules{Operator: AccessDeny}},
		{"mesh", `mesh = "write"`, `{"mesh": "write"}`, &Rules{Mesh: AccessWrite}},
		{"peering", `peering = "read"`, `{"peering": "read"}`, &Rules{Peering: AccessRead}},
		{"empty single means no rule", `operator = ""`, `{"operator": ""}`, &Rules{}},
		{"case-insensitive", `acl = "WRITE"`, `{"acl": "Write"}`, &Rules{ACL: AccessWrite}},
		{"agent",
			`agent "node1" { policy = "read" }
agent_prefix "" { policy = "write" }`,
			`{"agent": {"node1": {"policy": "read"}}, "agent_prefix": {"": {"policy": "write"}}}`,
			&Rules{Agents: []Rule{{Segment: "node1", Access: AccessRead}, {Segment: "", Prefix: true, Access: AccessWrite}}}},
		{"event",
			`event "deploy" { policy = "write" }
event_prefix "" { policy = "read" }`,
			`{"event": {"deploy": {"policy": "write"}}, "event_prefix": {"": {"policy": "read"}}}`,
			&Rules{Events: []Rule{{Segment: "deploy", Access: AccessWrite}, {Prefix: true, Access: AccessRead}}}},
		{"identity",
			`identity "web" { policy = "write" intentions = "read" }
identity_prefix "" { policy = "read" }`,
			`{"identity": {"web": {"policy": "write", "intentions": "read"}}, "identity_prefix": {"": {"policy": "read"}}}`,
			&Rules{Identities: []Rule{{Segment: "web", Access: AccessWrite, Intentions: AccessRead}, {Prefix: true, Access: AccessRead}}}},
		{"key with list",
			`key_prefix "" { policy = "read" }
key_prefix "foo/" { policy = "write" }
key_prefix "foo/private/" { policy = "deny" }
key "foo/bar/secret" { policy = "deny" }
key_prefix "list/" { policy = "list" }`,
			`{"key_prefix": {"": {"policy": "read"}, "foo/": {"policy": "write"}, "foo/private/": {"policy": "deny"}, "list/": {"policy": "list"}},
 "key": {"foo/bar/secret": {"policy": "deny"}}}`,
			nil},
		{"node",
			`node "app" { policy = "write" }
node_prefix "" { policy = "read" }`,
			`{"node": {"app": {"policy": "write"}}, "node_prefix": {"": {"policy": "read"}}}`,
			&Rules{Nodes: []Rule{{Segment: "app", Access: AccessWrite}, {Prefix: true, Access: AccessRead}}}},
		{"query",
			`query "foo" { policy = "write" }
query_prefix "" { policy = "read" }`,
			`{"query": {"foo": {"policy": "write"}}, "query_prefix": {"": {"policy": "read"}}}`,
			&Rules{Queries: []Rule{{Segment: "foo", Access: AccessWrite}, {Prefix: true, Access: AccessRead}}}},
		{"service with intentions",
			`service "app" { policy = "write" intentions = "write" }
service_prefix "" { policy = "read" }
service "admin" { policy = "deny" }`,
			`{"service": {"app": {"policy": "write", "intentions": "write"}, "admin": {"policy": "deny"}}, "service_prefix": {"": {"policy": "read"}}}`,
			nil},
		{"session",
			`session "admin" { policy = "deny" }
session_prefix "" { policy = "write" }`,
			`{"session": {"admin": {"policy": "deny"}}, "session_prefix": {"": {"policy": "write"}}}`,
			&Rules{Sessions: []Rule{{Segment: "admin", Access: AccessDeny}, {Prefix: true, Access: AccessWrite}}}},
		{"enterprise blocks are ignored",
			`namespace "ns" { key_prefix "" { policy = "write" } }
partition "p" { node_prefix "" { policy = "read" } }
operator = "read"`,
			`{"namespace": {"ns": {"key_prefix": {"": {"policy": "write"}}}}, "operator": "read"}`,
			&Rules{Operator: AccessRead}},
	}
	for _, tc := range cases {
		for _, form := range []struct{ name, text string }{{"hcl", tc.hcl}, {"json", tc.json}} {
			t.Run(tc.name+"/"+form.name, func(t *testing.T) {
				got, err := Parse(form.text)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if tc.want == nil {
					// The order of JSON object keys is not the document's:
					// compare the HCL result with the JSON one instead.
					want, err := Parse(tc.hcl)
					if err != nil {
						t.Fatal(err)
					}
					if !sameRules(got, want) {
						t.Errorf("got %+v, want %+v", got, want)
					}
					return
				}
				if !sameRules(got, tc.want) {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
			})
		}
	}
}

// sameRules compares documents regardless of the order of their rules.
func sameRules(a, b *Rules) bool {
	norm := func(r *Rules) Rules {
		c := *r
		for _, s := range []*[]Rule{&c.Agents, &c.Events, &c.Identities, &c.Keys, &c.Nodes, &c.Queries, &c.Services, &c.Sessions} {
			set := make(map[Rule]bool)
			for _, x := range *s {
				set[x] = true
			}
			*s = append((*s)[:0], sortedRules(set)...)
		}
		return c
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func sortedRules(set map[Rule]bool) []Rule {
	var out []Rule
	for r := range set {
		out = append(out, r)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if key(out[j]) < key(out[i]) {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func key(r Rule) string {
	p := "e"
	if r.Prefix {
		p = "p"
	}
	return p + r.Segment
}

// TestParseErrors checks that every malformed policy is refused with
// Consul's message, naming the rule and the field.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, text, want string
	}{
		{"acl", `acl = "nope"`, `Invalid acl policy: "nope"`},
		{"acl list", `acl = "list"`, `Invalid acl policy: "list"`},
		{"keyring", `keyring = "nope"`, `Invalid keyring policy: "nope"`},
		{"operator", `operator = "nope"`, `Invalid operator policy: "nope"`},
		{"mesh", `mesh = "nope"`, `Invalid mesh policy: "nope"`},
		{"peering", `{"peering": "nope"}`, `Invalid peering policy: "nope"`},
		{"agent", `agent "foo" { policy = "nope" }`, `Invalid agent policy: &acl.AgentRule{Node:"foo", Policy:"nope"}`},
		{"agent_prefix", `agent_prefix "foo" { policy = "nope" }`, `Invalid agent_prefix policy: &acl.AgentRule{Node:"foo", Policy:"nope"}`},
		{"event", `event "foo" { policy = "list" }`, `Invalid event policy: &acl.EventRule{Event:"foo", Policy:"list"}`},
		{"event_prefix", `event_prefix "" { policy = "nope" }`, `Invalid event_prefix policy: &acl.EventRule{Event:"", Policy:"nope"}`},
		{"identity", `identity "foo" { policy = "nope" }`, `Invalid identity policy: &acl.IdentityRule{Name:"foo", Policy:"nope", Intentions:"", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"identity intentions", `identity_prefix "" { policy = "read" intentions = "nope" }`, `Invalid identity_prefix intentions policy: &acl.IdentityRule{Name:"", Policy:"read", Intentions:"nope", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"key", `key "foo" { policy = "nope" }`, `Invalid key policy: &acl.KeyRule{Prefix:"foo", Policy:"nope", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"key_prefix", `{"key_prefix": {"foo/": {"policy": "nope"}}}`, `Invalid key_prefix policy: &acl.KeyRule{Prefix:"foo/", Policy:"nope", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"key without policy", `key "foo" { }`, `Invalid key policy: &acl.KeyRule{Prefix:"foo", Policy:"", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"node", `node "foo" { policy = "list" }`, `Invalid node policy: &acl.NodeRule{Name:"foo", Policy:"list", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"node_prefix", `node_prefix "" { policy = "nope" }`, `Invalid node_prefix policy: &acl.NodeRule{Name:"", Policy:"nope", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"query", `query "foo" { policy = "nope" }`, `Invalid query policy: &acl.PreparedQueryRule{Prefix:"foo", Policy:"nope"}`},
		{"query_prefix", `query_prefix "" { policy = "nope" }`, `Invalid query_prefix policy: &acl.PreparedQueryRule{Prefix:"", Policy:"nope"}`},
		{"service", `service "foo" { policy = "nope" }`, `Invalid service policy: &acl.ServiceRule{Name:"foo", Policy:"nope", Intentions:"", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"service intentions", `service "foo" { policy = "read" intentions = "nope" }`, `Invalid service intentions policy: &acl.ServiceRule{Name:"foo", Policy:"read", Intentions:"nope", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"service intentions list", `service "foo" { policy = "read" intentions = "list" }`, `Invalid service intentions policy: &acl.ServiceRule{Name:"foo", Policy:"read", Intentions:"list", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"service_prefix", `service_prefix "" { policy = "nope" }`, `Invalid service_prefix policy: &acl.ServiceRule{Name:"", Policy:"nope", Intentions:"", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"service_prefix intentions", `service_prefix "" { policy = "write" intentions = "nope" }`, `Invalid service_prefix intentions policy: &acl.ServiceRule{Name:"", Policy:"write", Intentions:"nope", EnterpriseRule:acl.EnterpriseRule{}}`},
		{"session", `session "foo" { policy = "nope" }`, `Invalid session policy: &acl.SessionRule{Node:"foo", Policy:"nope"}`},
		{"session_prefix", `session_prefix "" { policy = "nope" }`, `Invalid session_prefix policy: &acl.SessionRule{Node:"", Policy:"nope"}`},
		{"syntax, with the line", "key \"foo\" {\n  policy = \"read\"\n", `Failed to parse ACL rules: At 3:2: `},
		{"bad json", `{"key": `, `Failed to parse ACL rules: invalid JSON: `},
		{"unknown resource", "operator = \"read\"\nkeys \"foo\" { policy = \"read\" }", `Failed to parse ACL rules: At 2:1: unknown resource "keys"`},
		{"unknown resource json", `{"services": {"web": {"policy": "read"}}}`, `Failed to parse ACL rules: unknown resource "services"`},
		{"argument set twice", "operator = \"read\"\noperator = \"write\"", `Failed to parse ACL rules: The argument "operator" at 2:1 was already set. Each argument can only be defined once`},
		{"policy set twice", "key \"a\" {\n  policy = \"read\"\n  policy = \"write\"\n}", `Failed to parse ACL rules: The argument "policy" at 3:3 was already set. Each argument can only be defined once`},
		{"segmented resource without a segment", `key = "read"`, `Failed to parse ACL rules: `},
		{"not an object", `["key"]`, `Failed to parse ACL rules: `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(tc.text)
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", r)
			}
			if strings.HasSuffix(tc.want, ": ") {
				if !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("error %q, want it to start with %q", err, tc.want)
				}
				return
			}
			if err.Error() != tc.want {
				t.Fatalf("error\n %s\nwant\n %s", err, tc.want)
			}
		})
	}
}
