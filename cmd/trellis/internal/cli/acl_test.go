package cli

import (
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/server"
)

// startACLAgent is a real in-process server with ACLs on (default deny)
// behind the real HTTP API and token store; it returns the HTTP address.
func startACLAgent(t *testing.T) (string, *token.Store) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		NodeName: "node1", NodeID: "00000000-0000-0000-0000-00000000000a", Datacenter: "dc1",
		InMemory: true, Bootstrap: true, Listener: ln, Advertise: ln.Addr().(*net.TCPAddr),
		ACLs: server.ACLConfig{Enabled: true, DefaultPolicy: "deny"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	deadline := time.Now().Add(10 * time.Second)
	for !srv.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	store, _ := token.New(token.Config{})
	checker, err := authz.New(authz.Config{Resolver: authz.ResolverFunc(srv.ResolveAuthorizer)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := httpapi.New(httpapi.Config{RPC: srv, NodeName: "node1", Datacenter: "dc1", ACLsEnabled: true, Tokens: store, ACL: checker})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return strings.TrimPrefix(hs.URL, "http://"), store
}

var secretLine = regexp.MustCompile(`(?m)^SecretID:\s+(\S+)$`)

// TestACLCommands runs the acl commands in order against a real server
// with ACLs on: bootstrap, policies, roles, tokens through their life,
// set-agent-token, with the token from -token, -token-file,
// CONSUL_HTTP_TOKEN and CONSUL_HTTP_TOKEN_FILE.
func TestACLCommands(t *testing.T) {
	addr, store := startACLAgent(t)
	dir := t.TempDir()
	vars := map[string]string{"CONSUL_HTTP_ADDR": addr}
	run := func(args ...string) (int, string, string) { return runCLI(args, vars, "") }

	var code int
	var out, errOut string
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The leader creates the global-management policy after its
		// barrier; bootstrap is refused until then.
		if code, out, errOut = run("acl", "bootstrap"); code == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != 0 || !strings.Contains(out, "Policies:\n   00000000-0000-0000-0000-000000000001 - global-management\n") {
		t.Fatalf("bootstrap: %d %s %s", code, out, errOut)
	}
	root := secretLine.FindStringSubmatch(out)[1]
	if code, _, errOut := run("acl", "bootstrap"); code != 1 || !strings.Contains(errOut, "Failed ACL bootstrapping: Unexpected response code: 403 (Permission denied: ACL bootstrap no longer allowed") {
		t.Fatalf("second bootstrap: %d %s", code, errOut)
	}
	if code, _, errOut := run("acl", "token", "list"); code != 1 || !strings.Contains(errOut, "Failed to retrieve the token list: Unexpected response code: 403 (Permission denied: anonymous token lacks permission 'acl:read'") {
		t.Fatalf("anonymous list: %d %s", code, errOut)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(root+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.hcl")
	if err := os.WriteFile(rules, []byte(`key_prefix "app/" { policy = "write" }`), 0o600); err != nil {
		t.Fatal(err)
	}

	// The token from each of its four sources.
	for _, how := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"-token", []string{"-token", root}, nil},
		{"-token-file", []string{"-token-file", tokenFile}, nil},
		{"CONSUL_HTTP_TOKEN", nil, map[string]string{"CONSUL_HTTP_TOKEN": root}},
		{"CONSUL_HTTP_TOKEN_FILE", nil, map[string]string{"CONSUL_HTTP_TOKEN_FILE": tokenFile}},
	} {
		v := map[string]string{"CONSUL_HTTP_ADDR": addr}
		for k, val := range how.env {
			v[k] = val
		}
		code, out, errOut := runCLI(append([]string{"acl", "token", "read", "-self"}, how.args...), v, "")
		if code != 0 || !strings.Contains(out, "SecretID:         "+root+"\n") {
			t.Fatalf("%s: %d %s %s", how.name, code, out, errOut)
		}
	}
	vars["CONSUL_HTTP_TOKEN"] = root

	steps := []struct {
		name  string
		args  []string
		stdin string
		want  []string // each in stdout
		fail  string   // stderr, for a failing step
	}{
		{name: "policy create", args: []string{"acl", "policy", "create", "-name", "app", "-description", "app kv", "-rules", "@" + rules},
			want: []string{"Name:         app\n", "Description:  app kv\n", "Rules:\nkey_prefix \"app/\" { policy = \"write\" }\n"}},
		{name: "policy create from stdin", args: []string{"acl", "policy", "create", "-name", "ro", "-rules", "-"}, stdin: `node_prefix "" { policy = "read" }`,
			want: []string{"Name:         ro\n"}},
		{name: "policy create bad rules", args: []string{"acl", "policy", "create", "-name", "bad", "-rules", `key_prefix "" { policy = "maybe" }`},
			fail: "Failed to create new policy: Unexpected response code: 500 (Invalid Policy"},
		{name: "policy read by name", args: []string{"acl", "policy", "read", "-name", "app"}, want: []string{"Description:  app kv\n"}},
		{name: "policy update", args: []string{"acl", "policy", "update", "-name", "app", "-description", "changed"},
			want: []string{"Description:  changed\n", "Rules:\nkey_prefix"}},
		{name: "policy list", args: []string{"acl", "policy", "list"},
			want: []string{"global-management:\n   ID:           00000000-0000-0000-0000-000000000001\n", "app:\n", "ro:\n"}},
		{name: "policy list json", args: []string{"acl", "policy", "list", "-format", "json"}, want: []string{`"Name": "global-management"`}},
		{name: "role create", args: []string{"acl", "role", "create", "-name", "readers", "-policy-name", "ro", "-service-identity", "web:dc1"},
			want: []string{"Name:         readers\n", "Policies:\n", " - ro\n", "Service Identities:\n   web (Datacenters: dc1)\n"}},
		{name: "role read", args: []string{"acl", "role", "read", "-name", "readers"}, want: []string{"Name:         readers\n"}},
		{name: "role update", args: []string{"acl", "role", "update", "-name", "readers", "-description", "r", "-node-identity", "n1:dc1"},
			want: []string{"Description:  r\n", "Node Identities:\n   n1 (Datacenter: dc1)\n", " - ro\n"}},
		{name: "role list", args: []string{"acl", "role", "list"}, want: []string{"readers:\n   ID:  "}},
		{name: "token create", args: []string{"acl", "token", "create", "-description", "app token", "-policy-name", "app", "-role-name", "readers",
			"-node-identity", "n2:dc1", "-templated-policy", "builtin/service", "-var", "name:api", "-accessor", "a1a1a1a1-0000-4000-8000-000000000001", "-secret", "b2b2b2b2-0000-4000-8000-000000000002"},
			want: []string{"AccessorID:       a1a1a1a1-0000-4000-8000-000000000001\n", "SecretID:         b2b2b2b2-0000-4000-8000-000000000002\n",
				"Description:      app token\n", "Local:            false\n", "Create Time:      ", " - app\n", "Roles:\n", " - readers\n",
				"Node Identities:\n   n2 (Datacenter: dc1)\n", "Templated Policies:\n   builtin/service\n      Name: api\n"}},
		{name: "token create expiring local", args: []string{"acl", "token", "create", "-local", "-expires-ttl", "1h", "-service-identity", "db"},
			want: []string{"Local:            true\n", "Expiration Time:  ", "Service Identities:\n   db (Datacenters: all)\n"}},
		{name: "token read by prefix", args: []string{"acl", "token", "read", "-accessor-id", "a1a1a1a1"}, want: []string{"Description:      app token\n"}},
		{name: "token read json", args: []string{"acl", "token", "read", "-id", "a1a1a1a1-0000-4000-8000-000000000001", "-format", "json"},
			want: []string{`"AccessorID": "a1a1a1a1-0000-4000-8000-000000000001"`}},
		{name: "token update", args: []string{"acl", "token", "update", "-accessor-id", "a1a1a1a1", "-description", "new", "-policy-name", "ro"},
			want: []string{"Description:      new\n", " - ro\n", " - readers\n"}},
		{name: "token clone", args: []string{"acl", "token", "clone", "-accessor-id", "a1a1a1a1", "-description", "copy"},
			want: []string{"Description:      copy\n", " - ro\n"}},
		{name: "token list", args: []string{"acl", "token", "list"},
			want: []string{"AccessorID:       a1a1a1a1-0000-4000-8000-000000000001\n", "Description:      Anonymous Token\n", "Description:      copy\n"}},
		{name: "token delete", args: []string{"acl", "token", "delete", "-accessor-id", "a1a1a1a1-0000-4000-8000-000000000001"},
			want: []string{"Token \"a1a1a1a1-0000-4000-8000-000000000001\" deleted successfully\n"}},
		{name: "token read deleted", args: []string{"acl", "token", "read", "-accessor-id", "a1a1a1a1-0000-4000-8000-000000000001"},
			fail: "Error reading token \"a1a1a1a1-0000-4000-8000-000000000001\": Unexpected response code: 403 (ACL not found)"},
		{name: "token read without id", args: []string{"acl", "token", "read"}, fail: "Must specify the -accessor-id parameter"},
		{name: "role delete", args: []string{"acl", "role", "delete", "-name", "readers"}, want: []string{"deleted successfully\n"}},
		{name: "policy delete", args: []string{"acl", "policy", "delete", "-name", "app"}, want: []string{"deleted successfully\n"}},
		{name: "policy read deleted", args: []string{"acl", "policy", "read", "-name", "app"}, fail: "Error reading policy"},
		{name: "set-agent-token", args: []string{"acl", "set-agent-token", "agent", "agent-secret"}, want: []string{"ACL token \"agent\" set successfully\n"}},
		{name: "set-agent-token recovery", args: []string{"acl", "set-agent-token", "recovery", "rec-secret"}, want: []string{"ACL token \"recovery\" set successfully\n"}},
		{name: "set-agent-token unknown", args: []string{"acl", "set-agent-token", "user", "x"}, fail: "Unknown token type: user"},
		{name: "bad format", args: []string{"acl", "token", "list", "-format", "yaml"}, fail: "Invalid format"},
	}
	for _, s := range steps {
		code, out, errOut := runCLI(s.args, vars, s.stdin)
		if s.fail != "" {
			if code != 1 || !strings.Contains(errOut, s.fail) {
				t.Errorf("%s: code %d stderr %q, want 1 and %q", s.name, code, errOut, s.fail)
			}
			continue
		}
		if code != 0 {
			t.Errorf("%s: code %d: %s", s.name, code, errOut)
			continue
		}
		for _, w := range s.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", s.name, w, out)
			}
		}
	}
	if store.AgentToken() != "agent-secret" || store.AgentRecoveryToken() != "rec-secret" {
		t.Errorf("agent tokens %q %q", store.AgentToken(), store.AgentRecoveryToken())
	}
}
