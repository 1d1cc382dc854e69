package harness

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeCluster starts servers and clients whose binary is this test binary
// in fake-agent mode; the returned function sets the leader they report.
func fakeCluster(t *testing.T, servers, clients int, env ...string) (*Cluster, func(addr string)) {
	t.Helper()
	self, ports := selfAndPorts(t)
	leaderFile := filepath.Join(t.TempDir(), "leader")
	c := StartCluster(t, ClusterConfig{
		Binary:  self,
		Ports:   ports,
		Servers: servers,
		Clients: clients,
		Env:     append([]string{childEnv + "=" + childFakeAgent, fakeLeaderFileEnv + "=" + leaderFile}, env...),
	})
	setLeader := func(addr string) {
		if err := os.WriteFile(leaderFile+".tmp", []byte(addr), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(leaderFile+".tmp", leaderFile); err != nil {
			t.Fatal(err)
		}
	}
	return c, setLeader
}

// parsedConfig returns the flags the fake agent last parsed.
func parsedConfig(t *testing.T, a *Agent) fakeConfig {
	t.Helper()
	waitForLogCount(t, a.Process, fakeConfigPrefix, a.Starts())
	logs, err := a.Logs()
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(logs, fakeConfigPrefix)
	line, _, _ := strings.Cut(logs[i+len(fakeConfigPrefix):], "\n")
	var c fakeConfig
	if err := json.Unmarshal([]byte(line), &c); err != nil {
		t.Fatalf("config line %q: %v", line, err)
	}
	return c
}

func TestClusterCommandLines(t *testing.T) {
	c, _ := fakeCluster(t, 3, 2)
	added := c.AddClient(t, "-config-file", "client.json")
	servers, clients := c.Servers(), c.Clients()
	if len(servers) != 3 || len(clients) != 3 || len(c.Agents()) != 6 || added.Node() != "client-2" {
		t.Fatalf("got %d servers, %d clients, added %s", len(servers), len(clients), added.Node())
	}
	var serverSerf []string
	for _, s := range servers {
		serverSerf = append(serverSerf, s.SerfLANAddr())
	}
	seenPorts := map[int]string{}
	for _, a := range c.Agents() {
		cfg := parsedConfig(t, a)
		p := a.Ports()
		for _, port := range []int{p.HTTP, p.GRPC, p.Server, p.SerfLAN} {
			if prev, dup := seenPorts[port]; dup {
				t.Errorf("port %d given to %s and %s", port, prev, a.Node())
			}
			seenPorts[port] = a.Node()
		}
		if cfg.Node != a.Node() || cfg.Bind != Loopback || cfg.Client != Loopback || cfg.LogLevel != "debug" {
			t.Errorf("%s: parsed %+v", a.Node(), cfg)
		}
		if cfg.HTTPPort != p.HTTP || cfg.GRPCPort != p.GRPC || cfg.ServerPort != p.Server || cfg.SerfLANPort != p.SerfLAN || cfg.DNSPort != p.DNS || p.DNS == 0 {
			t.Errorf("%s: ports parsed %+v, want %+v", a.Node(), cfg, p)
		}
		if cfg.DataDir != a.DataDir() || a.DataDir() == "" {
			t.Errorf("%s: data dir %q, want %q", a.Node(), cfg.DataDir, a.DataDir())
		}
		if st, err := os.Stat(a.DataDir()); err != nil || !st.IsDir() {
			t.Errorf("%s: data dir not created: %v", a.Node(), err)
		}
		if len(cfg.Rest) != 0 {
			t.Errorf("%s: unparsed arguments %v", a.Node(), cfg.Rest)
		}
		var wantFiles []string
		if a == added {
			wantFiles = []string{"client.json"}
		}
		if !slices.Equal(cfg.ConfigFiles, wantFiles) {
			t.Errorf("%s: config files %v, want %v", a.Node(), cfg.ConfigFiles, wantFiles)
		}
		wantJoin := slices.DeleteFunc(slices.Clone(serverSerf), func(s string) bool { return s == a.SerfLANAddr() })
		if !slices.Equal(cfg.RetryJoin, wantJoin) {
			t.Errorf("%s: retry-join %v, want %v", a.Node(), cfg.RetryJoin, wantJoin)
		}
		switch a.Mode() {
		case ModeServer:
			if !cfg.Server || cfg.Dev || cfg.BootstrapExpect != 3 || !a.IsServer() {
				t.Errorf("%s: server flags %+v", a.Node(), cfg)
			}
		case ModeClient:
			if cfg.Server || cfg.Dev || a.IsServer() {
				t.Errorf("%s: client flags %+v", a.Node(), cfg)
			}
		}
	}
}

func TestClusterWaitForLeaderFollowsKillAndRestart(t *testing.T) {
	c, setLeader := fakeCluster(t, 3, 1)
	s := c.Servers()
	ctx := t.Context()
	for _, a := range c.Agents() {
		waitForLogCount(t, a.Process, fakeConfigPrefix, 1)
	}

	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := c.WaitForLeader(short)
	cancel()
	if !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("WaitForLeader without a leader = %v, want ErrNoLeader", err)
	}

	setLeader(s[1].ServerAddr())
	l := waitLeader(t, c, 10*time.Second)
	if l != s[1] {
		t.Fatalf("leader %s, want %s", l.Node(), s[1].Node())
	}
	followers, err := c.Followers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(followers) != 2 || followers[0] != s[0] || followers[1] != s[2] {
		t.Fatalf("followers %v", nodes(followers))
	}
	if got := c.ServerByAddr(s[2].ServerAddr()); got != s[2] {
		t.Fatalf("ServerByAddr(%s) = %v", s[2].ServerAddr(), got)
	}
	if err := c.WaitForClients(ctx); err != nil {
		t.Fatal(err)
	}

	// The survivors still name the killed leader: that is no leader.
	if err := l.Kill(); err != nil {
		t.Fatal(err)
	}
	short, cancel = context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = c.WaitForLeader(short)
	cancel()
	if !errors.Is(err, ErrNoLeader) || !strings.Contains(err.Error(), "not a running server") {
		t.Fatalf("WaitForLeader naming a dead server = %v", err)
	}
	if got := len(c.RunningServers()); got != 2 {
		t.Fatalf("%d running servers after a kill", got)
	}
	setLeader(s[0].ServerAddr())
	if got := waitLeader(t, c, 10*time.Second); got != s[0] {
		t.Fatalf("new leader %s, want %s", got.Node(), s[0].Node())
	}

	before := parsedConfig(t, s[1])
	if err := s[1].Restart(); err != nil {
		t.Fatal(err)
	}
	if got := waitLeader(t, c, 10*time.Second); got != s[0] {
		t.Fatalf("leader after restart %s", got.Node())
	}
	after := parsedConfig(t, s[1])
	if !slices.Equal(mustJSON(t, before), mustJSON(t, after)) || s[1].Starts() != 2 {
		t.Fatalf("restart changed the command line:\n%+v\n%+v", before, after)
	}
	if err := c.Crashed(); err != nil {
		t.Fatalf("Crashed() = %v after an intended kill", err)
	}
}

func TestClusterWaitForLeaderFailsFastOnCrash(t *testing.T) {
	c, setLeader := fakeCluster(t, 3, 0, fakeCrashNodeEnv+"=server-2")
	setLeader(c.Servers()[0].ServerAddr())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.WaitForLeader(ctx)
	if !errors.Is(err, ErrUnexpectedExit) || !strings.Contains(err.Error(), "server-2") {
		t.Fatalf("WaitForLeader with a crashed server = %v, want ErrUnexpectedExit naming server-2", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("crash noticed after %s", d)
	}
	report := failureReport(c.Servers()[2].Process, processState(c.Servers()[2].Process), 10)
	if !strings.Contains(report, "CRASHED: exit status 3") || !strings.Contains(report, "crashing as asked") {
		t.Fatalf("failure report:\n%s", report)
	}
}

func TestClusterCleanupKillsEverything(t *testing.T) {
	var c *Cluster
	t.Run("inner", func(t *testing.T) {
		c, _ = fakeCluster(t, 2, 1)
		for _, a := range c.Agents() {
			waitForLogCount(t, a.Process, fakeConfigPrefix, 1)
		}
	})
	for _, a := range c.Agents() {
		if a.Running() {
			t.Errorf("%s (pid %d) still running after the test's cleanup", a.Node(), a.PID())
		}
	}
}

func TestStartDev(t *testing.T) {
	self, ports := selfAndPorts(t)
	leaderFile := filepath.Join(t.TempDir(), "leader")
	c := StartDev(t, DevConfig{
		Binary:    self,
		Ports:     ports,
		ExtraArgs: []string{"-config-file", "x.json", "-config-file", "y.json"},
		Env:       []string{childEnv + "=" + childFakeAgent, fakeLeaderFileEnv + "=" + leaderFile},
	})
	dev := c.Servers()[0]
	if err := os.WriteFile(leaderFile, []byte(dev.ServerAddr()), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := waitLeader(t, c, 10*time.Second); l != dev {
		t.Fatalf("leader %s", l.Node())
	}
	cfg := parsedConfig(t, dev)
	if !cfg.Dev || cfg.Server || cfg.DataDir != "" || cfg.Node != "dev" || !slices.Equal(cfg.ConfigFiles, []string{"x.json", "y.json"}) {
		t.Fatalf("dev flags %+v", cfg)
	}
	if !dev.IsServer() || dev.Mode() != ModeDev || dev.HTTPURL() != "http://"+dev.HTTPAddr() {
		t.Fatalf("dev agent accessors: %v %v %s", dev.IsServer(), dev.Mode(), dev.HTTPURL())
	}
	peers, err := StatusPeers(t.Context(), dev.HTTPAddr())
	if err != nil || !slices.Equal(peers, []string{dev.ServerAddr()}) {
		t.Fatalf("StatusPeers = %v, %v", peers, err)
	}
}

func TestAgentConfigValidate(t *testing.T) {
	ok := AgentConfig{Binary: "b", Mode: ModeServer, Node: "n", DataDir: "d", LogPath: "l", BootstrapExpect: 3,
		Ports: AgentPorts{HTTP: 1, GRPC: 2, Server: 3, SerfLAN: 4}}
	tests := []struct {
		name   string
		mutate func(*AgentConfig)
		valid  bool
	}{
		{"ok", func(*AgentConfig) {}, true},
		{"dev without data dir", func(c *AgentConfig) { c.Mode = ModeDev; c.DataDir = "" }, true},
		{"no binary", func(c *AgentConfig) { c.Binary = "" }, false},
		{"no node", func(c *AgentConfig) { c.Node = "" }, false},
		{"no log", func(c *AgentConfig) { c.LogPath = "" }, false},
		{"missing port", func(c *AgentConfig) { c.Ports.GRPC = 0 }, false},
		{"server without data dir", func(c *AgentConfig) { c.DataDir = "" }, false},
		{"client without data dir", func(c *AgentConfig) { c.Mode = ModeClient; c.DataDir = "" }, false},
		{"server without bootstrap-expect", func(c *AgentConfig) { c.BootstrapExpect = 0 }, false},
		{"bad mode", func(c *AgentConfig) { c.Mode = 7 }, false},
		{"https", func(c *AgentConfig) { c.HTTPS = &HTTPSConfig{CAFile: "ca", CertFile: "c", KeyFile: "k"} }, true},
		{"https without a CA", func(c *AgentConfig) { c.HTTPS = &HTTPSConfig{CertFile: "c", KeyFile: "k"} }, false},
		{"https cert without key", func(c *AgentConfig) { c.HTTPS = &HTTPSConfig{CAFile: "ca", CertFile: "c"} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			_, err := newAgent(c)
			if tt.valid != (err == nil) {
				t.Fatalf("newAgent err = %v, want valid=%v", err, tt.valid)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func waitLeader(t *testing.T, c *Cluster, d time.Duration) *Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	l, err := c.WaitForLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func nodes(as []*Agent) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Node())
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
