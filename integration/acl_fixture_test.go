package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/trellis-mesh/trellis/integration/harness"
)

// aclTok names one kind of caller of the ACL scenarios.
type aclTok int

// The callers of the endpoint table, in the order the table runs them.
const (
	tokNone    aclTok = iota // no token at all
	tokAnon                  // the anonymous token's secret, sent explicitly
	tokRead                  // read on every resource (aclReadRules)
	tokWrite                 // write under app prefixes only (aclWriteRules)
	tokMgmt                  // a token linked to global-management
	tokDeleted               // created, then deleted
	tokExpired               // created with the shortest TTL the servers accept
	aclTokCount
)

func (k aclTok) String() string {
	return [...]string{"none", "anonymous", "read", "write", "management", "deleted", "expired"}[k]
}

// aclLive are the callers whose token resolves.
var aclLive = []aclTok{tokNone, tokAnon, tokRead, tokWrite, tokMgmt}

// aclInitialManagement is acl.tokens.initial_management of the servers.
const aclInitialManagement = "7d3e0b1c-8a43-4a5e-9d35-6c1f0e2b9a01"

// aclAnonymousAccessor is the anonymous token's fixed AccessorID.
const aclAnonymousAccessor = "00000000-0000-0000-0000-000000000002"

// aclReadRules read everything, as a monitoring token does.
const aclReadRules = `
key_prefix "" { policy = "read" }
service_prefix "" { policy = "read" intentions = "read" }
node_prefix "" { policy = "read" }
agent_prefix "" { policy = "read" }
session_prefix "" { policy = "read" }
event_prefix "" { policy = "read" }
query_prefix "" { policy = "read" }
operator = "read"
mesh = "read"
acl = "read"
`

// aclWriteRules write only what is under app prefixes: what an
// application's own token holds. Nodes are readable so that catalog lists
// show what filtering by service removes.
const aclWriteRules = `
key_prefix "app/" { policy = "write" }
service_prefix "app-" { policy = "write" intentions = "write" }
node_prefix "" { policy = "read" }
node_prefix "app-" { policy = "write" }
session_prefix "client-" { policy = "write" }
event_prefix "app-" { policy = "write" }
query_prefix "app-" { policy = "write" }
`

// aclFixture is a default-deny cluster and the tokens of every caller.
type aclFixture struct {
	c        *harness.Cluster
	client   *harness.Agent // the client agent most requests go to
	follower *harness.Agent
	// second is the client agent with token persistence that
	// agent-tokens starts (nil before).
	second   *harness.Agent
	mgmt     *api.Client // initial management, through the client agent
	secret   [aclTokCount]string
	accessor [aclTokCount]string
	// expires is when the expired caller's token stops resolving.
	expires time.Time
	// initialAccessor is the AccessorID of the initial management token.
	initialAccessor string
	// serverSession is the ID of the session seedMatrix made on server-0.
	serverSession string
	aclHTTP
}

// aclServerConfig is the servers' and clients' acl block: default deny,
// the management token created by the leader, and the management token as
// the agents' own (so that anti-entropy of their nodes is allowed).
func aclServerConfig(extra map[string]any) map[string]any {
	acl := map[string]any{
		"enabled":        true,
		"default_policy": "deny",
		"tokens":         map[string]any{"initial_management": aclInitialManagement, "agent": aclInitialManagement},
	}
	for k, v := range extra {
		acl[k] = v
	}
	return map[string]any{"acl": acl}
}

// startACLFixture starts 3 servers and a client agent with ACLs on and
// creates the callers' tokens; the expiring one first, so that its minute
// runs while the rest of the scenario does.
func startACLFixture(t *testing.T) *aclFixture {
	t.Helper()
	c := startACLCluster(t, 1, aclServerConfig(nil))
	f := &aclFixture{c: c, client: c.Clients()[0], aclHTTP: newACLHTTP(t)}
	followers, err := c.Followers(t.Context())
	if err != nil || len(followers) == 0 {
		t.Fatalf("followers: %v %v", followers, err)
	}
	f.follower = followers[0]
	f.mgmt = newTokenClient(t, f.client.HTTPAddr(), aclInitialManagement)

	self, _, err := f.mgmt.ACL().TokenReadSelf(nil)
	if err != nil {
		t.Fatalf("initial management token: %v", err)
	}
	f.initialAccessor = self.AccessorID

	// Consul's shortest TTL is a minute (acl.token_min_expiration_ttl is
	// not an agent setting), so the token is made first and the table
	// runs its column last.
	exp, _, err := f.mgmt.ACL().TokenCreate(&api.ACLToken{Description: "expiring", ExpirationTTL: time.Minute, Policies: []*api.ACLTokenPolicyLink{{Name: "global-management"}}}, nil)
	if err != nil {
		t.Fatalf("expiring token: %v", err)
	}
	f.secret[tokExpired], f.accessor[tokExpired] = exp.SecretID, exp.AccessorID
	if exp.ExpirationTime == nil {
		t.Fatal("expiring token has no ExpirationTime")
	}
	f.expires = *exp.ExpirationTime

	f.secret[tokAnon], f.accessor[tokAnon], f.accessor[tokNone] = "anonymous", aclAnonymousAccessor, aclAnonymousAccessor
	for _, p := range []struct {
		tok         aclTok
		name, rules string
	}{{tokRead, "read-everything", aclReadRules}, {tokWrite, "write-app", aclWriteRules}} {
		if _, _, err := f.mgmt.ACL().PolicyCreate(&api.ACLPolicy{Name: p.name, Rules: p.rules}, nil); err != nil {
			t.Fatalf("policy %s: %v", p.name, err)
		}
		f.createToken(t, p.tok, p.name)
	}
	f.createToken(t, tokMgmt, "global-management")
	f.createToken(t, tokDeleted, "global-management")
	if _, err := f.mgmt.ACL().TokenDelete(f.accessor[tokDeleted], nil); err != nil {
		t.Fatalf("delete token: %v", err)
	}
	return f
}

func (f *aclFixture) createToken(t *testing.T, k aclTok, policy string) {
	t.Helper()
	tok, _, err := f.mgmt.ACL().TokenCreate(&api.ACLToken{Description: k.String(), Policies: []*api.ACLTokenPolicyLink{{Name: policy}}}, nil)
	if err != nil {
		t.Fatalf("token %s: %v", k, err)
	}
	f.secret[k], f.accessor[k] = tok.SecretID, tok.AccessorID
}

// startACLCluster starts 3 fast-raft servers and clients client agents,
// every one with the acl block of cfg (and its other keys), and waits for a
// leader and for every node's serfHealth, read with the management token
// (startAgentCluster reads it anonymously, which default deny filters).
func startACLCluster(t *testing.T, clients int, cfg map[string]any) *harness.Cluster {
	t.Helper()
	serverCfg := map[string]any{"performance": map[string]any{"raft_multiplier": 1}, "retry_interval": joinRetryInterval}
	clientCfg := map[string]any{"retry_interval": joinRetryInterval}
	for k, v := range cfg {
		serverCfg[k], clientCfg[k] = v, v
	}
	c := harness.StartCluster(t, harness.ClusterConfig{
		Binary:     requireBinary(t),
		Ports:      newPorts(t),
		Servers:    3,
		Clients:    clients,
		ServerArgs: configFile(t, "acl-server.json", serverCfg),
		ClientArgs: configFile(t, "acl-client.json", clientCfg),
	})
	waitLeader(t, c, clusterStartTimeout)
	ctx, cancel := context.WithTimeout(t.Context(), clientsReadyTimeout)
	defer cancel()
	if err := c.WaitForClients(ctx); err != nil {
		t.Fatalf("clients did not find the leader: %v", err)
	}
	if tokens, ok := cfg["acl"].(map[string]any)["tokens"].(map[string]any); ok && tokens["initial_management"] != nil {
		waitSerfHealthAll(t, c, tokens["initial_management"].(string))
	}
	return c
}

// waitSerfHealthAll waits until every running agent's node has a passing
// serfHealth check, read with token.
func waitSerfHealthAll(t *testing.T, c *harness.Cluster, token string) {
	t.Helper()
	cl := newTokenClient(t, c.RunningServers()[0].HTTPAddr(), token)
	for _, a := range c.Agents() {
		if a.Running() {
			waitSerfHealth(t, cl, a.Node())
		}
	}
}

// newTokenClient is newConsulClient sending token with every request.
func newTokenClient(t *testing.T, addr, token string) *api.Client {
	t.Helper()
	c := newConsulClient(t, addr)
	c.SetHeaders(http.Header{"X-Consul-Token": {token}})
	return c
}

// aclResp is one raw answer.
type aclResp struct {
	status int
	body   []byte
	header http.Header
}

func (r aclResp) String() string {
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// do sends one request to addr with the caller's token in X-Consul-Token
// (none for tokNone).
func (f *aclFixture) do(ctx context.Context, k aclTok, method, addr, path, body string) (aclResp, error) {
	return f.doSecret(ctx, f.secret[k], method, addr, path, body)
}

// aclHTTP sends raw requests with a token, so that the scenarios see
// Consul's exact statuses, bodies and headers.
type aclHTTP struct {
	hc *http.Client
}

// newACLHTTP is an aclHTTP whose idle connections the test closes.
func newACLHTTP(t *testing.T) aclHTTP {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return aclHTTP{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// doSecret sends one request with secret in X-Consul-Token (none for "").
func (h aclHTTP) doSecret(ctx context.Context, secret, method, addr, path, body string) (aclResp, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return aclResp{}, err
	}
	if secret != "" {
		req.Header.Set("X-Consul-Token", secret)
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return aclResp{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return aclResp{}, err
	}
	return aclResp{status: resp.StatusCode, body: b, header: resp.Header}, nil
}

// mgmtDo sends a request with the initial management token and wants want.
func (f *aclFixture) mgmtDo(ctx context.Context, want int, method, path, body string) ([]byte, error) {
	r, err := f.doSecret(ctx, aclInitialManagement, method, f.client.HTTPAddr(), path, body)
	if err != nil {
		return nil, err
	}
	if r.status != want {
		return nil, fmt.Errorf("%s %s: %s, want %d", method, path, r, want)
	}
	return r.body, nil
}

// deniedText is Consul's 403 body for caller k lacking perm (such as
// `'key:read' on "x"`): unknown tokens are "ACL not found".
func (f *aclFixture) deniedText(k aclTok, perm string) string {
	switch k {
	case tokDeleted, tokExpired:
		return aclNotFound
	case tokNone, tokAnon:
		return "Permission denied: anonymous token lacks permission " + perm +
			". The anonymous token is used implicitly when a request does not specify a token."
	}
	return fmt.Sprintf("Permission denied: token with AccessorID '%s' lacks permission %s", f.accessor[k], perm)
}

// sortedJSON decodes a list answer and returns name(v) of each element,
// sorted.
func sortedJSON[T any](name func(T) string) func([]byte) ([]string, error) {
	return func(b []byte) ([]string, error) {
		var items []T
		if err := json.Unmarshal(b, &items); err != nil {
			return nil, fmt.Errorf("decode %q: %w", b, err)
		}
		out := make([]string, 0, len(items))
		for _, it := range items {
			out = append(out, name(it))
		}
		slices.Sort(out)
		return out, nil
	}
}

// mapKeys decodes a JSON object and returns its keys, sorted.
func mapKeys(b []byte) ([]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decode %q: %w", b, err)
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}
