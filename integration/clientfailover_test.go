package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

const (
	// localCallBudget bounds an agent API call that only touches the
	// agent's local state: it must not wait for the servers.
	localCallBudget = 2 * time.Second
	// changeCallBudget bounds an agent API change during an election: as
	// Consul's, it waits for its sync to the catalog, at most the agent's
	// sync timeout (10 s), then answers 200 and leaves the change to
	// anti-entropy.
	changeCallBudget = 12 * time.Second
	// failoverSyncTimeout bounds a change made during an election reaching
	// the catalog once the new leader exists. Consul retries a failed sync
	// after about 15 s, so this leaves room for one retry.
	failoverSyncTimeout = 30 * time.Second
	// failoverReadStreak is how many reads in a row through the client must
	// succeed once it has failed over.
	failoverReadStreak = 20
)

// TestClientLeaderKill: a client agent keeps working when the leader
// server is kill -9ed. During the election, agent API changes (a service
// registration, a TTL update) answer 200, after waiting a bounded time for
// their sync, and reads of local state answer at once; once a new leader
// exists, the catalog shows the changes. The
// client's RPCs fail over: reads through it succeed again and keep
// succeeding, and a registration after the election syncs at once.
func TestClientLeaderKill(t *testing.T) {
	c, leader := startAgentCluster(t, agentClusterConfig{clients: 1})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	client := c.Clients()[0]
	node := client.Node()

	const beforeID, duringID, afterID = "s6-before", "s6-during", "s6-after"
	if err := registerService(ctx, rc, client.HTTPAddr(), map[string]any{
		"Name": beforeID, "Port": 9400, "Check": map[string]any{"TTL": "10m"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := agentPutOK(ctx, rc, client.HTTPAddr(), "/v1/agent/check/pass/service:"+beforeID, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, syncTimeout, "the first service passing", func() error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			return serviceInHealth(ctx, rc, s.HTTPAddr(), beforeID, node, beforeID, passingQuery, "passing")
		})
	})

	killedAt := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed leader %s (pid %d)", leader.Node(), leader.PID())

	// During the election: changes answer within their sync's bound,
	// local reads at once.
	localCall := func(what string, budget time.Duration, call func() error) {
		t.Helper()
		start := time.Now()
		if err := call(); err != nil {
			t.Fatalf("%s during the election: %v", what, err)
		}
		if took := time.Since(start); took > budget {
			t.Errorf("%s during the election took %s, budget %s", what, took.Round(time.Millisecond), budget)
		}
	}
	localCall("register "+duringID, changeCallBudget, func() error {
		return registerService(ctx, rc, client.HTTPAddr(), map[string]any{"Name": duringID, "Port": 9401})
	})
	localCall("fail service:"+beforeID, changeCallBudget, func() error {
		return agentPutOK(ctx, rc, client.HTTPAddr(), "/v1/agent/check/fail/service:"+beforeID+"?note=during+election", nil)
	})
	localCall("GET /v1/agent/services", localCallBudget, func() error {
		local, err := agentServices(ctx, rc, client.HTTPAddr())
		if err != nil {
			return err
		}
		if _, ok := local[duringID]; !ok {
			return fmt.Errorf("agent/services lacks %s: %v", duringID, keysOf(local))
		}
		return nil
	})
	noLeaderYet := true
	for _, s := range c.RunningServers() {
		if l, err := harness.StatusLeader(ctx, s.HTTPAddr()); err == nil && l != "" && l != leader.ServerAddr() {
			noLeaderYet = false
		}
	}
	t.Logf("local calls done %s after the kill (new leader already known: %v)", time.Since(killedAt).Round(time.Millisecond), !noLeaderYet)

	electCtx, cancel := context.WithTimeout(ctx, electionTimeout)
	newLeader, err := c.WaitForLeader(electCtx)
	cancel()
	if err != nil {
		t.Fatalf("no new leader within %s: %v", electionTimeout, err)
	}
	electedAt := time.Now()
	t.Logf("new leader %s after %s", newLeader.Node(), electedAt.Sub(killedAt).Round(time.Millisecond))

	took, err := pollUntil(ctx, failoverSyncTimeout, 200*time.Millisecond, func(ctx context.Context) error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			return errors.Join(
				serviceInHealth(ctx, rc, s.HTTPAddr(), duringID, node, duringID, passingQuery, "passing"),
				serviceInHealth(ctx, rc, s.HTTPAddr(), beforeID, node, beforeID, nil, "critical"),
			)
		})
	})
	if err != nil {
		t.Fatalf("changes made during the election: %v", err)
	}
	t.Logf("changes made during the election in the catalog %s after the election", took.Round(time.Millisecond))

	// Reads through the client fail over to a live server and stay there.
	readThroughClient := func(ctx context.Context) error {
		var inst []struct{ ServiceID, Node string }
		if _, err := rc.getJSON(ctx, client.HTTPAddr(), "/v1/catalog/service/"+duringID, &inst); err != nil {
			return err
		}
		if len(inst) != 1 || inst[0].ServiceID != duringID || inst[0].Node != node {
			return fmt.Errorf("catalog/service/%s through the client = %+v", duringID, inst)
		}
		return nil
	}
	eventually(t, syncTimeout, "a read through the client", func() error { return readThroughClient(ctx) })
	for i := range failoverReadStreak {
		if err := readThroughClient(ctx); err != nil {
			t.Fatalf("read %d of %d through the client after failover: %v", i+1, failoverReadStreak, err)
		}
	}
	readyCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	err = c.WaitForClients(readyCtx)
	cancel()
	if err != nil {
		t.Fatalf("client does not report the new leader: %v", err)
	}

	// A registration after the election syncs at once: the client is not
	// stuck on the dead server.
	if err := registerService(ctx, rc, client.HTTPAddr(), map[string]any{"Name": afterID, "Port": 9402}); err != nil {
		t.Fatal(err)
	}
	took, err = pollUntil(ctx, syncTimeout, 100*time.Millisecond, func(ctx context.Context) error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			return serviceInHealth(ctx, rc, s.HTTPAddr(), afterID, node, afterID, passingQuery, "passing")
		})
	})
	if err != nil {
		t.Fatalf("registration after the election: %v", err)
	}
	t.Logf("registration after the election in the catalog after %s", took.Round(time.Millisecond))
}
