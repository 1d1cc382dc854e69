package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// serfAlive is serf.StatusAlive as /v1/agent/members reports it.
const serfAlive = 1

// Gossip keys of the scenario (base64 of 16 and 32 bytes).
const (
	gossipKey1 = "d8wu8CSUrqgtjVsvcBPmhQ=="
	gossipKey2 = "pUqJrVyVRj5jsiYEkM/tFQYfWyJIv4s3XkvDwy7Cu5s="
	gossipKey3 = "qxycTi/SsePj/TZzCBmNXw=="
)

// TestGossipEncryption: three servers and a client with a gossip key
// form a cluster; an agent with another key never joins (absent from both
// sides' member lists); the key is rotated on the live cluster with
// `trellis keyring -install/-use/-remove` through the client agent, which
// forwards to a server, while writers run, and no acknowledged write is
// lost; the client, restarted with the old key in its config, rejoins
// with the rotated keyring it persisted.
func TestGossipEncryption(t *testing.T) {
	enc := map[string]any{"encrypt": gossipKey1}
	c, leader := startAgentCluster(t, agentClusterConfig{servers: 3, clients: 1, serverConfig: enc, clientConfig: enc})
	ctx := scenarioContext(t)
	client := c.Clients()[0]
	agents := c.Agents()

	aliveMembers := func(a *harness.Agent) (map[string]bool, error) { return aliveMembers(t, a) }
	everyoneSeesAll := func() error {
		for _, a := range agents {
			got, err := aliveMembers(a)
			if err != nil {
				return err
			}
			for _, b := range agents {
				if !got[b.Node()] {
					return fmt.Errorf("%s does not see %s alive: %v", a.Node(), b.Node(), got)
				}
			}
		}
		return nil
	}
	eventually(t, 20*time.Second, "the encrypted cluster to form", everyoneSeesAll)

	t.Run("an agent with another key never joins", func(t *testing.T) {
		outsider := outsiderNeverJoins(t, c, agents, []string{"-encrypt", gossipKey3})
		if err := outsider.Kill(); err != nil {
			t.Fatal(err)
		}
	})

	rc := newRawClient(t)
	acks := newAckLog()
	const prefix = "gossip-rotation/"
	w := startWriters(ctx, rc, c.HTTPAddrs(), 3, prefix, acks)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = w.stop()
		}
	})
	if err := waitAckCount(ctx, acks, 20, 20*time.Second); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}

	keyring := func(args ...string) cliResult {
		t.Helper()
		r := runCLI(ctx, t, append([]string{"keyring", "-http-addr", client.HTTPAddr()}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		return r
	}
	// Three servers in the WAN pool, four agents in the LAN pool.
	wantList := func(r cliResult, keys ...string) {
		t.Helper()
		wan, lan, ok := strings.Cut(r.stdout, "dc1 (LAN):\n")
		if !ok || !strings.Contains(wan, "WAN:\n") {
			t.Fatalf("keyring -list does not show both pools:\n%s", r.stdout)
		}
		for _, k := range keys {
			if !strings.Contains(wan, "  "+k+" [3/3]\n") || !strings.Contains(lan, "  "+k+" [4/4]\n") {
				t.Fatalf("keyring -list does not show %s on every member of both pools:\n%s", k, r.stdout)
			}
		}
	}
	wantList(keyring("-list"), gossipKey1)
	keyring("-install", gossipKey2)
	wantList(keyring("-list"), gossipKey1, gossipKey2)
	keyring("-use", gossipKey2)
	if r := keyring("-list-primary"); !strings.Contains(r.stdout, gossipKey2+" [4/4]") || strings.Contains(r.stdout, gossipKey1) {
		t.Fatalf("primary keys after -use:\n%s", r.stdout)
	}
	keyring("-remove", gossipKey1)
	r := keyring("-list")
	wantList(r, gossipKey2)
	if strings.Contains(r.stdout, gossipKey1) {
		t.Fatalf("the removed key is still listed:\n%s", r.stdout)
	}
	// Removing the primary key is refused by every member.
	if r := runCLI(ctx, t, "keyring", "-http-addr", client.HTTPAddr(), "-remove", gossipKey2); r.code != 1 || !strings.Contains(r.stderr, "error:") {
		t.Fatalf("removing the primary key: %v", r)
	}

	ackedAtRotation := acks.count()
	if err := waitAckCount(ctx, acks, ackedAtRotation+20, 20*time.Second); err != nil {
		t.Fatalf("writes after the rotation: %v", err)
	}
	eventually(t, 20*time.Second, "the cluster whole after the rotation", everyoneSeesAll)

	// The client comes back with encrypt still naming the removed key:
	// the keyring file it persisted wins, with Consul's warning.
	if err := client.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := client.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the restarted client back in every member list", everyoneSeesAll)
	logs, err := client.Logs()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "WARNING: LAN keyring exists but -encrypt given, using keyring") {
		t.Error("the restarted client did not warn that its keyring file wins over encrypt")
	}
	if r := keyring("-list"); strings.Contains(r.stdout, gossipKey1) || !strings.Contains(r.stdout, gossipKey2+" [4/4]") {
		t.Fatalf("keyring after the restart:\n%s", r.stdout)
	}

	stopped = true
	if err := w.stop(); err != nil {
		t.Fatalf("writers saw protocol violations: %v", err)
	}
	acked := acks.snapshot()
	got, _, _, err := rc.kvList(ctx, leader.HTTPAddr(), prefix, modeConsistent)
	if err != nil {
		t.Fatal(err)
	}
	if err := missingAcked(got, acked); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged, none lost; %d attempts, %d retried", len(acked), w.attempts.Load(), w.failures.Load())
}

// aliveMembers is an agent's view: the names of its alive LAN members.
func aliveMembers(t *testing.T, a *harness.Agent) (map[string]bool, error) {
	// Through the harness, which speaks HTTPS to an agent that serves it.
	var ms []api.AgentMember
	if err := a.GetJSON(t.Context(), "/v1/agent/members", &ms); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, m := range ms {
		if m.Status == serfAlive {
			out[m.Name] = true
		}
	}
	return out, nil
}

// outsiderNeverJoins starts a client agent "outsider" (extraArgs give it
// another gossip key) that retry-joins c's servers, and checks through
// several join attempts and gossip rounds that it sees only itself and
// that no observer lists it. It returns the outsider, still running.
func outsiderNeverJoins(t *testing.T, c *harness.Cluster, observers []*harness.Agent, extraArgs []string) *harness.Agent {
	t.Helper()
	ports, err := harness.AllocateAgentPorts(newPorts(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var join []string
	for _, s := range c.Servers() {
		join = append(join, s.SerfLANAddr())
	}
	outsider := harness.StartAgent(t, harness.AgentConfig{
		Binary: requireBinary(t), Mode: harness.ModeClient, Node: "outsider",
		DataDir: filepath.Join(dir, "data"), LogPath: filepath.Join(dir, "outsider.log"),
		Ports: ports, RetryJoin: join,
		ExtraArgs: append(extraArgs, configFile(t, "outsider.json", map[string]any{"retry_interval": joinRetryInterval})...),
	})
	eventually(t, 20*time.Second, "the outsider's HTTP API", func() error {
		_, err := aliveMembers(t, outsider)
		return err
	})
	// Several join attempts (retry_interval 1s) and gossip rounds.
	for range 8 {
		mine, err := aliveMembers(t, outsider)
		if err != nil {
			t.Fatal(err)
		}
		if len(mine) != 1 || !mine["outsider"] {
			t.Fatalf("the outsider sees %v, want only itself", mine)
		}
		for _, a := range observers {
			theirs, err := aliveMembers(t, a)
			if err != nil {
				t.Fatal(err)
			}
			if theirs["outsider"] {
				t.Fatalf("%s lists the outsider, which has another gossip key", a.Node())
			}
		}
		time.Sleep(time.Second)
	}
	return outsider
}
