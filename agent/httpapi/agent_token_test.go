package httpapi

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/server"
)

const rootToken = "8f6fd57c-6a6e-4e2f-8c3e-6a6d9b0c0001"

// startTokenServer is a real server with ACLs on (default deny, an initial
// management token) behind an HTTP API that holds store.
func startTokenServer(t *testing.T, store *token.Store, aclsOn bool) (*api.Client, string) {
	t.Helper()
	c, base, _ := startRealServerConfig(t, func(sc *server.Config) {
		sc.ACLs = server.ACLConfig{Enabled: aclsOn, DefaultPolicy: "deny", InitialManagement: rootToken}
	}, func(srv *server.Server, cfg *Config) {
		cfg.ACLsEnabled, cfg.Tokens = aclsOn, store
		if aclsOn {
			cfg.ACL = serverChecker(t, srv)
		}
	})
	if aclsOn {
		// The leader stores the initial management token after its barrier.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, _, err := c.ACL().TokenReadSelf(&api.QueryOptions{Token: rootToken}); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("initial management token never usable")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c, base
}

// serverChecker decides the agent's own endpoints with srv's own
// resolution, as a server agent does.
func serverChecker(t *testing.T, srv *server.Server) *authz.Checker {
	t.Helper()
	c, err := authz.New(authz.Config{Resolver: authz.ResolverFunc(srv.ResolveAuthorizer)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func putToken(t *testing.T, base, kind, secret, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, base+"/v1/agent/token/"+kind, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if secret != "" {
		req.Header.Set("X-Consul-Token", secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAgentTokenEndpoint: PUT /v1/agent/token/<kind> with Consul's
// statuses and bodies, every kind and legacy name, persisted to the data
// dir; a failure changes no token.
func TestAgentTokenEndpoint(t *testing.T) {
	dir := t.TempDir()
	store, err := token.New(token.Config{PersistDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, base := startTokenServer(t, store, true)
	get := map[token.Kind]func() string{
		token.KindDefault: store.UserToken, token.KindAgent: store.AgentToken,
		token.KindAgentRecovery: store.AgentRecoveryToken, token.KindReplication: store.ReplicationToken,
		token.KindConfigFileServiceRegistration: store.ConfigFileRegistrationToken, token.KindDNS: store.DNSToken,
	}
	for _, tc := range []struct {
		name, kind, secret, body string
		status                   int
		msg                      string     // the body starts with it
		set                      token.Kind // the kind that must now hold "v-"+name
	}{
		{name: "anonymous", kind: "agent", body: `{"Token": "x"}`, status: 403,
			msg: "Permission denied: anonymous token lacks permission 'acl:write'"},
		{name: "unknown secret", kind: "agent", secret: "nope", body: `{"Token": "x"}`, status: 403, msg: "ACL not found"},
		{name: "bad body", kind: "agent", secret: rootToken, body: `{"Token": 1}`, status: 400, msg: "Request decode failed"},
		{name: "unknown kind", kind: "user", secret: rootToken, body: `{"Token": "x"}`, status: 404, msg: `Token "user" is unknown`},
		// agent, config_file_service_registration and dns first: unset, they
		// follow the default token.
		{name: "agent", kind: "agent", secret: rootToken, status: 200, set: token.KindAgent},
		{name: "config_file_service_registration", kind: "config_file_service_registration", secret: rootToken, status: 200, set: token.KindConfigFileServiceRegistration},
		{name: "dns", kind: "dns", secret: rootToken, status: 200, set: token.KindDNS},
		{name: "default", kind: "default", secret: rootToken, status: 200, set: token.KindDefault},
		{name: "agent_recovery", kind: "agent_recovery", secret: rootToken, status: 200, set: token.KindAgentRecovery},
		{name: "replication", kind: "replication", secret: rootToken, status: 200, set: token.KindReplication},
		{name: "acl_token", kind: "acl_token", secret: rootToken, status: 200, set: token.KindDefault},
		{name: "acl_agent_token", kind: "acl_agent_token", secret: rootToken, status: 200, set: token.KindAgent},
		{name: "acl_agent_master_token", kind: "acl_agent_master_token", secret: rootToken, status: 200, set: token.KindAgentRecovery},
		{name: "acl_replication_token", kind: "acl_replication_token", secret: rootToken, status: 200, set: token.KindReplication},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.set != "" {
				body = `{"Token": "v-` + tc.name + `"}`
			}
			before := map[token.Kind]string{}
			for k, f := range get {
				before[k] = f()
			}
			status, msg := putToken(t, base, tc.kind, tc.secret, body)
			if status != tc.status || !strings.HasPrefix(msg, tc.msg) || (tc.status == 200 && msg != "") {
				t.Fatalf("status %d %q, want %d %q", status, msg, tc.status, tc.msg)
			}
			for k, f := range get {
				want := before[k]
				if k == tc.set {
					want = "v-" + tc.name
				}
				if got := f(); got != want {
					t.Errorf("%s token = %q, want %q", k, got, want)
				}
			}
		})
	}
	// Every kind set through the API is in the file, and a new store reads
	// them back.
	again, err := token.New(token.Config{PersistDir: dir, Configured: token.Tokens{Agent: "from-config"}})
	if err != nil {
		t.Fatal(err)
	}
	if again.AgentToken() != "v-acl_agent_token" || again.ReplicationToken() != "v-acl_replication_token" {
		t.Fatalf("persisted agent %q replication %q", again.AgentToken(), again.ReplicationToken())
	}

	// Once the default token is the management token, a request without a
	// token acts with it.
	if status, msg := putToken(t, base, "default", rootToken, `{"Token": "`+rootToken+`"}`); status != 200 {
		t.Fatalf("set default: %d %s", status, msg)
	}
	resp, err := http.Get(base + "/v1/acl/token/self")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), rootToken) {
		t.Fatalf("self with the default token: %d %s", resp.StatusCode, b)
	}
}

// TestAgentTokenErrors: 401 while ACLs are off, as Consul; a tokens file
// that cannot be written is a 500 and leaves the token in use.
func TestAgentTokenErrors(t *testing.T) {
	t.Run("acls off", func(t *testing.T) {
		store, _ := token.New(token.Config{})
		_, base := startTokenServer(t, store, false)
		if status, msg := putToken(t, base, "agent", "", `{"Token": "x"}`); status != 401 || msg != "ACL support disabled" {
			t.Fatalf("status %d %q", status, msg)
		}
		if store.AgentToken() != "" {
			t.Fatalf("token set while ACLs are off")
		}
	})
	t.Run("persist failure", func(t *testing.T) {
		store, _ := token.New(token.Config{PersistDir: filepath.Join(t.TempDir(), "gone"), Configured: token.Tokens{Agent: "before"}})
		_, base := startTokenServer(t, store, true)
		status, msg := putToken(t, base, "agent", rootToken, `{"Token": "after"}`)
		if status != 500 || !strings.HasPrefix(msg, "Failed to persist tokens - ") {
			t.Fatalf("status %d %q", status, msg)
		}
		if store.AgentToken() != "before" {
			t.Fatalf("agent token %q after a failed persist", store.AgentToken())
		}
	})
}

// TestConsulClientAgentTokens: the official client's agent token calls.
func TestConsulClientAgentTokens(t *testing.T) {
	store, _ := token.New(token.Config{})
	c, _ := startTokenServer(t, store, true)
	ag := c.Agent()
	w := &api.WriteOptions{Token: rootToken}
	for _, tc := range []struct {
		name string
		call func(string, *api.WriteOptions) (*api.WriteMeta, error)
		get  func() string
	}{
		{"default", ag.UpdateDefaultACLToken, store.UserToken},
		{"agent", ag.UpdateAgentACLToken, store.AgentToken},
		{"agent_recovery", ag.UpdateAgentRecoveryACLToken, store.AgentRecoveryToken},
		{"replication", ag.UpdateReplicationACLToken, store.ReplicationToken},
		{"config_file_service_registration", ag.UpdateConfigFileRegistrationToken, store.ConfigFileRegistrationToken},
	} {
		if _, err := tc.call("tok-"+tc.name, w); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := tc.get(); got != "tok-"+tc.name {
			t.Errorf("%s token = %q", tc.name, got)
		}
	}
	if _, err := ag.UpdateAgentACLToken("x", nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("anonymous update: %v", err)
	}
}
