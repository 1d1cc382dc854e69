package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/structs"
)

func callErr[A, R any](s *Server, m structs.Method[A, R], args *A, reply *R) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Call(ctx, s, args, reply)
}

// TestACLEndpoints: on a 3-server cluster with ACLs on, bootstrap once
// (then Consul's 403 text), policies, roles and tokens created through a
// follower, the token resolved to what its policy allows, Consul's denial
// texts for weaker tokens, clone, self, list redaction, delete, and the
// leader's reaping of an expired token.
func TestACLEndpoints(t *testing.T) {
	servers := startTestCluster(t, 3, false, func(ts *testServer) {
		ts.acls = ACLConfig{Enabled: true, DefaultPolicy: "deny", ReapInterval: 50 * time.Millisecond, TokenMinExpirationTTL: time.Millisecond}
	})
	leader := waitForLeader(t, servers, 30*time.Second)
	var follower *Server
	for _, ts := range servers {
		if ts != leader {
			follower = ts.srv
		}
	}
	waitFor(t, 10*time.Second, "built-in ACL objects", func() bool {
		if _, ro, _ := leader.srv.fsm.State().ACLPolicyGetByID(nil, structs.ACLPolicyGlobalReadOnlyID); ro == nil || ro.Name != "builtin/global-read-only" {
			return false
		}
		_, p, _ := leader.srv.fsm.State().ACLPolicyGetByID(nil, structs.ACLPolicyGlobalManagementID)
		_, a, _ := leader.srv.fsm.State().ACLTokenGetByAccessor(nil, structs.ACLTokenAnonymousID)
		return p != nil && a != nil
	})

	var root structs.ACLToken
	rpc(t, follower, structs.MethodACLBootstrap, &structs.ACLBootstrapRequest{}, &root)
	if root.SecretID == "" || len(root.Policies) != 1 || root.Policies[0].Name != "global-management" {
		t.Fatalf("bootstrap token %+v", root)
	}
	err := callErr(follower, structs.MethodACLBootstrap, &structs.ACLBootstrapRequest{}, &structs.ACLToken{})
	if !errors.Is(err, structs.ErrACLBootstrapNotAllowed) || !strings.Contains(err.Error(), "(reset index: ") {
		t.Fatalf("second bootstrap: %v", err)
	}
	mgmt := structs.WriteRequest{Token: root.SecretID}

	var pol structs.ACLPolicy
	rpc(t, follower, structs.MethodACLPolicySet, &structs.ACLPolicySetRequest{Policy: structs.ACLPolicy{Name: "kv-read", Rules: `key_prefix "app/" { policy = "read" }` + "\nacl = \"read\""}, WriteRequest: mgmt}, &pol)
	var role structs.ACLRole
	rpc(t, follower, structs.MethodACLRoleSet, &structs.ACLRoleSetRequest{Role: structs.ACLRole{Name: "readers", Policies: []structs.ACLLink{{Name: "kv-read"}}}, WriteRequest: mgmt}, &role)
	if pol.ID == "" || role.Policies[0].ID != pol.ID {
		t.Fatalf("policy %+v role %+v", pol, role)
	}
	var tok structs.ACLToken
	rpc(t, follower, structs.MethodACLTokenSet, &structs.ACLTokenSetRequest{Create: true, ACLToken: structs.ACLToken{Description: "reader", Roles: []structs.ACLLink{{Name: "readers"}}}, WriteRequest: mgmt}, &tok)
	authz, got, err := leader.srv.ResolveToken(context.Background(), tok.SecretID)
	if err != nil || got.AccessorID != tok.AccessorID || authz.KeyRead("app/x") != acl.Allow || authz.KeyWrite("app/x") != acl.Deny || authz.ACLRead() != acl.Allow {
		t.Fatalf("resolved %+v %v", got, err)
	}

	denials := []struct {
		name  string
		call  func() error
		want  string
		match error
	}{
		{"anonymous lists tokens", func() error {
			return callErr(follower, structs.MethodACLTokenList, &structs.ACLTokenListRequest{}, &structs.ACLTokenListResponse{})
		}, "Permission denied: anonymous token lacks permission 'acl:read'. The anonymous token is used implicitly when a request does not specify a token.", structs.ErrPermissionDenied},
		{"reader creates a policy", func() error {
			return callErr(follower, structs.MethodACLPolicySet, &structs.ACLPolicySetRequest{Policy: structs.ACLPolicy{Name: "x"}, WriteRequest: structs.WriteRequest{Token: tok.SecretID}}, &structs.ACLPolicy{})
		}, "Permission denied: token with AccessorID '" + tok.AccessorID + "' lacks permission 'acl:write'", structs.ErrPermissionDenied},
		{"unknown secret", func() error {
			return callErr(follower, structs.MethodACLPolicyList, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{Token: "b3f9a5a4-0000-4000-8000-000000000000"}}, &structs.ACLPolicyListResponse{})
		}, "ACL not found", structs.ErrACLNotFound},
		{"invalid rules", func() error {
			return callErr(follower, structs.MethodACLPolicySet, &structs.ACLPolicySetRequest{Policy: structs.ACLPolicy{Name: "bad", Rules: `key "x" { policy = "sideways" }`}, WriteRequest: mgmt}, &structs.ACLPolicy{})
		}, "Invalid Policy: ", nil},
		{"delete global-management", func() error {
			return callErr(follower, structs.MethodACLPolicyDelete, &structs.ACLPolicyDeleteRequest{PolicyID: structs.ACLPolicyGlobalManagementID, WriteRequest: mgmt}, &struct{}{})
		}, "Delete operation not permitted on the builtin global-management policy", nil},
		{"delete global-read-only", func() error {
			return callErr(follower, structs.MethodACLPolicyDelete, &structs.ACLPolicyDeleteRequest{PolicyID: structs.ACLPolicyGlobalReadOnlyID, WriteRequest: mgmt}, &struct{}{})
		}, "Delete operation not permitted on the builtin global-read-only policy", nil},
		{"rename global-read-only", func() error {
			ro := structs.ACLBuiltinPolicies()[1]
			ro.Name = "mine"
			return callErr(follower, structs.MethodACLPolicySet, &structs.ACLPolicySetRequest{Policy: *ro, WriteRequest: mgmt}, &structs.ACLPolicy{})
		}, "Changing the Name for the builtin global-read-only policy is not permitted", nil},
		{"tokens by two filters", func() error {
			return callErr(follower, structs.MethodACLTokenList, &structs.ACLTokenListRequest{Policy: pol.ID, Role: role.ID, QueryOptions: structs.QueryOptions{Token: root.SecretID}}, &structs.ACLTokenListResponse{})
		}, "can only filter by one of policy, role, serviceName, or authMethod at once", nil},
	}
	for _, d := range denials {
		err := d.call()
		if err == nil || !strings.HasPrefix(err.Error(), d.want) || (d.match != nil && !errors.Is(err, d.match)) {
			t.Fatalf("%s: %v, want %q", d.name, err, d.want)
		}
	}

	var self structs.ACLTokenResponse
	rpc(t, follower, structs.MethodACLTokenRead, &structs.ACLTokenGetRequest{TokenID: tok.SecretID, BySecret: true}, &self)
	if self.Token == nil || self.Token.AccessorID != tok.AccessorID || self.Token.SecretID != tok.SecretID {
		t.Fatalf("self %+v", self.Token)
	}
	var clone structs.ACLToken
	rpc(t, follower, structs.MethodACLTokenClone, &structs.ACLTokenSetRequest{ACLToken: structs.ACLToken{AccessorID: tok.AccessorID, Description: "copy"}, WriteRequest: mgmt}, &clone)
	if clone.AccessorID == tok.AccessorID || clone.SecretID == tok.SecretID || clone.Description != "copy" || len(clone.Roles) != 1 {
		t.Fatalf("clone %+v", clone)
	}
	// A reader (acl:read, not write) sees every token without secrets;
	// management sees the secrets.
	for _, c := range []struct {
		token  string
		hidden bool
	}{{tok.SecretID, true}, {root.SecretID, false}} {
		var list structs.ACLTokenListResponse
		rpc(t, follower, structs.MethodACLTokenList, &structs.ACLTokenListRequest{QueryOptions: structs.QueryOptions{Token: c.token}}, &list)
		if len(list.Tokens) != 4 { // anonymous, bootstrap, reader, clone
			t.Fatalf("list: %d tokens", len(list.Tokens))
		}
		for _, lt := range list.Tokens {
			if (lt.SecretID == "<hidden>") != c.hidden {
				t.Fatalf("token %s secret hidden=%v, want %v", lt.AccessorID, lt.SecretID == "<hidden>", c.hidden)
			}
		}
	}
	var byRole structs.ACLTokenListResponse
	rpc(t, follower, structs.MethodACLTokenList, &structs.ACLTokenListRequest{Role: role.ID, QueryOptions: structs.QueryOptions{Token: root.SecretID}}, &byRole)
	if len(byRole.Tokens) != 2 {
		t.Fatalf("tokens by role: %d", len(byRole.Tokens))
	}
	rpc(t, follower, structs.MethodACLTokenDelete, &structs.ACLTokenDeleteRequest{TokenID: clone.AccessorID, WriteRequest: mgmt}, &struct{}{})
	if _, _, err := leader.srv.ResolveToken(context.Background(), clone.SecretID); !errors.Is(err, structs.ErrACLNotFound) {
		t.Fatalf("deleted token resolves: %v", err)
	}

	var short structs.ACLToken
	rpc(t, follower, structs.MethodACLTokenSet, &structs.ACLTokenSetRequest{Create: true, ACLToken: structs.ACLToken{ExpirationTTL: structs.Duration(200 * time.Millisecond)}, WriteRequest: mgmt}, &short)
	waitFor(t, 10*time.Second, "expired token reaped", func() bool {
		_, t2, _ := leader.srv.fsm.State().ACLTokenGetByAccessor(nil, short.AccessorID)
		return t2 == nil
	})
}

// TestACLBootstrapReset: Consul's reset procedure on an on-disk server:
// the reset index written to acl-bootstrap-reset allows one more
// bootstrap, and the file is consumed.
func TestACLBootstrapReset(t *testing.T) {
	servers := startTestCluster(t, 1, true, func(ts *testServer) { ts.acls = ACLConfig{Enabled: true} })
	s := servers[0].srv
	var first structs.ACLToken
	rpc(t, s, structs.MethodACLBootstrap, &structs.ACLBootstrapRequest{}, &first)
	reset := s.fsm.State().ACLBootstrapIndex()
	file := filepath.Join(servers[0].dataDir, aclBootstrapResetFile)
	if err := os.WriteFile(file, []byte(strconv.FormatUint(reset-1, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := callErr(s, structs.MethodACLBootstrap, &structs.ACLBootstrapRequest{}, &structs.ACLToken{}); !errors.Is(err, structs.ErrACLBootstrapNotAllowed) {
		t.Fatalf("bootstrap with a wrong reset index: %v", err)
	}
	if err := os.WriteFile(file, []byte(strconv.FormatUint(reset, 10)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var second structs.ACLToken
	rpc(t, s, structs.MethodACLBootstrap, &structs.ACLBootstrapRequest{BootstrapSecret: "7d7b1a4e-3b0e-4f5e-9d55-1f4f1b2c3d4e"}, &second)
	if second.SecretID != "7d7b1a4e-3b0e-4f5e-9d55-1f4f1b2c3d4e" || second.AccessorID == first.AccessorID {
		t.Fatalf("second bootstrap %+v", second)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("reset file left behind: %v", err)
	}
}
