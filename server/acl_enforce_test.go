package server

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

// aclTestServer starts one server with ACLs on and default deny,
// bootstrapped, and returns it with a token per rules given.
func aclTestServer(t *testing.T, rules map[string]string) (*Server, string, map[string]*structs.ACLToken) {
	t.Helper()
	servers := startTestCluster(t, 1, false, func(ts *testServer) {
		ts.acls = ACLConfig{Enabled: true, DefaultPolicy: "deny"}
	})
	s := waitForLeader(t, servers, 30*time.Second).srv
	waitFor(t, 10*time.Second, "built-in ACL objects", func() bool {
		_, a, _ := s.fsm.State().ACLTokenGetByAccessor(nil, structs.ACLTokenAnonymousID)
		return a != nil
	})
	var root structs.ACLToken
	rpc(t, s, structs.MethodACLBootstrap, &structs.ACLBootstrapRequest{}, &root)
	mgmt := structs.WriteRequest{Token: root.SecretID}
	toks := map[string]*structs.ACLToken{}
	for name, r := range rules {
		var pol structs.ACLPolicy
		rpc(t, s, structs.MethodACLPolicySet, &structs.ACLPolicySetRequest{Policy: structs.ACLPolicy{Name: name, Rules: r}, WriteRequest: mgmt}, &pol)
		var tok structs.ACLToken
		rpc(t, s, structs.MethodACLTokenSet, &structs.ACLTokenSetRequest{Create: true, ACLToken: structs.ACLToken{Policies: []structs.ACLLink{{ID: pol.ID}}}, WriteRequest: mgmt}, &tok)
		toks[name] = &tok
	}
	return s, root.SecretID, toks
}

func denial(tok *structs.ACLToken, perm, seg string) string {
	if seg == "" {
		return fmt.Sprintf("Permission denied: token with AccessorID '%s' lacks permission '%s'", tok.AccessorID, perm)
	}
	return fmt.Sprintf("Permission denied: token with AccessorID '%s' lacks permission '%s' on %q", tok.AccessorID, perm, seg)
}

// TestACLEnforcement: every family of endpoint, with a token that lacks
// the rule (Consul's 403 text, nothing stored) and one that has it.
func TestACLEnforcement(t *testing.T) {
	s, root, toks := aclTestServer(t, map[string]string{
		"weak": `key_prefix "app/" { policy = "read" }
node_prefix "" { policy = "read" }
service "api" { policy = "write" }`,
		"strong": `key_prefix "" { policy = "write" }
key "app/locked" { policy = "deny" }
node_prefix "" { policy = "write" }
service_prefix "" {
  policy = "write"
  intentions = "write"
}
session_prefix "" { policy = "write" }
operator = "write"`,
	})
	roots := waitForCA(t, s)
	weak, strong := toks["weak"], toks["strong"]
	kvPutAs := func(tok, key string) error {
		return callErr(s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: key, Value: []byte("v")}, WriteRequest: structs.WriteRequest{Token: tok}}, new(bool))
	}
	csr, _, err := ca.NewLeafCSR(connect.NewServiceID(roots.TrustDomain, "dc1", "web"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		call   func(tok string) error
		denied string // the weak token's denial
		stored func() bool
	}{
		{"kv put", func(tok string) error { return kvPutAs(tok, "app/x") }, denial(weak, "key:write", "app/x"),
			func() bool { _, e, _ := s.fsm.State().KVSGet(nil, "app/x"); return e != nil }},
		{"kv get", func(tok string) error {
			return callErr(s, structs.MethodKVSGet, &structs.KeyRequest{Key: "other", QueryOptions: structs.QueryOptions{Token: tok}}, &structs.IndexedDirEntries{})
		}, denial(weak, "key:read", "other"), nil},
		{"catalog register", func(tok string) error {
			return callErr(s, structs.MethodCatalogRegister, &structs.RegisterRequest{Node: "n1", Address: "127.0.0.1", Service: &structs.NodeService{Service: "web", Port: 80}, WriteRequest: structs.WriteRequest{Token: tok}}, &struct{}{})
		}, denial(weak, "node:write", "n1"),
			func() bool { _, n, _ := s.fsm.State().GetNode(nil, "n1"); return n != nil }},
		{"session create", func(tok string) error {
			return callErr(s, structs.MethodSessionApply, &structs.SessionRequest{Op: structs.SessionCreate, Session: structs.Session{Node: "n1"}, WriteRequest: structs.WriteRequest{Token: tok}}, new(string))
		}, denial(weak, "session:write", "n1"), nil},
		{"operator raft", func(tok string) error {
			return callErr(s, structs.MethodOperatorRaftConfig, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{Token: tok}}, &structs.RaftConfigurationResponse{})
		}, denial(weak, "operator:read", ""), nil},
		{"intention", func(tok string) error {
			return callErr(s, structs.MethodIntentionApply, &structs.IntentionRequest{Op: structs.IntentionOpCreate, Intention: &structs.Intention{SourceName: "web", DestinationName: "db", Action: structs.IntentionActionAllow}, WriteRequest: structs.WriteRequest{Token: tok}}, new(string))
		}, denial(weak, "intention:write", "db"), nil},
		{"CA sign", func(tok string) error {
			return callErr(s, structs.MethodConnectCASign, &structs.CASignRequest{CSR: csr, WriteRequest: structs.WriteRequest{Token: tok}}, &structs.IssuedCert{})
		}, denial(weak, "service:write", "web"), nil},
		{"proxy-defaults", func(tok string) error {
			return callErr(s, structs.MethodConfigEntryApply, &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert, Entry: &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal}, WriteRequest: structs.WriteRequest{Token: tok}}, new(bool))
		}, denial(weak, "mesh:write", ""), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(weak.SecretID)
			if !errors.Is(err, structs.ErrPermissionDenied) || err.Error() != c.denied {
				t.Fatalf("weak token: %v, want %q", err, c.denied)
			}
			if c.stored != nil && c.stored() {
				t.Fatal("a denied write was stored")
			}
			if err := c.call(strong.SecretID); err != nil {
				t.Fatalf("strong token: %v", err)
			}
			if c.stored != nil && !c.stored() {
				t.Fatal("an allowed write was not stored")
			}
		})
	}

	t.Run("kv delete-tree needs write on everything under the prefix", func(t *testing.T) {
		if err := kvPutAs(root, "app/locked"); err != nil {
			t.Fatal(err)
		}
		err := callErr(s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVDeleteTree, DirEnt: structs.DirEntry{Key: "app/"}, WriteRequest: structs.WriteRequest{Token: strong.SecretID}}, new(bool))
		if want := denial(strong, "key:write", "app/"); err == nil || err.Error() != want {
			t.Fatalf("%v, want %q", err, want)
		}
	})

	t.Run("lists are filtered, and say so except to anonymous", func(t *testing.T) {
		if err := kvPutAs(root, "other/y"); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			token    string
			keys     int
			filtered bool
		}{{weak.SecretID, 2, true}, {"", 0, false}, {root, 3, false}} {
			var out structs.IndexedKeyList
			rpc(t, s, structs.MethodKVSListKeys, &structs.KeyListRequest{QueryOptions: structs.QueryOptions{Token: c.token}}, &out)
			if len(out.Keys) != c.keys || out.ResultsFilteredByACLs != c.filtered {
				t.Errorf("token %q: keys %v filtered %v, want %d keys, filtered %v", c.token, out.Keys, out.ResultsFilteredByACLs, c.keys, c.filtered)
			}
		}
		var svcs structs.IndexedServices
		rpc(t, s, structs.MethodCatalogListServices, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{Token: weak.SecretID}}, &svcs)
		if _, ok := svcs.Services["web"]; ok || !svcs.ResultsFilteredByACLs {
			t.Errorf("weak token sees services %v (filtered %v)", svcs.Services, svcs.ResultsFilteredByACLs)
		}
	})

	t.Run("txn is all or nothing on permissions", func(t *testing.T) {
		var out structs.TxnResponse
		rpc(t, s, structs.MethodTxnApply, &structs.TxnRequest{Ops: structs.TxnOps{
			{KV: &structs.TxnKVOp{Verb: structs.KVSet, DirEnt: structs.DirEntry{Key: "app/t1", Value: []byte("1")}}},
			{KV: &structs.TxnKVOp{Verb: structs.KVSet, DirEnt: structs.DirEntry{Key: "app/locked", Value: []byte("1")}}},
		}, WriteRequest: structs.WriteRequest{Token: strong.SecretID}}, &out)
		if len(out.Errors) != 1 || out.Errors[0].OpIndex != 1 || out.Errors[0].What != denial(strong, "key:write", "app/locked") {
			t.Fatalf("errors %+v", out.Errors)
		}
		if _, e, _ := s.fsm.State().KVSGet(nil, "app/t1"); e != nil {
			t.Fatal("a transaction with a denied operation was applied")
		}
	})

	t.Run("txn reads are filtered, not refused", func(t *testing.T) {
		rpc(t, s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "secret/x", Value: []byte("1")}, WriteRequest: structs.WriteRequest{Token: root}}, new(bool))
		rpc(t, s, structs.MethodKVSApply, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "app/r", Value: []byte("1")}, WriteRequest: structs.WriteRequest{Token: root}}, new(bool))
		gets := structs.TxnOps{
			{KV: &structs.TxnKVOp{Verb: structs.KVGet, DirEnt: structs.DirEntry{Key: "app/r"}}},
			{KV: &structs.TxnKVOp{Verb: structs.KVGet, DirEnt: structs.DirEntry{Key: "secret/x"}}},
		}
		for _, c := range []struct {
			token string
			keys  []string
		}{{toks["weak"].SecretID, []string{"app/r"}}, {root, []string{"app/r", "secret/x"}}} {
			var out structs.TxnResponse
			rpc(t, s, structs.MethodTxnRead, &structs.TxnReadRequest{Ops: gets, QueryOptions: structs.QueryOptions{Token: c.token}}, &out)
			var keys []string
			for _, r := range out.Results {
				keys = append(keys, r.KV.Key)
			}
			if len(out.Errors) != 0 || fmt.Sprint(keys) != fmt.Sprint(c.keys) {
				t.Errorf("results %v errors %+v, want %v and no error", keys, out.Errors, c.keys)
			}
		}
		// A check reveals the key by its outcome alone: it needs key:read.
		var out structs.TxnResponse
		rpc(t, s, structs.MethodTxnRead, &structs.TxnReadRequest{Ops: structs.TxnOps{
			{KV: &structs.TxnKVOp{Verb: structs.KVCheckIndex, DirEnt: structs.DirEntry{Key: "secret/x", RaftIndex: structs.RaftIndex{ModifyIndex: 1}}}},
		}, QueryOptions: structs.QueryOptions{Token: toks["weak"].SecretID}}, &out)
		if len(out.Errors) != 1 || out.Errors[0].What != denial(toks["weak"], "key:read", "secret/x") {
			t.Errorf("check-index without key:read: errors %+v", out.Errors)
		}
	})

	t.Run("snapshots need management", func(t *testing.T) {
		err := callErr(s, structs.MethodSnapshotSave, &structs.SnapshotSaveRequest{QueryOptions: structs.QueryOptions{Token: strong.SecretID}}, &structs.SnapshotSaveResponse{})
		if want := denial(strong, "acl:write", ""); err == nil || err.Error() != want {
			t.Fatalf("%v, want %q", err, want)
		}
	})
}
