package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// leaderPollInterval is how often WaitForLeader asks the servers.
const leaderPollInterval = 100 * time.Millisecond

// ClusterConfig describes a cluster of servers and client agents on
// 127.0.0.1.
type ClusterConfig struct {
	// Binary is the trellis executable (from BuildBinary). Required.
	Binary string
	// Ports hands out every agent's ports. Required; the test owns it.
	Ports *PortAllocator
	// Servers is the number of -server agents (at least 1).
	Servers int
	// Clients is the number of client agents; they retry-join the servers.
	Clients int
	// BootstrapExpect defaults to Servers.
	BootstrapExpect int
	// Dir holds each agent's data dir and log file; empty means t.TempDir().
	Dir string
	// NamePrefix is put before the node names ("server-0", "client-0").
	NamePrefix string
	// LogLevel is passed to every agent; empty means "debug".
	LogLevel string
	// ServerArgs and ClientArgs are appended to the servers' and clients'
	// command lines.
	ServerArgs []string
	ClientArgs []string
	// Env is appended to every agent's environment.
	Env []string
	// ServerHTTPS and ClientHTTPS, when set, make the servers' and the
	// clients' (AddClient's too) HTTP API HTTPS-only and are how the
	// harness probes them (AgentConfig.HTTPS); nil keeps plaintext.
	ServerHTTPS *HTTPSConfig
	ClientHTTPS *HTTPSConfig
}

// DevConfig describes a single `trellis agent -dev` on free ports.
type DevConfig struct {
	Binary    string
	Ports     *PortAllocator
	Node      string // default "dev"
	Dir       string // log location; empty means t.TempDir()
	LogLevel  string
	ExtraArgs []string
	Env       []string
	// HTTPS makes the API HTTPS-only (AgentConfig.HTTPS); nil keeps
	// plaintext.
	HTTPS *HTTPSConfig
}

// Cluster is a set of agents started together. Servers retry-join each
// other's Serf LAN ports; clients retry-join every server.
type Cluster struct {
	cfg     ClusterConfig
	servers []*Agent
	clients []*Agent
}

// StartCluster allocates ports, starts cfg.Servers servers and cfg.Clients
// client agents, and registers one t.Cleanup that kills them all (by PID)
// and prints their log tails if the test failed. It does not wait for a
// leader: call WaitForLeader.
func StartCluster(t testing.TB, cfg ClusterConfig) *Cluster {
	t.Helper()
	c, err := newCluster(t, cfg)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	// Registered before the first start so that a failed start still kills
	// the agents already running.
	t.Cleanup(func() { cleanupAgents(t, c.Agents()) })
	for _, a := range c.Agents() {
		if err := a.Start(); err != nil {
			t.Fatalf("harness: %v", err)
		}
	}
	return c
}

// StartDev starts one -dev agent and returns it as a one-server Cluster, so
// the same WaitForLeader and Leader helpers apply.
func StartDev(t testing.TB, cfg DevConfig) *Cluster {
	t.Helper()
	if cfg.Binary == "" || cfg.Ports == nil {
		t.Fatalf("harness: %v: DevConfig needs Binary and Ports", ErrInvalidConfig)
	}
	if cfg.Node == "" {
		cfg.Node = "dev"
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	ports, err := AllocateAgentPorts(cfg.Ports)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	a, err := newAgent(AgentConfig{
		Binary:    cfg.Binary,
		Mode:      ModeDev,
		Node:      cfg.Node,
		LogPath:   filepath.Join(cfg.Dir, cfg.Node+".log"),
		Ports:     ports,
		LogLevel:  cfg.LogLevel,
		ExtraArgs: cfg.ExtraArgs,
		Env:       cfg.Env,
		HTTPS:     cfg.HTTPS,
	})
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	c := &Cluster{servers: []*Agent{a}}
	t.Cleanup(func() { cleanupAgents(t, c.Agents()) })
	if err := a.Start(); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return c
}

// newCluster validates cfg, allocates every port and prepares (but does not
// start) the agents, so every -retry-join address is known up front.
func newCluster(t testing.TB, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Binary == "" || cfg.Ports == nil || cfg.Servers < 1 || cfg.Clients < 0 {
		return nil, fmt.Errorf("%w: ClusterConfig needs Binary, Ports and Servers >= 1", ErrInvalidConfig)
	}
	if cfg.BootstrapExpect == 0 {
		cfg.BootstrapExpect = cfg.Servers
	}
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	c := &Cluster{cfg: cfg}
	serverPorts := make([]AgentPorts, cfg.Servers)
	for i := range serverPorts {
		p, err := AllocateAgentPorts(cfg.Ports)
		if err != nil {
			return nil, err
		}
		serverPorts[i] = p
	}
	var allSerf []string
	for _, p := range serverPorts {
		allSerf = append(allSerf, hostPort(p.SerfLAN))
	}
	for i, p := range serverPorts {
		var join []string
		for j, addr := range allSerf {
			if j != i {
				join = append(join, addr)
			}
		}
		a, err := c.prepare(ModeServer, fmt.Sprintf("%sserver-%d", cfg.NamePrefix, i), p, join, cfg.ServerArgs, cfg.ServerHTTPS)
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, a)
	}
	for i := range cfg.Clients {
		p, err := AllocateAgentPorts(cfg.Ports)
		if err != nil {
			return nil, err
		}
		a, err := c.prepare(ModeClient, fmt.Sprintf("%sclient-%d", cfg.NamePrefix, i), p, allSerf, cfg.ClientArgs, cfg.ClientHTTPS)
		if err != nil {
			return nil, err
		}
		c.clients = append(c.clients, a)
	}
	return c, nil
}

func (c *Cluster) prepare(mode Mode, node string, ports AgentPorts, join, extra []string, https *HTTPSConfig) (*Agent, error) {
	dataDir := filepath.Join(c.cfg.Dir, node, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("harness: data dir of %s: %w", node, err)
	}
	return newAgent(AgentConfig{
		Binary:          c.cfg.Binary,
		Mode:            mode,
		Node:            node,
		DataDir:         dataDir,
		LogPath:         filepath.Join(c.cfg.Dir, node+".log"),
		Ports:           ports,
		BootstrapExpect: c.cfg.BootstrapExpect,
		RetryJoin:       join,
		LogLevel:        c.cfg.LogLevel,
		ExtraArgs:       extra,
		Env:             c.cfg.Env,
		HTTPS:           https,
	})
}

// AddClient starts one more client agent that retry-joins every server. It
// gets its own t.Cleanup. extraArgs are appended after ClientArgs.
func (c *Cluster) AddClient(t testing.TB, extraArgs ...string) *Agent {
	t.Helper()
	if c.cfg.Ports == nil {
		t.Fatalf("harness: %v: AddClient needs a cluster from StartCluster", ErrInvalidConfig)
	}
	p, err := AllocateAgentPorts(c.cfg.Ports)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	var join []string
	for _, s := range c.servers {
		join = append(join, s.SerfLANAddr())
	}
	args := append(append([]string(nil), c.cfg.ClientArgs...), extraArgs...)
	a, err := c.prepare(ModeClient, fmt.Sprintf("%sclient-%d", c.cfg.NamePrefix, len(c.clients)), p, join, args, c.cfg.ClientHTTPS)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	c.clients = append(c.clients, a)
	t.Cleanup(func() { cleanupAgents(t, []*Agent{a}) })
	if err := a.Start(); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return a
}

// Servers returns the server agents in start order.
func (c *Cluster) Servers() []*Agent { return append([]*Agent(nil), c.servers...) }

// Clients returns the client agents in start order.
func (c *Cluster) Clients() []*Agent { return append([]*Agent(nil), c.clients...) }

// Agents returns servers then clients.
func (c *Cluster) Agents() []*Agent {
	return append(c.Servers(), c.clients...)
}

// RunningServers returns the servers whose process is running.
func (c *Cluster) RunningServers() []*Agent {
	var out []*Agent
	for _, s := range c.servers {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

// ServerByAddr returns the server whose ServerAddr is addr (what
// /v1/status/leader and /v1/status/peers report), or nil.
func (c *Cluster) ServerByAddr(addr string) *Agent {
	for _, s := range c.servers {
		if s.ServerAddr() == addr {
			return s
		}
	}
	return nil
}

// HTTPAddrs returns every server's HTTP address (host:port, whichever the
// scheme; HTTPURLs has the scheme).
func (c *Cluster) HTTPAddrs() []string {
	out := make([]string, 0, len(c.servers))
	for _, s := range c.servers {
		out = append(out, s.HTTPAddr())
	}
	return out
}

// HTTPURLs returns every server's HTTPURL.
func (c *Cluster) HTTPURLs() []string {
	out := make([]string, 0, len(c.servers))
	for _, s := range c.servers {
		out = append(out, s.HTTPURL())
	}
	return out
}

// Crashed returns an error naming every agent that exited without the test
// asking it to (Kill or Stop), nil when there is none.
func (c *Cluster) Crashed() error {
	var errs []error
	for _, a := range c.Agents() {
		if err := a.UnexpectedExit(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Leader asks every running server once for /v1/status/leader. It returns
// the leader when all of them answer the same non-empty address and that
// address is a running server's ServerAddr; otherwise an error wrapping
// ErrNoLeader that lists each server's answer.
func (c *Cluster) Leader(ctx context.Context) (*Agent, error) {
	running := c.RunningServers()
	if len(running) == 0 {
		return nil, fmt.Errorf("%w: no server is running", ErrNoLeader)
	}
	answers := make([]string, len(running))
	agreed := ""
	ok := true
	for i, s := range running {
		leader, err := s.StatusLeader(ctx)
		switch {
		case err != nil:
			answers[i] = fmt.Sprintf("%s: %v", s.Node(), err)
			ok = false
		case leader == "":
			answers[i] = fmt.Sprintf("%s: no leader", s.Node())
			ok = false
		default:
			answers[i] = fmt.Sprintf("%s: %s", s.Node(), leader)
			if agreed == "" {
				agreed = leader
			} else if leader != agreed {
				ok = false
			}
		}
	}
	if ok {
		if l := c.ServerByAddr(agreed); l != nil && l.Running() {
			return l, nil
		}
		answers = append(answers, fmt.Sprintf("(%s is not a running server)", agreed))
	}
	return nil, fmt.Errorf("%w: %s", ErrNoLeader, strings.Join(answers, "; "))
}

// WaitForLeader polls every running server until all report the same
// non-empty leader that is itself a running server, and returns it. It
// returns early with ErrUnexpectedExit when an agent crashed, and with the
// last answers (wrapping ErrNoLeader) when ctx ends. After killing a leader,
// it therefore waits for a new one rather than returning the dead one that
// followers still remember.
func (c *Cluster) WaitForLeader(ctx context.Context) (*Agent, error) {
	ticker := time.NewTicker(leaderPollInterval)
	defer ticker.Stop()
	// lastErr keeps the last round that was not cut short by ctx, whose
	// answers say more than "context deadline exceeded".
	var lastErr error
	for {
		if err := c.Crashed(); err != nil {
			return nil, err
		}
		l, err := c.Leader(ctx)
		if err == nil {
			return l, nil
		}
		if ctx.Err() == nil || lastErr == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%w)", lastErr, ctx.Err())
		case <-ticker.C:
		}
	}
}

// Followers returns the running servers other than the current leader.
func (c *Cluster) Followers(ctx context.Context) ([]*Agent, error) {
	l, err := c.Leader(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Agent
	for _, s := range c.RunningServers() {
		if s != l {
			out = append(out, s)
		}
	}
	return out, nil
}

// WaitForClients polls every running client agent until its
// /v1/status/leader names the servers' current leader, meaning it has joined
// and can reach the servers.
func (c *Cluster) WaitForClients(ctx context.Context) error {
	ticker := time.NewTicker(leaderPollInterval)
	defer ticker.Stop()
	for {
		if err := c.Crashed(); err != nil {
			return err
		}
		pending := c.pendingClients(ctx)
		if pending == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: clients not ready: %s (%w)", ErrNoLeader, strings.Join(pending, "; "), ctx.Err())
		case <-ticker.C:
		}
	}
}

// pendingClients describes the running clients that do not yet report the
// leader; nil when all do.
func (c *Cluster) pendingClients(ctx context.Context) []string {
	l, err := c.Leader(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	var pending []string
	for _, a := range c.clients {
		if !a.Running() {
			continue
		}
		got, err := a.StatusLeader(ctx)
		if err != nil || got != l.ServerAddr() {
			pending = append(pending, fmt.Sprintf("%s: leader %q err %v", a.Node(), got, err))
		}
	}
	return pending
}
