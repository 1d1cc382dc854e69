package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// failureDetectTimeout is the bound for a killed client's node to
// turn critical in the catalog.
const failureDetectTimeout = 30 * time.Second

// TestClientKill: kill -9 of a client agent. Within 30 s its node's
// serfHealth check is critical on every server, the servers' members list
// has it failed, and its services leave the ?passing results (while the
// other client's stay). Restarted with the same flags and data dir, it
// rejoins, and its services (one with an HTTP check, one with a sidecar)
// come back passing from its data dir without being registered again; the
// sidecar keeps its port.
func TestClientKill(t *testing.T) {
	c, _ := startAgentCluster(t, agentClusterConfig{clients: 2})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	victim, survivor := c.Clients()[0], c.Clients()[1]
	target := newCheckTarget(t, true)

	const name = "s4-api"
	plainID, checkedID := "s4-api-plain", "s4-api-checked"
	defs := []struct {
		agent *harness.Agent
		def   map[string]any
	}{
		{victim, map[string]any{"Name": name, "ID": plainID, "Port": 9100,
			"Connect": map[string]any{"SidecarService": map[string]any{}}}},
		{victim, map[string]any{"Name": name, "ID": checkedID, "Port": 9101,
			"Check": map[string]any{"HTTP": target.url(), "Interval": "1s"}}},
		{survivor, map[string]any{"Name": name, "ID": "s4-api-survivor", "Port": 9102}},
	}
	for _, d := range defs {
		if err := registerService(ctx, rc, d.agent.HTTPAddr(), d.def); err != nil {
			t.Fatal(err)
		}
	}
	allPassing := func(ctx context.Context) error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			var errs []error
			for _, d := range defs {
				errs = append(errs, serviceInHealth(ctx, rc, s.HTTPAddr(), name, d.agent.Node(), d.def["ID"].(string), passingQuery, "passing"))
			}
			return errors.Join(errs...)
		})
	}
	eventually(t, syncTimeout, "every instance passing before the kill", func() error { return allPassing(ctx) })
	before, err := agentServices(ctx, rc, victim.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	sidecarPort := before[plainID+"-sidecar-proxy"].Port

	killedAt := time.Now()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s (pid %d)", victim.Node(), victim.PID())

	_, err = pollUntil(ctx, failureDetectTimeout, 200*time.Millisecond, func(ctx context.Context) error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			var errs []error
			errs = append(errs, nodeSerfHealth(ctx, rc, s.HTTPAddr(), victim.Node(), "critical"))
			for _, id := range []string{plainID, checkedID} {
				errs = append(errs, serviceNotInHealth(ctx, rc, s.HTTPAddr(), name, victim.Node(), id, passingQuery))
			}
			errs = append(errs, serviceInHealth(ctx, rc, s.HTTPAddr(), name, survivor.Node(), "s4-api-survivor", passingQuery, "passing"))
			return errors.Join(errs...)
		})
	})
	if err != nil {
		t.Fatalf("after kill -9 of %s: %v", victim.Node(), err)
	}
	t.Logf("%s critical and out of ?passing %s after the kill", victim.Node(), time.Since(killedAt).Round(time.Millisecond))

	// The failed node stays in the catalog (reaped only after 72 h), and
	// Serf reports it failed.
	eventually(t, syncTimeout, "members report the victim failed", func() error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			var members []agentMember
			if _, err := rc.getJSON(ctx, s.HTTPAddr(), "/v1/agent/members", &members); err != nil {
				return err
			}
			for _, m := range members {
				if m.Name == victim.Node() {
					if m.Status != memberFailed {
						return fmt.Errorf("member %s has Status %d, want %d (failed)", m.Name, m.Status, memberFailed)
					}
					return nil
				}
			}
			return fmt.Errorf("member %s no longer listed", victim.Node())
		})
	})

	restartedAt := time.Now()
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, clientsReadyTimeout, "the restarted client's serfHealth", func() error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			return nodeSerfHealth(ctx, rc, s.HTTPAddr(), victim.Node(), "passing")
		})
	})
	eventually(t, clientsReadyTimeout, "every instance passing after the restart", func() error { return allPassing(ctx) })
	t.Logf("%s's services passing again %s after the restart", victim.Node(), time.Since(restartedAt).Round(time.Millisecond))

	after, err := agentServices(ctx, rc, victim.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{plainID, checkedID, plainID + "-sidecar-proxy"} {
		if _, ok := after[id]; !ok {
			t.Errorf("restarted agent's /v1/agent/services lacks %s: %v", id, keysOf(after))
		}
	}
	if got := after[plainID+"-sidecar-proxy"].Port; got != sidecarPort {
		t.Errorf("sidecar port %d after the restart, was %d", got, sidecarPort)
	}
	checks, err := agentChecks(ctx, rc, victim.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if ch, ok := checks["service:"+checkedID]; !ok || ch.Status != "passing" || ch.Type != "http" {
		t.Errorf("restarted agent's HTTP check = %+v (present %v), want a passing http check", ch, ok)
	}
}
