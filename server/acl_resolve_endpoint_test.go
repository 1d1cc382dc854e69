package server

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestACLResolveEndpoints: a token resolves itself (its links, its
// SecretID redacted, the servers' default policy) and reads the policies
// and roles it links, through its roles too, and no others unless it may
// read ACLs; an unknown token is "ACL not found".
func TestACLResolveEndpoints(t *testing.T) {
	s, root, toks := aclTestServer(t, map[string]string{"kv": `key_prefix "a" { policy = "read" }`, "other": `node_prefix "" { policy = "read" }`})
	mgmt := structs.WriteRequest{Token: root}
	kv, other := toks["kv"].Policies[0].ID, toks["other"].Policies[0].ID
	var role structs.ACLRole
	rpc(t, s, structs.MethodACLRoleSet, &structs.ACLRoleSetRequest{Role: structs.ACLRole{Name: "r", Policies: []structs.ACLLink{{ID: other}}}, WriteRequest: mgmt}, &role)
	var viaRole structs.ACLToken
	rpc(t, s, structs.MethodACLTokenSet, &structs.ACLTokenSetRequest{Create: true, ACLToken: structs.ACLToken{Roles: []structs.ACLLink{{ID: role.ID}}}, WriteRequest: mgmt}, &viaRole)

	for _, tc := range []struct {
		name     string
		secret   string
		accessor string
		policies []string // of {kv, other} that PolicyResolve returns
		roles    []string // of {role} that RoleResolve returns
	}{
		{"direct policy", toks["kv"].SecretID, toks["kv"].AccessorID, []string{kv}, nil},
		{"through a role", viaRole.SecretID, viaRole.AccessorID, []string{other}, []string{role.ID}},
		{"management reads all", root, "", []string{kv, other}, []string{role.ID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := structs.QueryOptions{Token: tc.secret}
			var self structs.ACLTokenResolveResponse
			rpc(t, s, structs.MethodACLTokenResolve, &structs.ACLTokenResolveRequest{QueryOptions: q}, &self)
			if self.Token == nil || self.Token.SecretID == tc.secret || self.DefaultPolicy != "deny" {
				t.Fatalf("resolve: %+v (default %q)", self.Token, self.DefaultPolicy)
			}
			if tc.accessor != "" && self.Token.AccessorID != tc.accessor {
				t.Fatalf("resolved accessor %s, want %s", self.Token.AccessorID, tc.accessor)
			}
			var pols structs.ACLPolicyBatchResponse
			rpc(t, s, structs.MethodACLPolicyResolve, &structs.ACLPolicyBatchGetRequest{PolicyIDs: []string{kv, other, "00000000-0000-4000-8000-000000000404"}, QueryOptions: q}, &pols)
			var gotP []string
			for _, p := range pols.Policies {
				gotP = append(gotP, p.ID)
			}
			if !slices.Equal(gotP, tc.policies) {
				t.Fatalf("policies %v, want %v", gotP, tc.policies)
			}
			var roles structs.ACLRoleBatchResponse
			rpc(t, s, structs.MethodACLRoleResolve, &structs.ACLRoleBatchGetRequest{RoleIDs: []string{role.ID}, QueryOptions: q}, &roles)
			var gotR []string
			for _, r := range roles.Roles {
				gotR = append(gotR, r.ID)
			}
			if !slices.Equal(gotR, tc.roles) {
				t.Fatalf("roles %v, want %v", gotR, tc.roles)
			}
		})
	}
	unknown := structs.QueryOptions{Token: "7d0f3a52-2222-4000-8000-00000000f00d"}
	err := callErr(s, structs.MethodACLTokenResolve, &structs.ACLTokenResolveRequest{QueryOptions: unknown}, &structs.ACLTokenResolveResponse{})
	if !errors.Is(err, structs.ErrACLNotFound) {
		t.Fatalf("unknown token: %v, want ACL not found", err)
	}
	err = callErr(s, structs.MethodACLPolicyResolve, &structs.ACLPolicyBatchGetRequest{PolicyIDs: []string{kv}, QueryOptions: unknown}, &structs.ACLPolicyBatchResponse{})
	if !errors.Is(err, structs.ErrACLNotFound) {
		t.Fatalf("unknown token's policies: %v, want ACL not found", err)
	}
}

// TestCAWaitsForACLs: the leader sets up ACLs before the Connect CA, as
// Consul's does, so that once the CA roots are served (what sdk/testutil
// waits for) the initial management token and the built-in policies exist.
func TestCAWaitsForACLs(t *testing.T) {
	const initial = "3c5e2b91-3333-4000-8000-00000000cafe"
	servers := startTestCluster(t, 1, false, func(ts *testServer) {
		ts.acls = ACLConfig{Enabled: true, DefaultPolicy: "deny", InitialManagement: initial}
	})
	s := waitForLeader(t, servers, 30*time.Second).srv
	waitFor(t, 20*time.Second, "the CA roots", func() bool {
		var roots structs.IndexedCARoots
		err := structs.MethodConnectCARoots.Call(context.Background(), s, &structs.DCSpecificRequest{}, &roots)
		return err == nil && roots.ActiveRootID != ""
	})
	st := s.fsm.State()
	_, tok, err := st.ACLTokenGetBySecret(nil, initial)
	if err != nil || tok == nil {
		t.Fatalf("CA roots served before the initial management token: %v %v", tok, err)
	}
	for _, p := range structs.ACLBuiltinPolicies() {
		if _, got, _ := st.ACLPolicyGetByID(nil, p.ID); got == nil || got.Rules != p.Rules {
			t.Fatalf("built-in policy %s: %+v", p.Name, got)
		}
	}
}
