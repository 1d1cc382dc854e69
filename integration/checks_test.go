package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// ttlLatencyBudget is the bound for a TTL update on a client to be
// visible in /v1/health/service/<name>?passing on a server.
const ttlLatencyBudget = time.Second

// TestClientChecks: health checks owned by a client agent, seen from a
// server. A TTL check moved pass → warn → fail → pass through
// /v1/agent/check/pass|warn|fail/<id> (and /update/<id>) shows in
// /v1/health/service/<name>?passing and in the entry's status within a
// second; an HTTP check follows a test server's answers (200 passing, 429
// warning, 503 critical) and its stopping and starting; a TCP check,
// registered with PUT /v1/agent/check/register, follows a listener that
// stops and starts.
func TestClientChecks(t *testing.T) {
	c, _ := startAgentCluster(t, agentClusterConfig{clients: 1})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	client := c.Clients()[0]
	// Reads go to a follower, which forwards them to the leader, so the
	// latency measured includes the forwarding path.
	followers, err := c.Followers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	server := followers[0]

	t.Run("ttl", func(t *testing.T) { testTTLCheck(ctx, t, rc, client, server) })
	t.Run("http", func(t *testing.T) { testHTTPCheck(ctx, t, rc, client, server) })
	t.Run("tcp", func(t *testing.T) { testTCPCheck(ctx, t, rc, client, server) })
}

func testTTLCheck(ctx context.Context, t *testing.T, rc *rawClient, client, server *harness.Agent) {
	const name, id = "s2-ttl", "s2-ttl-1"
	checkID := "service:" + id // Consul's ID for a service's single Check
	if err := registerService(ctx, rc, client.HTTPAddr(), map[string]any{
		"Name": name, "ID": id, "Port": 9000,
		"Check": map[string]any{"TTL": "30s"},
	}); err != nil {
		t.Fatal(err)
	}
	// TTL checks start critical.
	eventually(t, syncTimeout, "the new TTL check is critical on the server", func() error {
		return serviceStatusOn(ctx, rc, server.HTTPAddr(), name, client.Node(), id, "critical")
	})

	steps := []struct {
		path   string
		body   any
		want   string
		output string
	}{
		{"/v1/agent/check/pass/" + checkID + "?note=all+good", nil, "passing", "all good"},
		{"/v1/agent/check/warn/" + checkID + "?note=getting+slow", nil, "warning", "getting slow"},
		{"/v1/agent/check/fail/" + checkID + "?note=down", nil, "critical", "down"},
		{"/v1/agent/check/pass/" + checkID, nil, "passing", ""},
		{"/v1/agent/check/update/" + checkID, map[string]any{"Status": "warning", "Output": "via update"}, "warning", "via update"},
		{"/v1/agent/check/update/" + checkID, map[string]any{"Status": "passing", "Output": "ok again"}, "passing", "ok again"},
	}
	for _, st := range steps {
		sent := time.Now()
		if err := agentPutOK(ctx, rc, client.HTTPAddr(), st.path, st.body); err != nil {
			t.Fatal(err)
		}
		_, err := pollUntil(ctx, 5*time.Second, 20*time.Millisecond, func(ctx context.Context) error {
			return serviceStatusOn(ctx, rc, server.HTTPAddr(), name, client.Node(), id, st.want)
		})
		if err != nil {
			t.Fatalf("PUT %s: the server never showed %s: %v", st.path, st.want, err)
		}
		took := time.Since(sent)
		t.Logf("PUT %s: %s on %s after %s", st.path, st.want, server.Node(), took.Round(time.Millisecond))
		if took > ttlLatencyBudget {
			t.Errorf("PUT %s: %s reached the server after %s, budget %s", st.path, st.want, took.Round(time.Millisecond), ttlLatencyBudget)
		}
		checks, err := agentChecks(ctx, rc, client.HTTPAddr())
		if err != nil {
			t.Fatal(err)
		}
		ch, ok := checks[checkID]
		switch {
		case !ok:
			t.Errorf("agent/checks lacks %s: %v", checkID, keysOf(checks))
		case ch.Status != st.want:
			t.Errorf("agent/checks: %s is %s, want %s", checkID, ch.Status, st.want)
		case st.output != "" && ch.Output != st.output:
			t.Errorf("agent/checks: %s has Output %q, want %q", checkID, ch.Output, st.output)
		}
	}

	// Unknown check IDs are 404s, as in Consul.
	for _, p := range []string{"/v1/agent/check/pass/nope", "/v1/agent/check/update/nope"} {
		r, err := agentPut(ctx, rc, client.HTTPAddr(), p, map[string]any{"Status": "passing"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusNotFound {
			t.Errorf("PUT %s: %d %q, want 404", p, r.Status, r.Body)
		}
	}
}

func testHTTPCheck(ctx context.Context, t *testing.T, rc *rawClient, client, server *harness.Agent) {
	const name, id = "s3-http", "s3-http-1"
	target := newCheckTarget(t, true)
	if err := registerService(ctx, rc, client.HTTPAddr(), map[string]any{
		"Name": name, "ID": id, "Port": 9001,
		"Check": map[string]any{"HTTP": target.url(), "Interval": "1s", "Timeout": "1s"},
	}); err != nil {
		t.Fatal(err)
	}
	steps := []checkStep{
		{"target answers 200", func() error { return nil }, "passing"},
		{"target answers 429", func() error { target.setStatus(http.StatusTooManyRequests); return nil }, "warning"},
		{"target stopped", func() error { target.stop(); return nil }, "critical"},
		{"target started, answers 200", func() error { target.setStatus(http.StatusOK); return target.start() }, "passing"},
		{"target answers 503", func() error { target.setStatus(http.StatusServiceUnavailable); return nil }, "critical"},
		{"target answers 200", func() error { target.setStatus(http.StatusOK); return nil }, "passing"},
	}
	runCheckSteps(ctx, t, rc, client, server, name, id, "service:"+id, "http", steps)
}

func testTCPCheck(ctx context.Context, t *testing.T, rc *rawClient, client, server *harness.Agent) {
	const name, id, checkID = "s3-tcp", "s3-tcp-1", "s3-tcp-listening"
	target := newCheckTarget(t, false)
	if err := registerService(ctx, rc, client.HTTPAddr(), map[string]any{
		"Name": name, "ID": id, "Port": 9002,
	}); err != nil {
		t.Fatal(err)
	}
	// A check registered on its own, bound to the service by ServiceID.
	if err := agentPutOK(ctx, rc, client.HTTPAddr(), "/v1/agent/check/register", map[string]any{
		"ID": checkID, "Name": "listening", "ServiceID": id,
		"TCP": target.addr, "Interval": "1s", "Timeout": "1s",
	}); err != nil {
		t.Fatal(err)
	}
	steps := []checkStep{
		{"listener up", func() error { return nil }, "passing"},
		{"listener stopped", func() error { target.stop(); return nil }, "critical"},
		{"listener started", target.start, "passing"},
		{"listener stopped again", func() error { target.stop(); return nil }, "critical"},
		{"listener started again", target.start, "passing"},
	}
	runCheckSteps(ctx, t, rc, client, server, name, id, checkID, "tcp", steps)

	// Deregistering the check leaves the service with no checks: passing.
	target.stop()
	if err := agentPutOK(ctx, rc, client.HTTPAddr(), "/v1/agent/check/deregister/"+checkID, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, syncTimeout, "the service after its check is deregistered", func() error {
		entries, err := healthService(ctx, rc, server.HTTPAddr(), "service", name, nil)
		if err != nil {
			return err
		}
		e, ok := entryFor(entries, client.Node(), id)
		if !ok {
			return fmt.Errorf("no %s entry: %s", id, describeEntries(entries))
		}
		if _, ok := e.check(checkID); ok {
			return fmt.Errorf("deregistered check still listed: %s", describeEntries(entries))
		}
		return nil
	})
}

// checkStep is one change to a check's target and the status the check
// must then reach.
type checkStep struct {
	what   string
	action func() error
	want   string
}

// runCheckSteps performs each step and waits for the service's status on
// the server (and in the agent's own /v1/agent/checks) to follow.
func runCheckSteps(ctx context.Context, t *testing.T, rc *rawClient, client, server *harness.Agent,
	name, id, checkID, checkType string, steps []checkStep) {
	t.Helper()
	for _, st := range steps {
		if err := st.action(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		start := time.Now()
		_, err := pollUntil(ctx, checkFollowTimeout, 100*time.Millisecond, func(ctx context.Context) error {
			checks, err := agentChecks(ctx, rc, client.HTTPAddr())
			if err != nil {
				return err
			}
			ch, ok := checks[checkID]
			switch {
			case !ok:
				return fmt.Errorf("agent/checks lacks %s: %v", checkID, keysOf(checks))
			case ch.Status != st.want:
				return fmt.Errorf("agent/checks: %s is %s (%q), want %s", checkID, ch.Status, ch.Output, st.want)
			case ch.Type != checkType:
				return fmt.Errorf("agent/checks: %s has Type %q, want %q", checkID, ch.Type, checkType)
			}
			return serviceStatusOn(ctx, rc, server.HTTPAddr(), name, client.Node(), id, st.want)
		})
		if err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		t.Logf("%s: %s after %s", st.what, st.want, time.Since(start).Round(time.Millisecond))
	}
}

// serviceStatusOn returns nil when, on the server at addr, serviceID on
// node has the aggregated status want in /v1/health/service/<name>, and is
// listed with ?passing exactly when want is "passing" (Consul's ?passing
// drops warnings too).
func serviceStatusOn(ctx context.Context, rc *rawClient, addr, name, node, serviceID, want string) error {
	if err := serviceInHealth(ctx, rc, addr, name, node, serviceID, nil, want); err != nil {
		return err
	}
	if want == "passing" {
		return serviceInHealth(ctx, rc, addr, name, node, serviceID, passingQuery, "passing")
	}
	return serviceNotInHealth(ctx, rc, addr, name, node, serviceID, passingQuery)
}
