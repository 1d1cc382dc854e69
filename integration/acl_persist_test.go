package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/trellis-mesh/trellis/integration/harness"
)

// bootstrapRefused is Consul's 403 body for a bootstrap after the first.
var bootstrapRefused = regexp.MustCompile(`^Permission denied: ACL bootstrap no longer allowed \(reset index: ([0-9]+)\)$`)

// TestACLPersistence: on 3 servers with on-disk data dirs and no initial
// management token, the ACL system is bootstrapped once (with the CLI), a
// second bootstrap is refused with the reset index, and Consul's reset
// procedure allows exactly one more; tokens, policies and roles survive a
// kill -9 of the leader and a restart of every server.
func TestACLPersistence(t *testing.T) {
	c := startACLCluster(t, 0, map[string]any{"acl": map[string]any{"enabled": true, "default_policy": "deny"}})
	ctx := scenarioContext(t)

	mgmt := cliBootstrap(ctx, t, c)
	reset := bootstrapIndex(ctx, t, c.Servers()[1])

	cl := newTokenClient(t, c.Servers()[0].HTTPAddr(), mgmt)
	pol, _, err := cl.ACL().PolicyCreate(&api.ACLPolicy{Name: "persist-pol", Rules: `key_prefix "persist/" { policy = "write" }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	role, _, err := cl.ACL().RoleCreate(&api.ACLRole{Name: "persist-role", Policies: []*api.ACLRolePolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := cl.ACL().TokenCreate(&api.ACLToken{Description: "persist-tok", Roles: []*api.ACLTokenRoleLink{{ID: role.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := aclObjects{policy: pol.ID, role: role.ID, token: tok.AccessorID, secret: tok.SecretID, mgmt: mgmt}

	leader := waitLeader(t, c, electionTimeout)
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	waitLeader(t, c, electionTimeout)
	for _, s := range c.RunningServers() {
		want.check(ctx, t, s, "after kill -9 of the leader")
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}

	for _, s := range c.Servers() {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range c.Servers() {
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
	}
	leader = waitLeader(t, c, clusterStartTimeout)
	for _, s := range c.Servers() {
		want.check(ctx, t, s, "after a restart of every server")
	}

	// Consul's reset: the index the refusal names, written into the
	// leader's data dir, allows one bootstrap more, and only one.
	if got := bootstrapIndex(ctx, t, leader); got != reset {
		t.Fatalf("reset index after the restarts is %d, was %d", got, reset)
	}
	if err := os.WriteFile(filepath.Join(leader.DataDir(), "acl-bootstrap-reset"), []byte(strconv.FormatUint(reset, 10)), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := newACLHTTP(t).doSecret(ctx, "", "PUT", leader.HTTPAddr(), "/v1/acl/bootstrap", "")
	if err != nil || r.status != 200 {
		t.Fatalf("bootstrap after the reset: %v %v", r, err)
	}
	var again api.ACLToken
	if err := json.Unmarshal(r.body, &again); err != nil || again.SecretID == "" || again.SecretID == mgmt {
		t.Fatalf("bootstrap after the reset answered %s (%v)", r, err)
	}
	if next := bootstrapIndex(ctx, t, leader); next <= reset {
		t.Fatalf("reset index after the second bootstrap is %d, want more than %d", next, reset)
	}
	want.mgmt = again.SecretID
	want.check(ctx, t, leader, "after the reset bootstrap")
}

// cliBootstrap runs `acl bootstrap` against a server until the ACL system
// is ready, and returns the management token's SecretID.
func cliBootstrap(ctx context.Context, t *testing.T, c *harness.Cluster) string {
	t.Helper()
	var tok api.ACLToken
	eventually(t, 30*time.Second, "acl bootstrap", func() error {
		res := runCLI(ctx, t, "acl", "bootstrap", "-http-addr", c.Servers()[0].HTTPURL(), "-format", "json")
		if res.code != 0 {
			if strings.Contains(res.stderr, "no longer allowed") {
				t.Fatalf("first bootstrap refused: %v", res)
			}
			return fmt.Errorf("%v", res)
		}
		return json.Unmarshal([]byte(res.stdout), &tok)
	})
	if tok.SecretID == "" || len(tok.Policies) != 1 || tok.Policies[0].Name != "global-management" {
		t.Fatalf("bootstrap token %+v", tok)
	}
	return tok.SecretID
}

// bootstrapIndex sends a bootstrap that must be refused and returns the
// reset index Consul's refusal names.
func bootstrapIndex(ctx context.Context, t *testing.T, s *harness.Agent) uint64 {
	t.Helper()
	r, err := newACLHTTP(t).doSecret(ctx, "", "PUT", s.HTTPAddr(), "/v1/acl/bootstrap", "")
	if err != nil {
		t.Fatal(err)
	}
	m := bootstrapRefused.FindStringSubmatch(strings.TrimSpace(string(r.body)))
	if r.status != 403 || m == nil {
		t.Fatalf("second bootstrap via %s: %s, want 403 %s", s.Node(), r, bootstrapRefused)
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil || n == 0 {
		t.Fatalf("reset index %q: %v", m[1], err)
	}
	return n
}

// aclObjects are what must survive: a policy, a role linking it and a
// token linking the role, and a management token.
type aclObjects struct {
	policy, role, token, secret, mgmt string
}

// check reads every object from s (stale, so each server answers from its
// own store) and uses the token through its role.
func (o aclObjects) check(ctx context.Context, t *testing.T, s *harness.Agent, when string) {
	t.Helper()
	cl := newTokenClient(t, s.HTTPAddr(), o.mgmt)
	q := (&api.QueryOptions{AllowStale: true}).WithContext(ctx)
	eventually(t, 20*time.Second, "ACL objects on "+s.Node()+" "+when, func() error {
		p, _, err := cl.ACL().PolicyReadByName("persist-pol", q)
		if err != nil {
			return fmt.Errorf("policy: %w", err)
		}
		if p == nil || p.ID != o.policy {
			return fmt.Errorf("policy: %+v, want ID %s", p, o.policy)
		}
		r, _, err := cl.ACL().RoleReadByName("persist-role", q)
		if err != nil {
			return fmt.Errorf("role: %w", err)
		}
		if r == nil || r.ID != o.role || len(r.Policies) != 1 || r.Policies[0].ID != o.policy {
			return fmt.Errorf("role: %+v, want ID %s linking %s", r, o.role, o.policy)
		}
		tok, _, err := cl.ACL().TokenRead(o.token, q)
		if err != nil {
			return fmt.Errorf("token: %w", err)
		}
		if tok == nil || tok.SecretID != o.secret || len(tok.Roles) != 1 || tok.Roles[0].ID != o.role {
			return fmt.Errorf("token: %+v, want its secret and role %s", tok, o.role)
		}
		return nil
	})
	as := newTokenClient(t, s.HTTPAddr(), o.secret)
	if _, err := as.KV().Put(&api.KVPair{Key: "persist/" + s.Node(), Value: []byte(when)}, nil); err != nil {
		t.Fatalf("%s: write through the role on %s: %v", when, s.Node(), err)
	}
	if _, err := as.KV().Put(&api.KVPair{Key: "other/" + s.Node(), Value: []byte(when)}, nil); !isStatus(err, 403) {
		t.Fatalf("%s: write outside the role on %s: %v, want 403", when, s.Node(), err)
	}
}
