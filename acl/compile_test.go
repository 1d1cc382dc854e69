package acl

import (
	"errors"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// TestCompile checks the rules that identities and templated policies
// stand for, as Consul documents them, and the datacenter limits of every
// grant.
func TestCompile(t *testing.T) {
	policy := func(name, rules string, dcs ...string) *structs.ACLPolicy {
		return &structs.ACLPolicy{ID: name + "-id", Name: name, Rules: rules, Datacenters: dcs}
	}
	tpl := func(name, v string, dcs ...string) structs.ACLTemplatedPolicy {
		tp := structs.ACLTemplatedPolicy{TemplateName: name, Datacenters: dcs}
		if v != "" {
			tp.TemplateVariables = &structs.ACLTemplatedPolicyVariables{Name: v}
		}
		return tp
	}
	cases := []struct {
		name   string
		grants Grants
		checks []check
	}{
		{
			name:   "service identity",
			grants: Grants{ServiceIdentities: []structs.ACLServiceIdentity{{ServiceName: "web"}}},
			checks: []check{
				{"ServiceWrite", "web", Allow}, {"ServiceWrite", "web-sidecar-proxy", Allow},
				{"ServiceWrite", "db", Deny}, {"ServiceRead", "db", Allow}, {"NodeRead", "any", Allow},
				{"IntentionRead", "web", Allow}, {"IntentionWrite", "web", Deny},
				{"NodeWrite", "any", Deny}, {"KeyRead", "k", Deny},
			},
		},
		{
			name:   "service identity of another datacenter",
			grants: Grants{ServiceIdentities: []structs.ACLServiceIdentity{{ServiceName: "web", Datacenters: []string{"dc2"}}}},
			checks: []check{{"ServiceWrite", "web", Deny}, {"ServiceRead", "db", Deny}},
		},
		{
			name:   "service identity listing this datacenter",
			grants: Grants{ServiceIdentities: []structs.ACLServiceIdentity{{ServiceName: "web", Datacenters: []string{"dc2", "dc1"}}}},
			checks: []check{{"ServiceWrite", "web", Allow}},
		},
		{
			name:   "node identity",
			grants: Grants{NodeIdentities: []structs.ACLNodeIdentity{{NodeName: "node-1", Datacenter: "dc1"}}},
			checks: []check{
				{"NodeWrite", "node-1", Allow}, {"NodeWrite", "node-2", Deny}, {"NodeRead", "node-2", Deny},
				{"ServiceRead", "web", Allow}, {"ServiceWrite", "web", Deny},
			},
		},
		{
			name:   "node identity of another datacenter",
			grants: Grants{NodeIdentities: []structs.ACLNodeIdentity{{NodeName: "node-1", Datacenter: "dc2"}}},
			checks: []check{{"NodeWrite", "node-1", Deny}, {"ServiceRead", "web", Deny}},
		},
		{
			name:   "builtin/service",
			grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tpl(structs.ACLTemplatedPolicyServiceName, "api")}},
			checks: []check{{"ServiceWrite", "api", Allow}, {"ServiceWrite", "api-sidecar-proxy", Allow}, {"ServiceRead", "x", Allow}, {"NodeRead", "n", Allow}},
		},
		{
			name:   "builtin/node",
			grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tpl(structs.ACLTemplatedPolicyNodeName, "n1")}},
			checks: []check{{"NodeWrite", "n1", Allow}, {"ServiceRead", "x", Allow}, {"NodeRead", "n2", Deny}},
		},
		{
			name:   "builtin/dns",
			grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tpl(structs.ACLTemplatedPolicyDNSName, "")}},
			checks: []check{{"NodeRead", "n", Allow}, {"ServiceRead", "s", Allow}, {"QueryRead", "q", Allow}, {"QueryWrite", "q", Deny}, {"ServiceWrite", "s", Deny}},
		},
		{
			name:   "builtin/api-gateway",
			grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tpl(structs.ACLTemplatedPolicyAPIGatewayName, "gw")}},
			checks: []check{{"MeshRead", "", Allow}, {"MeshWrite", "", Deny}, {"ServiceWrite", "gw", Allow}, {"ServiceRead", "x", Allow}, {"NodeRead", "n", Allow}},
		},
		{
			name:   "builtin/nomad-server",
			grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tpl(structs.ACLTemplatedPolicyNomadServerName, "")}},
			checks: []check{{"ACLWrite", "", Allow}, {"AgentRead", "a", Allow}, {"AgentWrite", "a", Deny}, {"NodeRead", "n", Allow}, {"ServiceWrite", "s", Allow}},
		},
		{
			name:   "builtin/nomad-client",
			grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tpl(structs.ACLTemplatedPolicyNomadClientName, "")}},
			checks: []check{{"AgentRead", "a", Allow}, {"NodeRead", "n", Allow}, {"NodeWrite", "n", Deny}, {"ServiceWrite", "s", Allow}, {"KeyRead", "k", Allow}, {"KeyWrite", "k", Deny}},
		},
		{
			name:   "templated policy of another datacenter",
			grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tpl(structs.ACLTemplatedPolicyDNSName, "", "dc3")}},
			checks: []check{{"NodeRead", "n", Deny}},
		},
		{
			name: "policies limited to datacenters",
			grants: Grants{Policies: []*structs.ACLPolicy{
				policy("here", `key "a" { policy = "write" }`, "dc1"),
				policy("there", `key "b" { policy = "write" }`, "dc2"),
				policy("everywhere", `key "c" { policy = "write" }`),
			}},
			checks: []check{{"KeyWrite", "a", Allow}, {"KeyWrite", "b", Deny}, {"KeyWrite", "c", Allow}},
		},
		{
			name: "a policy's deny beats an identity's write",
			grants: Grants{
				Policies:          []*structs.ACLPolicy{policy("no-web", `service "web" { policy = "deny" }`)},
				ServiceIdentities: []structs.ACLServiceIdentity{{ServiceName: "web"}},
			},
			checks: []check{{"ServiceWrite", "web", Deny}, {"ServiceWrite", "web-sidecar-proxy", Allow}},
		},
		{
			name:   "global-management",
			grants: Grants{Policies: []*structs.ACLPolicy{structs.ACLGlobalManagementPolicy()}},
			checks: []check{{"ACLWrite", "", Allow}, {"KeyWritePrefix", "", Allow}, {"IntentionWrite", "*", Allow}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Compile(Config{AccessorID: "acc", Datacenter: "dc1", Grants: tc.grants})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			for _, c := range tc.checks {
				if got := ask(t, a, c); got != c.want {
					t.Errorf("%s(%q) = %s, want %s", c.method, c.segment, got, c.want)
				}
			}
		})
	}
}

// TestCompileErrors checks that a grant that cannot be compiled fails the
// compile and names the grant.
func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name   string
		grants Grants
		want   string
	}{
		{"bad rules", Grants{Policies: []*structs.ACLPolicy{{Name: "broken", Rules: `key "a" { policy = "nope" }`}}},
			`acl: policy "broken": Invalid key policy: `},
		{"unknown template", Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{{TemplateName: "builtin/nope"}}},
			`acl: templated policy "builtin/nope": no such ACL templated policy with Name "builtin/nope"`},
		{"template without its name", Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{{TemplateName: structs.ACLTemplatedPolicyServiceName}}},
			`acl: templated policy "builtin/service": validation error for templated policy: "builtin/service": name is required`},
		{"identity with a bad name", Grants{ServiceIdentities: []structs.ACLServiceIdentity{{ServiceName: "Web"}}},
			`acl: templated policy "builtin/service": service identity "Web" has an invalid name.`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(Config{Datacenter: "dc1", Grants: tc.grants})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to start with %q", err, tc.want)
			}
		})
	}
}

// TestTemplateNameCannotAddRules checks that a template's Name is only
// ever a segment: quotes and braces in it do not become rules.
func TestTemplateNameCannotAddRules(t *testing.T) {
	tp := structs.ACLTemplatedPolicy{TemplateName: structs.ACLTemplatedPolicyAPIGatewayName,
		TemplateVariables: &structs.ACLTemplatedPolicyVariables{Name: `gw" { policy = "write" } acl = "write" service "x`}}
	a, err := Compile(Config{Datacenter: "dc1", Grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tp}}})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if a.ACLWrite() != Deny {
		t.Fatal("a template's Name granted acl write")
	}
	if a.ServiceWrite(tp.TemplateVariables.Name) != Allow {
		t.Fatal("the Name is not the service segment")
	}
	tp.TemplateVariables.Name = "two\nlines"
	if _, err := Compile(Config{Grants: Grants{TemplatedPolicies: []structs.ACLTemplatedPolicy{tp}}}); err == nil {
		t.Fatal("a Name of two lines was accepted")
	}
}

// TestDenied checks Consul's denial texts, and that a denial is the
// permission-denied sentinel on both sides of the internal RPC.
func TestDenied(t *testing.T) {
	cases := []struct {
		name     string
		accessor string
		res      Resource
		access   Access
		segment  string
		want     string
	}{
		{"named", "6a1253d2-1785-24fd-91c2-f8e78c745511", ResourceKey, AccessWrite, "foo/bar",
			`Permission denied: token with AccessorID '6a1253d2-1785-24fd-91c2-f8e78c745511' lacks permission 'key:write' on "foo/bar"`},
		{"unnamed", "6a1253d2-1785-24fd-91c2-f8e78c745511", ResourceOperator, AccessRead, "",
			`Permission denied: token with AccessorID '6a1253d2-1785-24fd-91c2-f8e78c745511' lacks permission 'operator:read'`},
		{"list", "a", ResourceKey, AccessList, "app/",
			`Permission denied: token with AccessorID 'a' lacks permission 'key:list' on "app/"`},
		{"anonymous", structs.ACLTokenAnonymousID, ResourceKey, AccessRead, "foo",
			`Permission denied: anonymous token lacks permission 'key:read' on "foo". The anonymous token is used implicitly when a request does not specify a token.`},
		{"anonymous unnamed", structs.ACLTokenAnonymousID, ResourceACL, AccessRead, "",
			`Permission denied: anonymous token lacks permission 'acl:read'. The anonymous token is used implicitly when a request does not specify a token.`},
		{"no accessor", "", ResourceService, AccessRead, "foobar",
			`Permission denied: token with AccessorID '' lacks permission 'service:read' on "foobar"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			authz := NewPolicyAuthorizer(tc.accessor, DenyAll())
			if authz.AccessorID() != tc.accessor {
				t.Fatalf("AccessorID %q", authz.AccessorID())
			}
			err := authz.Denied(tc.res, tc.access, tc.segment)
			if err.Error() != tc.want {
				t.Fatalf("got\n %s\nwant\n %s", err, tc.want)
			}
			if !errors.Is(err, structs.ErrPermissionDenied) || structs.CodeOf(err) != structs.CodePermissionDenied {
				t.Fatal("the denial is not the permission-denied sentinel")
			}
			// What a server sends for it (the sentinel's name and the
			// message), rebuilt on the caller's side.
			s := structs.SentinelOf(err)
			back := structs.WireError(s.Name(), err.Error())
			if !errors.Is(back, structs.ErrPermissionDenied) || back.Error() != tc.want {
				t.Fatalf("across the wire: %v", back)
			}
			var pd *PermissionDeniedError
			if !errors.As(err, &pd) || pd.Segment != tc.segment {
				t.Fatalf("errors.As: %+v", pd)
			}
		})
	}
}
