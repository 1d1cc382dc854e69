package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/integration/harness"
)

// startACLTestAgent loads args and starts the agent, shut down when the
// test ends (or by the returned function, once).
func startACLTestAgent(t *testing.T, args []string) (*Agent, *config.RuntimeConfig, func()) {
	t.Helper()
	rc, _, err := config.Load(config.LoadOptions{Args: args, Logger: slog.New(slog.DiscardHandler), FlagOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Runtime: rc})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		if err := a.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
	t.Cleanup(stop)
	return a, rc, stop
}

// agentSelf is the status of GET /v1/agent/self on addr with token.
func agentSelf(t *testing.T, addr, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/agent/self", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Consul-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestClientAgentDownPolicy: a client agent whose one server is shut
// down decides its own endpoints (GET /v1/agent/self, agent:read) by
// acl.down_policy: extend-cache and async-cache keep a token it resolved
// before (expired: token_ttl is 1ms) and deny one it never saw, allow
// allows both, deny denies both; acl.tokens.agent_recovery is allowed in
// every case, as Consul's, without the servers. While the server runs, a deleted token
// is refused (the servers' "ACL not found" forgets it).
func TestClientAgentDownPolicy(t *testing.T) {
	const (
		root     = "5f0b7c1e-7a8e-4d5c-9f3e-2b1d0c0a0001"
		recovery = "5f0b7c1e-7a8e-4d5c-9f3e-2b1d0c0a0002"
	)
	for _, tc := range []struct {
		down         string
		seen, unseen int // statuses once the server is down
	}{
		{"extend-cache", 200, 403},
		{"async-cache", 200, 403},
		{"allow", 200, 200},
		{"deny", 403, 403},
	} {
		t.Run(tc.down, func(t *testing.T) {
			srvArgs := append(devArgs(t, "s1"), "-hcl", `acl { enabled = true, default_policy = "deny", tokens { initial_management = "`+root+`" } }`)
			_, src, stopServer := startACLTestAgent(t, srvArgs)
			c, err := api.NewClient(&api.Config{Address: src.HTTPAddrForClients(), Token: root})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the management token", func() bool {
				_, _, err := c.ACL().TokenReadSelf(nil)
				return err == nil
			})
			pol, _, err := c.ACL().PolicyCreate(&api.ACLPolicy{Name: "agent-read", Rules: `agent_prefix "" { policy = "read" }`}, nil)
			if err != nil {
				t.Fatal(err)
			}
			mk := func() string {
				tok, _, err := c.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return tok.SecretID
			}
			seen, unseen, deleted := mk(), mk(), mk()

			ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"-node", "c1", "-data-dir", t.TempDir(), "-bind", "127.0.0.1", "-client", "127.0.0.1",
				"-retry-join", "127.0.0.1:" + strconv.Itoa(src.Ports.SerfLAN), "-dns-port", "-1",
				"-hcl", `acl { enabled = true, default_policy = "deny", down_policy = "` + tc.down + `", token_ttl = "1ms", policy_ttl = "1ms", role_ttl = "1ms", tokens { agent_recovery = "` + recovery + `" } }`,
				"-hcl", `performance { rpc_hold_timeout = "300ms" }`}
			for _, flag := range []string{"-http-port", "-serf-lan-port", "-grpc-port"} {
				p, err := ports.Port()
				if err != nil {
					t.Fatal(err)
				}
				args = append(args, flag, strconv.Itoa(p))
			}
			_, crc, _ := startACLTestAgent(t, args)
			addr := crc.HTTPAddrForClients()
			waitFor(t, "the client agent to reach the server", func() bool { return agentSelf(t, addr, seen) == 200 })
			if got := agentSelf(t, addr, deleted); got != 200 {
				t.Fatalf("token before deletion: %d", got)
			}
			if _, err := c.ACL().TokenDelete(accessorOf(t, c, deleted), nil); err != nil {
				t.Fatal(err)
			}
			// async-cache may answer once more from the expired entry while
			// its refresh learns of the deletion.
			waitFor(t, "the deleted token refused", func() bool { return agentSelf(t, addr, deleted) == 403 })

			stopServer()
			time.Sleep(5 * time.Millisecond) // past token_ttl: the entries are expired
			if got := agentSelf(t, addr, seen); got != tc.seen {
				t.Fatalf("token resolved before: %d, want %d", got, tc.seen)
			}
			if got := agentSelf(t, addr, unseen); got != tc.unseen {
				t.Fatalf("token never resolved: %d, want %d", got, tc.unseen)
			}
			if got := agentSelf(t, addr, recovery); got != 200 {
				t.Fatalf("agent_recovery token: %d, want 200 whatever the down policy", got)
			}
		})
	}
}

func accessorOf(t *testing.T, c *api.Client, secret string) string {
	t.Helper()
	tok, _, err := c.ACL().TokenReadSelf(&api.QueryOptions{Token: secret})
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessorID
}
