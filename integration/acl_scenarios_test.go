package integration

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// blockingTokenDeleted: a KV read blocking on the client agent whose token
// is deleted while it waits answers Consul's 403 at its next wake, not the
// key's new value.
func (f *aclFixture) blockingTokenDeleted(t *testing.T) {
	ctx := apiContext(t, 60*time.Second)
	tok, _, err := f.mgmt.ACL().TokenCreate(&api.ACLToken{Description: "blocking", Policies: []*api.ACLTokenPolicyLink{{Name: "read-everything"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.doSecret(ctx, tok.SecretID, "GET", f.client.HTTPAddr(), "/v1/kv/app/a", "")
	if err != nil || r.status != 200 {
		t.Fatalf("first read: %v %v", r, err)
	}
	index := r.header.Get("X-Consul-Index")
	done := make(chan aclResp, 1)
	go func() {
		r, err := f.doSecret(ctx, tok.SecretID, "GET", f.client.HTTPAddr(), "/v1/kv/app/a?wait=30s&index="+index, "")
		if err != nil {
			r = aclResp{status: -1, body: []byte(err.Error())}
		}
		done <- r
	}()
	// The query must be waiting when the token goes: nothing it may read
	// has changed, so it has no reason to answer yet.
	select {
	case r := <-done:
		t.Fatalf("blocking read answered before any change: %s", r)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := f.mgmt.ACL().TokenDelete(tok.AccessorID, nil); err != nil {
		t.Fatal(err)
	}
	// A write it would have seen wakes it, if the deletion did not.
	if _, err := f.mgmtDo(ctx, 200, "PUT", "/v1/kv/app/a", "changed"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.status != 403 || strings.TrimSpace(string(r.body)) != aclNotFound {
			t.Fatalf("blocking read after its token was deleted: %s, want 403 %s", r, aclNotFound)
		}
	case <-ctx.Done():
		t.Fatal("blocking read did not answer after its token was deleted and the key changed")
	}
}

// goClientACL: the official client's ACL calls end to end: policy, role
// and token CRUD, clone, token/self, templated policies, and a token
// whose rights come through a role.
func (f *aclFixture) goClientACL(t *testing.T) {
	acl := f.mgmt.ACL()
	pol, _, err := acl.PolicyCreate(&api.ACLPolicy{Name: "api-pol", Description: "v1", Rules: `key_prefix "api/" { policy = "write" }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pol.Description = "v2"
	if _, _, err := acl.PolicyUpdate(pol, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := acl.PolicyReadByName("api-pol", nil); err != nil || got.ID != pol.ID || got.Description != "v2" || !strings.Contains(got.Rules, `"api/"`) {
		t.Fatalf("PolicyReadByName: %+v %v", got, err)
	}
	role, _, err := acl.RoleCreate(&api.ACLRole{Name: "api-role", Policies: []*api.ACLRolePolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	role.Description = "through a role"
	if _, _, err := acl.RoleUpdate(role, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := acl.RoleReadByName("api-role", nil); err != nil || got.ID != role.ID || got.Description != "through a role" || len(got.Policies) != 1 || got.Policies[0].Name != "api-pol" {
		t.Fatalf("RoleReadByName: %+v %v", got, err)
	}
	if roles, _, err := acl.RoleList(nil); err != nil || !slices.ContainsFunc(roles, func(r *api.ACLRole) bool { return r.ID == role.ID }) {
		t.Fatalf("RoleList: %v %v", roles, err)
	}

	tok, _, err := acl.TokenCreate(&api.ACLToken{Description: "api-tok", Roles: []*api.ACLTokenRoleLink{{Name: "api-role"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok.Description = "api-tok v2"
	if _, _, err := acl.TokenUpdate(tok, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := acl.TokenRead(tok.AccessorID, nil); err != nil || got.Description != "api-tok v2" || got.SecretID != tok.SecretID || len(got.Roles) != 1 {
		t.Fatalf("TokenRead: %+v %v", got, err)
	}
	as := newTokenClient(t, f.client.HTTPAddr(), tok.SecretID)
	if self, _, err := as.ACL().TokenReadSelf(nil); err != nil || self.AccessorID != tok.AccessorID {
		t.Fatalf("TokenReadSelf: %+v %v", self, err)
	}
	if _, err := as.KV().Put(&api.KVPair{Key: "api/x", Value: []byte("1")}, nil); err != nil {
		t.Fatalf("write allowed through the role: %v", err)
	}
	if _, err := as.KV().Put(&api.KVPair{Key: "other/api", Value: []byte("1")}, nil); !isStatus(err, 403) {
		t.Fatalf("write outside the role's policy: %v, want 403", err)
	}

	clone, _, err := acl.TokenClone(tok.AccessorID, "api-clone", nil)
	if err != nil {
		t.Fatal(err)
	}
	if clone.AccessorID == tok.AccessorID || clone.SecretID == tok.SecretID || clone.Description != "api-clone" || len(clone.Roles) != 1 || clone.Roles[0].ID != role.ID {
		t.Fatalf("TokenClone: %+v", clone)
	}
	list, _, err := acl.TokenList(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{tok.AccessorID, clone.AccessorID} {
		if !slices.ContainsFunc(list, func(e *api.ACLTokenListEntry) bool { return e.AccessorID == id }) {
			t.Fatalf("TokenList lacks %s", id)
		}
	}
	if _, err := acl.TokenDelete(clone.AccessorID, nil); err != nil {
		t.Fatal(err)
	}
	if got, _, err := acl.TokenRead(clone.AccessorID, nil); err == nil || !strings.Contains(err.Error(), aclNotFound) {
		t.Fatalf("TokenRead of a deleted token: %+v %v, want %s", got, err, aclNotFound)
	}

	templates, _, err := acl.TemplatedPolicyList(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"builtin/service", "builtin/node", "builtin/dns"} {
		if _, ok := templates[name]; !ok {
			t.Errorf("TemplatedPolicyList lacks %s: %v", name, slices.Sorted(maps.Keys(templates)))
		}
	}

	// Without its role the token holds nothing; the role's policy goes too.
	if _, err := acl.RoleDelete(role.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := as.KV().Put(&api.KVPair{Key: "api/x", Value: []byte("2")}, nil); !isStatus(err, 403) {
		t.Fatalf("write after the role was deleted: %v, want 403", err)
	}
	if _, err := acl.PolicyDelete(pol.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := acl.PolicyRead(pol.ID, nil); err == nil {
		t.Fatal("PolicyRead of a deleted policy succeeded")
	}
}

// agentTokens: PUT /v1/agent/token/default on a client agent with
// acl.enable_token_persistence: the default token answers requests that
// carry none, and it survives a restart of the agent (acl-tokens.json in
// its data dir). Setting it needs acl:write.
func (f *aclFixture) agentTokens(t *testing.T) {
	ctx := apiContext(t, 60*time.Second)
	if err := f.c.WaitForClients(ctx); err != nil {
		t.Fatal(err)
	}
	addr := f.second.HTTPAddr()
	readNoToken := func() aclResp {
		t.Helper()
		r, err := f.doSecret(ctx, "", "GET", addr, "/v1/kv/other/b", "")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := readNoToken(); r.status != 403 {
		t.Fatalf("read without a token or a default token: %s, want 403", r)
	}
	asRead := newTokenClient(t, addr, f.secret[tokRead])
	if _, err := asRead.Agent().UpdateDefaultACLToken(f.secret[tokRead], nil); !isStatus(err, 403) {
		t.Fatalf("setting the default token with a read-only token: %v, want 403", err)
	}
	if _, err := newTokenClient(t, addr, aclInitialManagement).Agent().UpdateDefaultACLToken(f.secret[tokRead], nil); err != nil {
		t.Fatal(err)
	}
	if r := readNoToken(); r.status != 200 {
		t.Fatalf("read with the default token: %s, want 200", r)
	}
	if _, err := os.Stat(filepath.Join(f.second.DataDir(), "acl-tokens.json")); err != nil {
		t.Fatalf("persisted tokens: %v", err)
	}
	if err := f.second.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := f.second.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "default token after the restart", func() error {
		r, err := f.doSecret(ctx, "", "GET", addr, "/v1/kv/other/b", "")
		if err != nil {
			return err
		}
		if r.status != 200 {
			return errors.New(r.String())
		}
		return nil
	})
}

// aclCLI: the acl commands against the client agent: policy create with
// -rules @file, token create/list/read, set-agent-token.
func (f *aclFixture) aclCLI(t *testing.T) {
	ctx := apiContext(t, 60*time.Second)
	rules := filepath.Join(t.TempDir(), "rules.hcl")
	if err := os.WriteFile(rules, []byte(`key_prefix "cli/" { policy = "write" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"-http-addr", f.client.HTTPURL(), "-token", aclInitialManagement}
	cli := func(args ...string) cliResult {
		t.Helper()
		res := runCLI(ctx, t, append(append([]string{"acl"}, args...), base...)...)
		if res.code != 0 {
			t.Fatalf("%v", res)
		}
		return res
	}
	if res := cli("policy", "create", "-name", "cli-pol", "-rules", "@"+rules); !strings.Contains(res.stdout, "cli-pol") || !strings.Contains(res.stdout, `key_prefix "cli/"`) {
		t.Fatalf("policy create printed %s", res)
	}
	res := cli("token", "create", "-description", "cli-tok", "-policy-name", "cli-pol", "-format", "json")
	var tok api.ACLToken
	if err := json.Unmarshal([]byte(res.stdout), &tok); err != nil || tok.SecretID == "" || len(tok.Policies) != 1 || tok.Policies[0].Name != "cli-pol" {
		t.Fatalf("token create: %v %s", err, res)
	}
	if res := cli("token", "list"); !strings.Contains(res.stdout, tok.AccessorID) || !strings.Contains(res.stdout, "cli-tok") {
		t.Fatalf("token list lacks %s: %s", tok.AccessorID, res)
	}
	if res := cli("token", "read", "-id", tok.AccessorID); !strings.Contains(res.stdout, "cli-tok") || !strings.Contains(res.stdout, "cli-pol") {
		t.Fatalf("token read: %s", res)
	}
	as := newTokenClient(t, f.client.HTTPAddr(), tok.SecretID)
	if _, err := as.KV().Put(&api.KVPair{Key: "cli/x", Value: []byte("1")}, nil); err != nil {
		t.Fatalf("write with the CLI's token: %v", err)
	}

	// set-agent-token on the second client: its default token becomes
	// the CLI's, which may read cli/ but not other/.
	if res := runCLI(ctx, t, "acl", "set-agent-token", "-http-addr", f.second.HTTPURL(), "-token", aclInitialManagement, "default", tok.SecretID); res.code != 0 {
		t.Fatalf("%v", res)
	}
	for _, c := range []struct {
		key  string
		want int
	}{{"cli/x", 200}, {"other/b", 403}} {
		r, err := f.doSecret(ctx, "", "GET", f.second.HTTPAddr(), "/v1/kv/"+c.key, "")
		if err != nil || r.status != c.want {
			t.Errorf("read of %s with the default token set by the CLI: %v %v, want %d", c.key, r, err, c.want)
		}
	}
}
