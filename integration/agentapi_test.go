package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// Helpers shared by the client-agent scenarios (issue 3): a cluster of
// servers and client agents, Consul's agent, catalog and health API shapes
// as the scenarios read them, and polling with a latency budget.

// Bounds of the client-agent scenarios.
const (
	// clientsReadyTimeout bounds the wait for every client to know the
	// leader and for every node's serfHealth check to pass in the catalog.
	clientsReadyTimeout = 30 * time.Second
	// syncTimeout bounds a change made on a client agent reaching the
	// catalog when nothing is failing (Consul pushes it at once).
	syncTimeout = 10 * time.Second
	// checkFollowTimeout bounds a check's status following its target
	// (1 s interval, Consul's minimum, plus the sync).
	checkFollowTimeout = 10 * time.Second
	// sidecarPortMin and sidecarPortMax are Consul's default sidecar range.
	sidecarPortMin = 21000
	sidecarPortMax = 21255
)

// joinRetryInterval is the agents' retry_interval for -retry-join.
const joinRetryInterval = "1s"

// serfHealthID is the node check the leader keeps for every Serf member.
const serfHealthID = "serfHealth"

// agentClusterConfig describes a scenario cluster: 3 servers with
// performance.raft_multiplier 1 (as TestLeaderKill and Consul's
// sdk/testutil run them) and the given client agents.
type agentClusterConfig struct {
	// servers is the number of servers; 0 means 3.
	servers int
	// clients is the number of client agents.
	clients int
	// clientConfig is written, over a short retry_interval, as a JSON
	// config file passed to every client with -config-file (Consul's keys,
	// such as ae_interval).
	clientConfig map[string]any
	// serverConfig is merged the same way into the servers' config file.
	serverConfig map[string]any
}

// startAgentCluster starts cfg.servers fast-raft servers and cfg.clients clients,
// waits for a leader, for every client to report it, and for every node to
// be in the catalog with a passing serfHealth check.
func startAgentCluster(t *testing.T, cfg agentClusterConfig) (*harness.Cluster, *harness.Agent) {
	t.Helper()
	cc := harness.ClusterConfig{
		Binary:  requireBinary(t),
		Ports:   newPorts(t),
		Servers: cmp.Or(cfg.servers, 3),
		Clients: cfg.clients,
	}
	serverConfig := map[string]any{
		"performance":    map[string]any{"raft_multiplier": 1},
		"retry_interval": joinRetryInterval,
	}
	maps.Copy(serverConfig, cfg.serverConfig)
	cc.ServerArgs = configFile(t, "raft-fast.json", serverConfig)
	// Every agent starts at once, so a client's first join attempt often
	// finds no server listening yet; Consul's default retry_interval (30 s)
	// would then hold it outside the cluster for half a minute.
	clientConfig := map[string]any{"retry_interval": joinRetryInterval}
	maps.Copy(clientConfig, cfg.clientConfig)
	cc.ClientArgs = configFile(t, "client.json", clientConfig)
	c := harness.StartCluster(t, cc)
	leader := waitLeader(t, c, clusterStartTimeout)
	waitClientsReady(t, c)
	return c, leader
}

// waitClientsReady waits until every running client knows the leader and
// every running agent's node has a passing serfHealth check.
func waitClientsReady(t *testing.T, c *harness.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), clientsReadyTimeout)
	defer cancel()
	start := time.Now()
	if err := c.WaitForClients(ctx); err != nil {
		t.Fatalf("clients did not find the leader: %v", err)
	}
	knowLeader := time.Since(start)
	rc := newRawClient(t)
	for _, a := range c.Agents() {
		if !a.Running() {
			continue
		}
		eventually(t, time.Until(deadlineOf(ctx)), "serfHealth of "+a.Node(), func() error {
			return nodeSerfHealth(ctx, rc, c.RunningServers()[0].HTTPAddr(), a.Node(), "passing")
		})
	}
	t.Logf("%d clients know the leader after %s; every node's serfHealth passing after %s",
		len(c.Clients()), knowLeader.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(clientsReadyTimeout)
	}
	return d
}

// nodeSerfHealth returns nil when node's serfHealth check, read from the
// server at addr, has the wanted status.
func nodeSerfHealth(ctx context.Context, rc *rawClient, addr, node, want string) error {
	var checks []healthCheck
	if _, err := rc.getJSON(ctx, addr, "/v1/health/node/"+url.PathEscape(node), &checks); err != nil {
		return err
	}
	for _, ch := range checks {
		if ch.CheckID == serfHealthID {
			if ch.Status != want {
				return fmt.Errorf("%s: serfHealth is %s (%q), want %s", node, ch.Status, ch.Output, want)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no serfHealth check among %d checks", node, len(checks))
}

// agentMember is one element of GET /v1/agent/members.
type agentMember struct {
	Name   string
	Addr   string
	Port   int
	Tags   map[string]string
	Status int
}

// Serf member statuses as /v1/agent/members reports them.
const (
	memberAlive  = 1
	memberFailed = 4
)

// catalogNode is one element of GET /v1/catalog/nodes.
type catalogNode struct {
	ID      string
	Node    string
	Address string
}

// healthCheck is one check as the health and agent endpoints return it.
type healthCheck struct {
	Node        string
	CheckID     string
	Name        string
	Status      string
	Notes       string
	Output      string
	ServiceID   string
	ServiceName string
	Type        string
}

// agentService is a service as GET /v1/agent/services and the catalog
// return it; only what the scenarios check.
type agentService struct {
	Kind              string
	ID                string
	Service           string
	Tags              []string
	Meta              map[string]string
	Port              int
	Address           string
	EnableTagOverride bool
	Weights           struct{ Passing, Warning int }
	TaggedAddresses   map[string]struct {
		Address string
		Port    int
	}
	Proxy *struct {
		DestinationServiceName string
		DestinationServiceID   string
		LocalServiceAddress    string
		LocalServicePort       int
		Upstreams              []map[string]any
	}
	ContentHash string
}

// healthEntry is one element of GET /v1/health/service|connect/<name>.
type healthEntry struct {
	Node struct {
		ID      string
		Node    string
		Address string
	}
	Service agentService
	Checks  []healthCheck
}

// status is the entry's aggregated status, Consul's rule: any critical
// check makes it critical, else any warning makes it warning.
func (e healthEntry) status() string {
	out := "passing"
	for _, c := range e.Checks {
		switch c.Status {
		case "critical":
			return "critical"
		case "warning":
			out = "warning"
		case "passing":
		default:
			return "unknown status " + c.Status
		}
	}
	return out
}

// check returns the entry's check with that ID.
func (e healthEntry) check(id string) (healthCheck, bool) {
	for _, c := range e.Checks {
		if c.CheckID == id {
			return c, true
		}
	}
	return healthCheck{}, false
}

// healthService GETs /v1/health/<kind>/<name> (kind "service" or
// "connect") on addr with the given query.
func healthService(ctx context.Context, rc *rawClient, addr, kind, name string, q url.Values) ([]healthEntry, error) {
	p := "/v1/health/" + kind + "/" + url.PathEscape(name)
	if len(q) > 0 {
		p += "?" + encodeQuery(q)
	}
	var out []healthEntry
	if _, err := rc.getJSON(ctx, addr, p, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// passingQuery is ?passing, sent bare as Consul's clients send it.
var passingQuery = url.Values{"passing": {""}}

// entryFor returns the health entry for (node, serviceID), if listed.
func entryFor(entries []healthEntry, node, serviceID string) (healthEntry, bool) {
	for _, e := range entries {
		if e.Node.Node == node && e.Service.ID == serviceID {
			return e, true
		}
	}
	return healthEntry{}, false
}

// describeEntries renders entries briefly for error messages.
func describeEntries(entries []healthEntry) string {
	var parts []string
	for _, e := range entries {
		var checks []string
		for _, c := range e.Checks {
			checks = append(checks, c.CheckID+"="+c.Status)
		}
		parts = append(parts, fmt.Sprintf("%s/%s[%s]", e.Node.Node, e.Service.ID, strings.Join(checks, ",")))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// serviceInHealth returns nil when /v1/health/service/<name> (with q) on
// addr lists serviceID on node and, if wantStatus is not empty, the entry
// has that aggregated status.
func serviceInHealth(ctx context.Context, rc *rawClient, addr, name, node, serviceID string, q url.Values, wantStatus string) error {
	entries, err := healthService(ctx, rc, addr, "service", name, q)
	if err != nil {
		return err
	}
	e, ok := entryFor(entries, node, serviceID)
	if !ok {
		return fmt.Errorf("%s: health/service/%s?%s lists no %s on %s: %s", addr, name, encodeQuery(q), serviceID, node, describeEntries(entries))
	}
	if wantStatus != "" && e.status() != wantStatus {
		return fmt.Errorf("%s: %s on %s is %s, want %s: %s", addr, serviceID, node, e.status(), wantStatus, describeEntries([]healthEntry{e}))
	}
	return nil
}

// serviceNotInHealth returns nil when /v1/health/service/<name> (with q) on
// addr does not list serviceID on node.
func serviceNotInHealth(ctx context.Context, rc *rawClient, addr, name, node, serviceID string, q url.Values) error {
	entries, err := healthService(ctx, rc, addr, "service", name, q)
	if err != nil {
		return err
	}
	if _, ok := entryFor(entries, node, serviceID); ok {
		return fmt.Errorf("%s: health/service/%s?%s still lists %s on %s: %s", addr, name, encodeQuery(q), serviceID, node, describeEntries(entries))
	}
	return nil
}

// agentPut sends PUT addr+pathQuery with body (JSON-encoded unless it is
// nil or already []byte) and returns the response.
func agentPut(ctx context.Context, rc *rawClient, addr, pathQuery string, body any) (response, error) {
	var b []byte
	switch v := body.(type) {
	case nil:
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return response{}, err
		}
	}
	return rc.do(ctx, http.MethodPut, addr, pathQuery, b)
}

// agentPutOK is agentPut that requires a 200.
func agentPutOK(ctx context.Context, rc *rawClient, addr, pathQuery string, body any) error {
	r, err := agentPut(ctx, rc, addr, pathQuery, body)
	if err != nil {
		return fmt.Errorf("PUT %s%s: %w", addr, pathQuery, err)
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("PUT %s%s: %d %q", addr, pathQuery, r.Status, r.Body)
	}
	return nil
}

// registerService registers def on the agent at addr
// (PUT /v1/agent/service/register) and requires a 200.
func registerService(ctx context.Context, rc *rawClient, addr string, def any) error {
	return agentPutOK(ctx, rc, addr, "/v1/agent/service/register", def)
}

// agentServices returns GET /v1/agent/services on addr.
func agentServices(ctx context.Context, rc *rawClient, addr string) (map[string]agentService, error) {
	var out map[string]agentService
	if _, err := rc.getJSON(ctx, addr, "/v1/agent/services", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// agentChecks returns GET /v1/agent/checks on addr.
func agentChecks(ctx context.Context, rc *rawClient, addr string) (map[string]healthCheck, error) {
	var out map[string]healthCheck
	if _, err := rc.getJSON(ctx, addr, "/v1/agent/checks", &out); err != nil {
		return nil, err
	}
	return out, nil
}

// catalogNodeServices returns the service IDs GET /v1/catalog/node/<node>
// lists on addr (none for a missing node).
func catalogNodeServices(ctx context.Context, rc *rawClient, addr, node string) ([]string, error) {
	var out *struct {
		Services map[string]agentService
	}
	if _, err := rc.getJSON(ctx, addr, "/v1/catalog/node/"+url.PathEscape(node), &out); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, nil
	}
	ids := make([]string, 0, len(out.Services))
	for id := range out.Services {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// pollUntil calls check every interval until it returns nil or d passes,
// and returns how long it took, or the last error. Unlike eventually it
// does not fail the test, so a scenario can measure a latency budget.
func pollUntil(ctx context.Context, d, interval time.Duration, check func(context.Context) error) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			// The last error says more than "deadline exceeded" unless it
			// was the context itself that cut the check short.
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return time.Since(start), fmt.Errorf("after %s: %w", d, err)
			}
			return time.Since(start), fmt.Errorf("still failing after %s: %w", d, err)
		case <-time.After(interval):
		}
	}
}

// everyServer returns nil when check passes against every running server.
func everyServer(ctx context.Context, c *harness.Cluster, check func(ctx context.Context, s *harness.Agent) error) error {
	var errs []error
	for _, s := range c.RunningServers() {
		if err := check(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Node(), err))
		}
	}
	return errors.Join(errs...)
}

// jsonBody marshals v for a request body.
func jsonBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
