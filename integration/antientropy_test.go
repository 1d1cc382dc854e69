package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// aeInterval is the clients' anti-entropy interval in this scenario
// (ae_interval in their config file; Consul's default is 1m).
const aeInterval = 2 * time.Second

// aeRepairTimeout bounds one repair: a full sync happens every interval,
// jittered, and the scenario allows for a little more than two.
const aeRepairTimeout = 3*aeInterval + 2*time.Second

// TestAntiEntropy: a client agent with a short ae_interval repairs the
// catalog in both directions. A service (and its check) removed behind its
// back with PUT /v1/catalog/deregister is back after a sync interval; a
// check whose status is overwritten in the catalog gets the agent's status
// back; a service and a check written into the catalog on the agent's node
// that the agent does not own are removed.
func TestAntiEntropy(t *testing.T) {
	c, leader := startAgentCluster(t, agentClusterConfig{
		clients:      1,
		clientConfig: map[string]any{"ae_interval": aeInterval.String()},
	})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	client := c.Clients()[0]
	server := leader.HTTPAddr()
	node := client.Node()

	const name, id = "s5-svc", "s5-svc-1"
	checkID := "service:" + id
	if err := registerService(ctx, rc, client.HTTPAddr(), map[string]any{
		"Name": name, "ID": id, "Port": 9200, "Check": map[string]any{"TTL": "10m"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := agentPutOK(ctx, rc, client.HTTPAddr(), "/v1/agent/check/pass/"+checkID, nil); err != nil {
		t.Fatal(err)
	}
	inSync := func(ctx context.Context) error {
		return serviceInHealth(ctx, rc, server, name, node, id, passingQuery, "passing")
	}
	eventually(t, syncTimeout, "the service in sync before the drift", func() error { return inSync(ctx) })

	repaired := func(t *testing.T, what string, check func(context.Context) error) {
		t.Helper()
		took, err := pollUntil(ctx, aeRepairTimeout, 100*time.Millisecond, check)
		if err != nil {
			t.Errorf("%s: not repaired by anti-entropy (ae_interval %s): %v", what, aeInterval, err)
			return
		}
		t.Logf("%s: repaired after %s", what, took.Round(time.Millisecond))
	}

	deregistered := func(t *testing.T) {
		if err := rc.putTrue(ctx, server, "/v1/catalog/deregister", jsonBody(t, map[string]any{
			"Node": node, "ServiceID": id,
		})); err != nil {
			t.Fatal(err)
		}
		// Not asserted: a full sync may already have put it back.
		if ids, err := catalogNodeServices(ctx, rc, server, node); err == nil {
			t.Logf("right after the deregister the catalog lists %v on %s", ids, node)
		}
		repaired(t, "service "+id, inSync)
	}
	// Run first and again last: an agent may do a full sync soon after it
	// starts or learns of its servers, which could repair the first drift
	// by chance; the last one comes well after that.
	t.Run("service deregistered behind the agent", deregistered)

	t.Run("check status overwritten in the catalog", func(t *testing.T) {
		if err := rc.putTrue(ctx, server, "/v1/catalog/register", jsonBody(t, map[string]any{
			"Node": node, "Address": "127.0.0.1", "SkipNodeUpdate": true,
			"Check": map[string]any{
				"CheckID": checkID, "Name": "Service '" + name + "' check", "ServiceID": id,
				"Status": "critical", "Output": "written behind the agent's back",
			},
		})); err != nil {
			t.Fatal(err)
		}
		repaired(t, "check "+checkID, inSync)
	})

	t.Run("stray service and check on the agent's node", func(t *testing.T) {
		const strayID, strayCheck = "s5-stray", "s5-stray-check"
		if err := rc.putTrue(ctx, server, "/v1/catalog/register", jsonBody(t, map[string]any{
			"Node": node, "Address": "127.0.0.1", "SkipNodeUpdate": true,
			"Service": map[string]any{"ID": strayID, "Service": strayID, "Port": 9300},
			"Check":   map[string]any{"CheckID": strayCheck, "Name": "stray", "Status": "passing"},
		})); err != nil {
			t.Fatal(err)
		}
		repaired(t, "stray service and check", func(ctx context.Context) error {
			ids, err := catalogNodeServices(ctx, rc, server, node)
			if err != nil {
				return err
			}
			var errs []error
			if slices.Contains(ids, strayID) {
				errs = append(errs, fmt.Errorf("catalog still lists %s on %s: %v", strayID, node, ids))
			}
			if !slices.Contains(ids, id) {
				errs = append(errs, fmt.Errorf("catalog lost the agent's own %s: %v", id, ids))
			}
			var checks []healthCheck
			if _, err := rc.getJSON(ctx, server, "/v1/health/node/"+node, &checks); err != nil {
				return err
			}
			ids = ids[:0]
			for _, ch := range checks {
				ids = append(ids, ch.CheckID)
			}
			if slices.Contains(ids, strayCheck) {
				errs = append(errs, fmt.Errorf("catalog still lists check %s on %s: %v", strayCheck, node, ids))
			}
			// The leader owns serfHealth; the agent must not remove it.
			if !slices.Contains(ids, serfHealthID) {
				errs = append(errs, fmt.Errorf("serfHealth gone from %s: %v", node, ids))
			}
			return errors.Join(errs...)
		})
	})

	t.Run("service deregistered again, later", deregistered)

	// The agent's own view never changed.
	local, err := agentServices(ctx, rc, client.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if len(local) != 1 {
		t.Errorf("agent/services = %v, want only %s", keysOf(local), id)
	}
}
