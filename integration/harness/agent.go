package harness

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
)

// Loopback is the only address test agents bind to.
const Loopback = "127.0.0.1"

// Mode selects how an agent runs.
type Mode int

// Agent modes, matching the three ways to run `trellis agent`.
const (
	// ModeServer is `agent -server -bootstrap-expect N -data-dir D`.
	ModeServer Mode = iota
	// ModeClient is `agent -data-dir D` (no -server): a client agent.
	ModeClient
	// ModeDev is `agent -dev`: one in-memory server that is its own client.
	ModeDev
)

// String names the mode for log file names and messages.
func (m Mode) String() string {
	switch m {
	case ModeServer:
		return "server"
	case ModeClient:
		return "client"
	case ModeDev:
		return "dev"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// AgentPorts are the ports one agent listens on, all on 127.0.0.1.
type AgentPorts struct {
	// HTTP is the HTTP API's port: -http-port, or -https-port (with
	// -http-port -1) when AgentConfig.HTTPS is set.
	HTTP    int
	GRPC    int
	Server  int
	SerfLAN int
	// DNS is the DNS interface's port (UDP and TCP); 0 passes -dns-port
	// -1, so that no agent takes Consul's default 8600.
	DNS int
	// SerfWAN is a server's Serf WAN port; 0 passes -serf-wan-port -1,
	// so that no server takes Consul's default 8302.
	SerfWAN int
}

// AllocateAgentPorts takes the six ports of one agent from the allocator.
func AllocateAgentPorts(a *PortAllocator) (AgentPorts, error) {
	ps, err := a.Ports(6)
	if err != nil {
		return AgentPorts{}, err
	}
	return AgentPorts{HTTP: ps[0], GRPC: ps[1], Server: ps[2], SerfLAN: ps[3], DNS: ps[4], SerfWAN: ps[5]}, nil
}

// AgentConfig is everything needed to run one `trellis agent`.
type AgentConfig struct {
	// Binary is the trellis executable (from BuildBinary).
	Binary string
	// Mode is server, client or dev.
	Mode Mode
	// Node is the node name (-node); it also names the process.
	Node string
	// DataDir is -data-dir; required for servers and clients, ignored for dev.
	DataDir string
	// LogPath receives stdout and stderr.
	LogPath string
	// Ports are passed as -http-port, -grpc-port, -server-port,
	// -serf-lan-port, -dns-port and -serf-wan-port.
	Ports AgentPorts
	// HTTPS, when set, serves the HTTP API over HTTPS only on Ports.HTTP
	// (-http-port -1 -https-port Ports.HTTP) and is how the harness probes
	// it; nil keeps plaintext HTTP. The agent's certificate must come from
	// its configuration (ExtraArgs).
	HTTPS *HTTPSConfig
	// BootstrapExpect is -bootstrap-expect for servers (ignored otherwise).
	BootstrapExpect int
	// RetryJoin lists host:port Serf LAN addresses, one -retry-join each.
	RetryJoin []string
	// LogLevel is -log-level; empty means "debug".
	LogLevel string
	// ExtraArgs are appended after the generated flags (for example
	// -config-file F or -datacenter dc2).
	ExtraArgs []string
	// Env is appended to the process environment.
	Env []string
}

// Args returns the command line (after the program name) for cfg.
func (c AgentConfig) Args() []string {
	level := c.LogLevel
	if level == "" {
		level = "debug"
	}
	args := []string{"agent"}
	switch c.Mode {
	case ModeDev:
		args = append(args, "-dev")
	case ModeServer:
		args = append(args, "-server", "-bootstrap-expect", strconv.Itoa(c.BootstrapExpect), "-data-dir", c.DataDir)
	case ModeClient:
		args = append(args, "-data-dir", c.DataDir)
	}
	args = append(args,
		"-node", c.Node,
		"-bind", Loopback,
		"-client", Loopback,
	)
	if c.HTTPS != nil {
		args = append(args, "-http-port", "-1", "-https-port", strconv.Itoa(c.Ports.HTTP))
	} else {
		args = append(args, "-http-port", strconv.Itoa(c.Ports.HTTP))
	}
	args = append(args,
		"-grpc-port", strconv.Itoa(c.Ports.GRPC),
		"-server-port", strconv.Itoa(c.Ports.Server),
		"-serf-lan-port", strconv.Itoa(c.Ports.SerfLAN),
		"-dns-port", strconv.Itoa(cmp.Or(c.Ports.DNS, -1)),
		"-serf-wan-port", strconv.Itoa(cmp.Or(c.Ports.SerfWAN, -1)),
	)
	for _, j := range c.RetryJoin {
		args = append(args, "-retry-join", j)
	}
	args = append(args, "-log-level", level)
	return append(args, c.ExtraArgs...)
}

func (c AgentConfig) validate() error {
	switch {
	case c.Binary == "":
		return fmt.Errorf("%w: agent %q: Binary is required", ErrInvalidConfig, c.Node)
	case c.Node == "":
		return fmt.Errorf("%w: agent Node is required", ErrInvalidConfig)
	case c.LogPath == "":
		return fmt.Errorf("%w: agent %q: LogPath is required", ErrInvalidConfig, c.Node)
	case c.Ports.HTTP == 0 || c.Ports.GRPC == 0 || c.Ports.Server == 0 || c.Ports.SerfLAN == 0:
		return fmt.Errorf("%w: agent %q: all four ports are required", ErrInvalidConfig, c.Node)
	case c.Mode != ModeDev && c.DataDir == "":
		return fmt.Errorf("%w: agent %q: DataDir is required for a %s", ErrInvalidConfig, c.Node, c.Mode)
	case c.Mode == ModeServer && c.BootstrapExpect < 1:
		return fmt.Errorf("%w: server %q: BootstrapExpect must be at least 1", ErrInvalidConfig, c.Node)
	case c.Mode < ModeServer || c.Mode > ModeDev:
		return fmt.Errorf("%w: agent %q: unknown mode %d", ErrInvalidConfig, c.Node, c.Mode)
	}
	if c.HTTPS != nil {
		if err := c.HTTPS.validate(); err != nil {
			return fmt.Errorf("agent %q: %w", c.Node, err)
		}
	}
	return nil
}

// Agent is one running (or stopped) `trellis agent` process. The embedded
// Process gives Kill, Stop, Restart, Logs, LogTail, PID and Running; a
// restart reuses the same flags, ports and data dir.
type Agent struct {
	*Process
	cfg AgentConfig
}

// newAgent validates cfg and prepares the process without starting it.
func newAgent(cfg AgentConfig) (*Agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.RetryJoin = append([]string(nil), cfg.RetryJoin...)
	cfg.ExtraArgs = append([]string(nil), cfg.ExtraArgs...)
	cfg.Env = append([]string(nil), cfg.Env...)
	cfg.HTTPS = cfg.HTTPS.clone()
	p, err := NewProcess(ProcessConfig{
		Name:    cfg.Node,
		Path:    cfg.Binary,
		Args:    cfg.Args(),
		Env:     cfg.Env,
		LogPath: cfg.LogPath,
	})
	if err != nil {
		return nil, err
	}
	return &Agent{Process: p, cfg: cfg}, nil
}

// StartAgent starts one agent and registers a t.Cleanup that kills it and,
// if the test failed, prints the tail of its log. Use StartCluster for
// servers that must find each other; StartAgent suits a lone client agent
// joining an existing cluster or a custom command line.
func StartAgent(t testing.TB, cfg AgentConfig) *Agent {
	t.Helper()
	a, err := newAgent(cfg)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	t.Cleanup(func() { cleanupAgents(t, []*Agent{a}) })
	if err := a.Start(); err != nil {
		t.Fatalf("harness: %v", err)
	}
	return a
}

// Config returns a copy of the agent's configuration.
func (a *Agent) Config() AgentConfig {
	c := a.cfg
	c.RetryJoin = append([]string(nil), c.RetryJoin...)
	c.ExtraArgs = append([]string(nil), c.ExtraArgs...)
	c.Env = append([]string(nil), c.Env...)
	c.HTTPS = c.HTTPS.clone()
	return c
}

// Node returns the agent's node name.
func (a *Agent) Node() string { return a.cfg.Node }

// Mode returns server, client or dev.
func (a *Agent) Mode() Mode { return a.cfg.Mode }

// IsServer reports whether the agent is a Raft server (a -server or a -dev
// agent).
func (a *Agent) IsServer() bool { return a.cfg.Mode == ModeServer || a.cfg.Mode == ModeDev }

// Ports returns the agent's ports.
func (a *Agent) Ports() AgentPorts { return a.cfg.Ports }

// DataDir returns -data-dir ("" for a dev agent).
func (a *Agent) DataDir() string { return a.cfg.DataDir }

// HTTPAddr returns "127.0.0.1:<http-port>", the form consul/api's
// Config.Address takes; with HTTPS set it is the HTTPS port, so pair it with
// Scheme.
func (a *Agent) HTTPAddr() string { return hostPort(a.cfg.Ports.HTTP) }

// Scheme returns "https" when the agent serves its API over HTTPS, else
// "http": consul/api's Config.Scheme.
func (a *Agent) Scheme() string {
	if a.cfg.HTTPS != nil {
		return "https"
	}
	return "http"
}

// HTTPURL returns "http://127.0.0.1:<http-port>", or "https://..." when the
// agent serves HTTPS: what -http-addr and CONSUL_HTTP_ADDR take.
func (a *Agent) HTTPURL() string { return a.Scheme() + "://" + a.HTTPAddr() }

// HTTPS returns a copy of the agent's HTTPS setting, nil for plaintext.
func (a *Agent) HTTPS() *HTTPSConfig { return a.cfg.HTTPS.clone() }

// HTTPClient returns a client for the agent's API: plaintext, or trusting
// HTTPS.CAFile and presenting HTTPS.CertFile, loaded now. It keeps no
// connections alive (the agent may be killed) and bounds each request.
func (a *Agent) HTTPClient() (*http.Client, error) { return newHTTPClient(a.cfg.HTTPS) }

// GetJSON GETs path (with its query) from the agent's API, over HTTPS when
// the agent serves it, and decodes a 200 answer into out; other statuses
// give an error wrapping ErrHTTPStatus.
func (a *Agent) GetJSON(ctx context.Context, path string, out any) error {
	return a.endpoint().getJSON(ctx, path, out)
}

// StatusLeader asks the agent for /v1/status/leader: the leader's
// ServerAddr, or "" when it knows none.
func (a *Agent) StatusLeader(ctx context.Context) (string, error) {
	return a.endpoint().statusLeader(ctx)
}

// StatusPeers asks the agent for /v1/status/peers: the voters' ServerAddrs.
func (a *Agent) StatusPeers(ctx context.Context) ([]string, error) {
	return a.endpoint().statusPeers(ctx)
}

func (a *Agent) endpoint() endpoint {
	return endpoint{base: a.HTTPURL(), https: a.cfg.HTTPS}
}

// GRPCAddr returns "127.0.0.1:<grpc-port>" (xDS).
func (a *Agent) GRPCAddr() string { return hostPort(a.cfg.Ports.GRPC) }

// ServerAddr returns "127.0.0.1:<server-port>", the address a server reports
// in /v1/status/leader and /v1/status/peers.
func (a *Agent) ServerAddr() string { return hostPort(a.cfg.Ports.Server) }

// DNSAddr returns "127.0.0.1:<dns-port>", for UDP and TCP; "" when the
// agent runs without DNS.
func (a *Agent) DNSAddr() string {
	if a.cfg.Ports.DNS == 0 {
		return ""
	}
	return hostPort(a.cfg.Ports.DNS)
}

// SerfLANAddr returns "127.0.0.1:<serf-lan-port>", what -retry-join takes.
func (a *Agent) SerfLANAddr() string { return hostPort(a.cfg.Ports.SerfLAN) }

func hostPort(p int) string { return net.JoinHostPort(Loopback, strconv.Itoa(p)) }
