package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// cliTimeout bounds one CLI invocation.
const cliTimeout = 20 * time.Second

// cliResult is one run of the trellis CLI.
type cliResult struct {
	args   []string
	code   int
	stdout string
	stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("trellis %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// runCLI runs the built binary with args, with no CONSUL_HTTP_* variables
// from the test's environment, and returns its exit code and output.
func runCLI(ctx context.Context, t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, requireBinary(t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONSUL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		res.code = exitErr.ExitCode()
	default:
		t.Fatalf("trellis %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// TestCLIAgentCommands: the CLI's members, services register/deregister
// and maint against a client agent (-http-addr), with exit codes and
// effects checked through the HTTP API.
func TestCLIAgentCommands(t *testing.T) {
	c, leader := startAgentCluster(t, agentClusterConfig{servers: 1, clients: 1})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	client := c.Clients()[0]
	addr := client.HTTPAddr()
	httpAddr := []string{"-http-addr", addr}

	t.Run("members", func(t *testing.T) {
		r := runCLI(ctx, t, append([]string{"members"}, httpAddr...)...)
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 1+len(c.Agents()) || !strings.HasPrefix(lines[0], "Node") {
			t.Fatalf("want a header and %d members: %v", len(c.Agents()), r)
		}
		for _, a := range c.Agents() {
			kind := "client"
			if a.IsServer() {
				kind = "server"
			}
			if !hasLine(lines, a.Node(), a.SerfLANAddr(), "alive", kind) {
				t.Errorf("no line with %s %s alive %s: %v", a.Node(), a.SerfLANAddr(), kind, r)
			}
		}
		if r := runCLI(ctx, t, "members", "-http-addr", "127.0.0.1:1"); r.code != 1 {
			t.Errorf("members against a closed port: want exit 1: %v", r)
		}
	})

	t.Run("operator raft list-peers", func(t *testing.T) {
		// Through the client agent: the Raft configuration, with the
		// commit indexes of the leader's server health.
		r := runCLI(ctx, t, append([]string{"operator", "raft", "list-peers"}, httpAddr...)...)
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || !strings.Contains(lines[0], "Commit Index") || !hasLine(lines, leader.Node(), "leader", "true", "_") {
			t.Fatalf("want a header with commit indexes and the leader's line: %v", r)
		}
	})

	const id, name = "cli-web-1", "cli-web"
	t.Run("services register", func(t *testing.T) {
		// Consul's service definition file, in its snake_case spelling.
		file := filepath.Join(t.TempDir(), "web.json")
		def := `{"service": {"name": "cli-web", "id": "cli-web-1", "port": 8080, "tags": ["cli"],
			"enable_tag_override": true, "check": {"ttl": "30s"},
			"connect": {"sidecar_service": {}}}}`
		if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCLI(ctx, t, append(append([]string{"services", "register"}, httpAddr...), file)...)
		if r.code != 0 || !strings.Contains(r.stdout, "Registered service: "+name) {
			t.Fatalf("%v", r)
		}
		services, err := agentServices(ctx, rc, addr)
		if err != nil {
			t.Fatal(err)
		}
		web, ok := services[id]
		if !ok || web.Service != name || web.Port != 8080 || len(web.Tags) != 1 || web.Tags[0] != "cli" || !web.EnableTagOverride {
			t.Errorf("agent/services[%s] = %+v (present %v)", id, web, ok)
		}
		if sc, ok := services[id+"-sidecar-proxy"]; !ok {
			t.Errorf("no sidecar registered from connect.sidecar_service: %v", keysOf(services))
		} else if err := checkSidecar(sc, name, id, 8080); err != nil {
			t.Error(err)
		}
		checks, err := agentChecks(ctx, rc, addr)
		if err != nil {
			t.Fatal(err)
		}
		if ch, ok := checks["service:"+id]; !ok || ch.Type != "ttl" || ch.Status != "critical" {
			t.Errorf("check service:%s = %+v (present %v), want a critical ttl check", id, ch, ok)
		}
		eventually(t, syncTimeout, "the registered service in the catalog", func() error {
			return serviceInHealth(ctx, rc, leader.HTTPAddr(), name, client.Node(), id, nil, "critical")
		})

		// A file with an invalid definition: exit 1, nothing registered.
		bad := filepath.Join(t.TempDir(), "bad.json")
		if err := os.WriteFile(bad, []byte(`{"service": {"id": "cli-noname", "port": 1}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runCLI(ctx, t, append(append([]string{"services", "register"}, httpAddr...), bad)...); r.code != 1 {
			t.Errorf("registering a definition without a name: want exit 1: %v", r)
		}
	})

	t.Run("maint", func(t *testing.T) {
		r := runCLI(ctx, t, append([]string{"maint", "-enable", "-reason", "cli smoke"}, httpAddr...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "Node maintenance is now enabled") {
			t.Fatalf("%v", r)
		}
		checks, err := agentChecks(ctx, rc, addr)
		if err != nil {
			t.Fatal(err)
		}
		if ch, ok := checks["_node_maintenance"]; !ok || ch.Status != "critical" || ch.Notes != "cli smoke" {
			t.Errorf("_node_maintenance = %+v (present %v), want critical with Notes %q", ch, ok, "cli smoke")
		}
		eventually(t, syncTimeout, "node maintenance on the server", func() error {
			return nodeCheckStatus(ctx, rc, leader.HTTPAddr(), client.Node(), "_node_maintenance", "critical")
		})
		if r := runCLI(ctx, t, append([]string{"maint"}, httpAddr...)...); r.code != 0 || !strings.Contains(r.stdout, "cli smoke") {
			t.Errorf("maint listing: %v", r)
		}

		r = runCLI(ctx, t, append([]string{"maint", "-enable", "-service", id, "-reason", "svc smoke"}, httpAddr...)...)
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		checks, err = agentChecks(ctx, rc, addr)
		if err != nil {
			t.Fatal(err)
		}
		if ch, ok := checks["_service_maintenance:"+id]; !ok || ch.Status != "critical" || ch.ServiceID != id {
			t.Errorf("_service_maintenance:%s = %+v (present %v)", id, ch, ok)
		}

		for _, args := range [][]string{{"maint", "-disable", "-service", id}, {"maint", "-disable"}} {
			if r := runCLI(ctx, t, append(args, httpAddr...)...); r.code != 0 {
				t.Fatalf("%v", r)
			}
		}
		checks, err = agentChecks(ctx, rc, addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, cid := range []string{"_node_maintenance", "_service_maintenance:" + id} {
			if _, ok := checks[cid]; ok {
				t.Errorf("%s still registered after -disable", cid)
			}
		}
		eventually(t, syncTimeout, "node maintenance gone from the server", func() error {
			err := nodeCheckStatus(ctx, rc, leader.HTTPAddr(), client.Node(), "_node_maintenance", "")
			if errors.Is(err, errNoSuchCheck) {
				return nil
			}
			if err == nil {
				return errors.New("_node_maintenance still in the catalog")
			}
			return err
		})
		if r := runCLI(ctx, t, append([]string{"maint", "-enable", "-disable"}, httpAddr...)...); r.code != 1 {
			t.Errorf("maint -enable -disable: want exit 1: %v", r)
		}
	})

	t.Run("services deregister", func(t *testing.T) {
		r := runCLI(ctx, t, append([]string{"services", "deregister", "-id", id}, httpAddr...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "Deregistered service: "+id) {
			t.Fatalf("%v", r)
		}
		services, err := agentServices(ctx, rc, addr)
		if err != nil {
			t.Fatal(err)
		}
		if len(services) != 0 {
			t.Errorf("agent/services after deregister = %v, want none (the sidecar goes with its parent)", keysOf(services))
		}
		eventually(t, syncTimeout, "the service gone from the catalog", func() error {
			return serviceNotInHealth(ctx, rc, leader.HTTPAddr(), name, client.Node(), id, nil)
		})
		if r := runCLI(ctx, t, append([]string{"services", "deregister", "-id", "no-such-service"}, httpAddr...)...); r.code != 1 {
			t.Errorf("deregistering an unknown ID: want exit 1: %v", r)
		}
	})
}

// hasLine reports whether one of lines contains every field as a
// whitespace-separated word.
func hasLine(lines []string, fields ...string) bool {
	for _, l := range lines {
		words := map[string]bool{}
		for _, w := range strings.Fields(l) {
			words[w] = true
		}
		all := true
		for _, f := range fields {
			all = all && words[f]
		}
		if all {
			return true
		}
	}
	return false
}

// errNoSuchCheck is nodeCheckStatus's answer for a check that is not there.
var errNoSuchCheck = errors.New("no such check")

// nodeCheckStatus returns nil when GET /v1/health/node/<node> on addr lists
// checkID with status want (any status when want is empty).
func nodeCheckStatus(ctx context.Context, rc *rawClient, addr, node, checkID, want string) error {
	var checks []healthCheck
	if _, err := rc.getJSON(ctx, addr, "/v1/health/node/"+node, &checks); err != nil {
		return err
	}
	for _, ch := range checks {
		if ch.CheckID == checkID {
			if want != "" && ch.Status != want {
				return fmt.Errorf("%s on %s is %s, want %s", checkID, node, ch.Status, want)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s on %s", errNoSuchCheck, checkID, node)
}

// TestAgentRefusesProtectionNotProvided: the real binary, given a config
// or flag that asks for protection it cannot give (a feature Trellis does
// not provide yet, TLS verification without a CA to verify with, a gossip
// key that is not one, auto_encrypt where it cannot apply), exits non-zero
// before it serves anything, naming the setting. Each run has free ports, so that a start that wrongly
// succeeds takes nothing of anyone's.
func TestAgentRefusesProtectionNotProvided(t *testing.T) {
	ctx := scenarioContext(t)
	dir := t.TempDir()
	ports := newPorts(t)
	for _, tc := range []struct {
		name string
		file string // a config file's content, or "" for none
		args []string
		want []string // in stderr
	}{
		{"auto_config", `{"auto_config": {"enabled": true}}`, nil, []string{"auto_config.enabled", "refusing to start"}},
		{"auto_encrypt on a server", `{"auto_encrypt": {"tls": true}}`, nil, []string{"auto_encrypt.tls can only be used on a client"}},
		{"tls verification without a CA", `{"tls": {"defaults": {"verify_incoming": true}}}`, nil,
			[]string{"tls.defaults.verify_incoming", "names a CA to verify with"}},
		{"a gossip key that is not one", "", []string{"-encrypt", "c2hvcnQ="}, []string{"encrypt has invalid key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ap, err := harness.AllocateAgentPorts(ports)
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"agent", "-dev",
				"-http-port", strconv.Itoa(ap.HTTP), "-grpc-port", strconv.Itoa(ap.GRPC), "-server-port", strconv.Itoa(ap.Server),
				"-serf-lan-port", strconv.Itoa(ap.SerfLAN), "-dns-port", strconv.Itoa(ap.DNS), "-serf-wan-port", strconv.Itoa(ap.SerfWAN),
			}, tc.args...)
			if tc.file != "" {
				path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "-config-file", path)
			}
			r := runCLI(ctx, t, args...)
			if r.code == 0 {
				t.Fatalf("want a non-zero exit: %v", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Fatalf("want %q in stderr: %v", w, r)
				}
			}
		})
	}
}
