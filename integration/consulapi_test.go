package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/trellis-mesh/trellis/integration/harness"
)

// apiEndpoint is one agent the official client talks to: its HTTP address
// and its node name (sessions are created on that node and need its
// serfHealth check).
type apiEndpoint struct {
	Addr string
	Node string
}

func endpointOf(a *harness.Agent) apiEndpoint { return apiEndpoint{Addr: a.HTTPAddr(), Node: a.Node()} }

// TestConsulAPIDev runs the official-client scenario against `agent -dev`.
func TestConsulAPIDev(t *testing.T) {
	_, dev := startDev(t)
	runConsulAPIScenario(t, endpointOf(dev))
}

// TestConsulAPICluster runs the same scenario against a 3-server cluster,
// through the two followers: every write is forwarded to the leader, and a
// blocking read on one follower must wake on a write sent to the other.
func TestConsulAPICluster(t *testing.T) {
	c, _ := startCluster(t, 3)
	followers, err := c.Followers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(followers) != 2 {
		t.Fatalf("%d followers, want 2", len(followers))
	}
	runConsulAPIScenario(t, endpointOf(followers[0]), endpointOf(followers[1]))
}

// runConsulAPIScenario is the one official-client scenario, run against
// any set of agents (a -dev agent, a cluster): the first endpoint serves
// most calls; the last one sends the writes that must wake blocking reads
// and is where the second lock holder lives. With a single endpoint both
// roles share it.
func runConsulAPIScenario(t *testing.T, eps ...apiEndpoint) {
	t.Helper()
	if len(eps) == 0 {
		t.Fatal("runConsulAPIScenario needs an endpoint")
	}
	first, last := eps[0], eps[len(eps)-1]
	primary := newConsulClient(t, first.Addr)
	secondary := newConsulClient(t, last.Addr)

	// Sessions default to the agent's node and its serfHealth check, so
	// each node must be registered and healthy first (sdk/testutil waits for
	// the same thing).
	for _, ep := range eps {
		waitSerfHealth(t, newConsulClient(t, ep.Addr), ep.Node)
	}

	t.Run("kv", func(t *testing.T) { apiKV(t, primary) })
	t.Run("kv-cas", func(t *testing.T) { apiKVCAS(t, primary) })
	t.Run("txn", func(t *testing.T) { apiTxn(t, primary) })
	t.Run("catalog", func(t *testing.T) { apiCatalog(t, primary) })
	t.Run("health", func(t *testing.T) { apiHealth(t, primary) })
	t.Run("blocking", func(t *testing.T) { apiBlocking(t, primary, secondary) })
	t.Run("lock-session-destroyed", func(t *testing.T) { apiLockSessionDestroyed(t, primary, secondary) })
	t.Run("lock-session-ttl", func(t *testing.T) { apiLockSessionTTL(t, primary, secondary) })
	t.Run("lock-delay", func(t *testing.T) { apiLockDelay(t, primary, secondary) })
}

// newConsulClient returns an official client for addr. Environment
// settings such as CONSUL_HTTP_SSL must not redirect it, so scheme and
// address are set explicitly.
func newConsulClient(t *testing.T, addr string) *api.Client {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = addr
	cfg.Scheme = "http"
	cfg.Token = ""
	if cfg.Transport != nil {
		t.Cleanup(cfg.Transport.CloseIdleConnections)
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitSerfHealth waits until node has a passing serfHealth check.
func waitSerfHealth(t *testing.T, c *api.Client, node string) {
	t.Helper()
	eventually(t, 30*time.Second, "serfHealth of "+node, func() error {
		checks, _, err := c.Health().Node(node, nil)
		if err != nil {
			return err
		}
		for _, ch := range checks {
			if ch.CheckID == "serfHealth" {
				if ch.Status != api.HealthPassing {
					return fmt.Errorf("serfHealth is %s", ch.Status)
				}
				return nil
			}
		}
		return fmt.Errorf("no serfHealth check among %d checks", len(checks))
	})
}

// apiContext bounds one official-client subtest.
func apiContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
