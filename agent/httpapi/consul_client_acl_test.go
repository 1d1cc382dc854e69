package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/server"
)

// startACLServer is a real single server with ACLs on (default deny),
// behind the HTTP API of an agent with ACLs on; the client carries no
// token.
func startACLServer(t *testing.T) (*api.Client, string) {
	t.Helper()
	c, url, _ := startRealServerConfig(t, func(sc *server.Config) {
		sc.ACLs = server.ACLConfig{Enabled: true, DefaultPolicy: "deny"}
	}, func(srv *server.Server, cfg *Config) {
		cfg.ACLsEnabled, cfg.ACL = true, serverChecker(t, srv)
	})
	return c, url
}

// TestConsulClientACL: the official client's ACL calls against a real
// server with ACLs on: bootstrap once, policies, roles and tokens through
// their whole life, self, clone, filtered lists, the replication status
// and Consul's 403 texts.
func TestConsulClientACL(t *testing.T) {
	c, base := startACLServer(t)
	a := c.ACL()
	var root *api.ACLToken
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if root, _, err = a.Bootstrap(); err == nil {
			break
		}
		// The leader creates the global-management policy just after its
		// barrier; a bootstrap before that is refused.
		if time.Now().After(deadline) {
			t.Fatalf("bootstrap: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := a.Bootstrap(); err == nil || !strings.Contains(err.Error(), "403 (Permission denied: ACL bootstrap no longer allowed (reset index: ") {
		t.Fatalf("second bootstrap: %v", err)
	}
	if _, _, err := a.TokenList(nil); err == nil || err.Error() != "Unexpected response code: 403 (Permission denied: anonymous token lacks permission 'acl:read'. The anonymous token is used implicitly when a request does not specify a token.)" {
		t.Fatalf("anonymous list: %v", err)
	}
	w := &api.WriteOptions{Token: root.SecretID}
	q := &api.QueryOptions{Token: root.SecretID}
	// One datacenter: replication is never on, as in Consul's primary.
	if repl, _, err := a.Replication(q); err != nil || repl.Enabled || repl.Running {
		t.Fatalf("replication: %+v %v", repl, err)
	}

	pol, _, err := a.PolicyCreate(&api.ACLPolicy{Name: "kv", Rules: `key_prefix "" { policy = "read" }`, Description: "read kv"}, w)
	if err != nil || pol.ID == "" || pol.CreateIndex == 0 {
		t.Fatalf("policy create: %+v %v", pol, err)
	}
	pol.Description = "changed"
	if upd, _, err := a.PolicyUpdate(pol, w); err != nil || upd.Description != "changed" {
		t.Fatalf("policy update: %+v %v", upd, err)
	}
	if byName, _, err := a.PolicyReadByName("kv", q); err != nil || byName.ID != pol.ID {
		t.Fatalf("policy by name: %+v %v", byName, err)
	}
	if missing, _, err := a.PolicyReadByName("nope", q); err != nil || missing != nil {
		t.Fatalf("missing policy by name: %+v %v", missing, err)
	}
	// kv and the two built-in policies.
	pols, _, err := a.PolicyList(q)
	if err != nil || len(pols) != 3 {
		t.Fatalf("policies: %v %v", pols, err)
	}
	role, _, err := a.RoleCreate(&api.ACLRole{Name: "readers", Policies: []*api.ACLRolePolicyLink{{Name: "kv"}}}, w)
	if err != nil || role.Policies[0].ID != pol.ID {
		t.Fatalf("role create: %+v %v", role, err)
	}
	if got, _, err := a.RoleReadByName("readers", q); err != nil || got.ID != role.ID {
		t.Fatalf("role by name: %+v %v", got, err)
	}
	if got, _, err := a.RoleRead("8a1b2c3d-0000-4000-8000-000000000000", q); err != nil || got != nil {
		t.Fatalf("missing role: %+v %v", got, err)
	}
	tok, _, err := a.TokenCreate(&api.ACLToken{Description: "reader", Roles: []*api.ACLTokenRoleLink{{Name: "readers"}},
		ServiceIdentities: []*api.ACLServiceIdentity{{ServiceName: "web"}}}, w)
	if err != nil || tok.SecretID == "" || tok.AccessorID == "" {
		t.Fatalf("token create: %+v %v", tok, err)
	}
	self, _, err := a.TokenReadSelf(&api.QueryOptions{Token: tok.SecretID})
	if err != nil || self.AccessorID != tok.AccessorID {
		t.Fatalf("self: %+v %v", self, err)
	}
	// The reader may not write ACLs: Consul's denial names its accessor.
	if _, _, err := a.PolicyCreate(&api.ACLPolicy{Name: "x"}, &api.WriteOptions{Token: tok.SecretID}); err == nil ||
		err.Error() != "Unexpected response code: 403 (Permission denied: token with AccessorID '"+tok.AccessorID+"' lacks permission 'acl:write')" {
		t.Fatalf("reader writes: %v", err)
	}
	clone, _, err := a.TokenClone(tok.AccessorID, "copy", w)
	if err != nil || clone.Description != "copy" || clone.SecretID == tok.SecretID || len(clone.Roles) != 1 {
		t.Fatalf("clone: %+v %v", clone, err)
	}
	byRole, _, err := a.TokenListFiltered(api.ACLTokenFilterOptions{Role: role.ID}, q)
	if err != nil || len(byRole) != 2 {
		t.Fatalf("by role: %v %v", byRole, err)
	}
	byService, _, err := a.TokenListFiltered(api.ACLTokenFilterOptions{ServiceName: "web"}, q)
	if err != nil || len(byService) != 2 {
		t.Fatalf("by service: %v %v", byService, err)
	}
	if _, err := a.TokenDelete(clone.AccessorID, w); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.TokenRead(clone.AccessorID, q); err == nil || err.Error() != "Unexpected response code: 403 (ACL not found)" {
		t.Fatalf("deleted token read: %v", err)
	}
	if _, err := a.RoleDelete(role.ID, w); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PolicyDelete(pol.ID, w); err != nil {
		t.Fatal(err)
	}
	if got, _, err := a.TokenRead(tok.AccessorID, q); err != nil || len(got.Roles) != 0 {
		t.Fatalf("token after its role's delete: %+v %v", got, err)
	}
	tpls, _, err := a.TemplatedPolicyList(q)
	if err != nil || len(tpls) != 6 {
		t.Fatalf("templated policies: %v %v", tpls, err)
	}
	prev, _, err := a.TemplatedPolicyPreview(&api.ACLTemplatedPolicy{TemplateName: "builtin/service", TemplateVariables: &api.ACLTemplatedPolicyVariables{Name: "api"}}, w)
	if err != nil || !strings.Contains(prev.Rules, `service "api"`) {
		t.Fatalf("preview: %+v %v", prev, err)
	}
	// The token travels in any of Consul's three places.
	for _, set := range []func(*http.Request){
		func(r *http.Request) { r.Header.Set("X-Consul-Token", root.SecretID) },
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+root.SecretID) },
		func(r *http.Request) { r.URL.RawQuery = "token=" + root.SecretID },
	} {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/acl/tokens", nil)
		set(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("token list with %v: %d", req.Header, resp.StatusCode)
		}
	}
}
