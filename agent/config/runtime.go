package config

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RuntimeConfig is the agent's resolved configuration: defaults, the -dev
// overlay, config files and flags merged, validated and with every derived
// value filled in (advertise address, per-listener bind addresses, node ID).
// The agent reads it and never needs to know where a value came from.
type RuntimeConfig struct {
	// DevMode is -dev: a single server that bootstraps itself and keeps Raft
	// and the state store in memory. DataDir may still be set (the node ID
	// is then kept there) but nothing else is persisted.
	DevMode bool
	// ServerMode makes the agent a Raft voter holding the state store.
	ServerMode bool
	// Bootstrap lets a server elect itself alone (single-server clusters).
	Bootstrap bool
	// BootstrapExpect is the number of servers to wait for before
	// bootstrapping the cluster; 0 when unset. Exclusive with Bootstrap.
	BootstrapExpect int

	// NodeName is the node's name in the catalog and in Serf (default: the
	// host name).
	NodeName string
	// NodeID is the node's UUID, lower case: configured, read from
	// <DataDir>/node-id, or generated (and then written there).
	NodeID string
	// Datacenter is the lower-case datacenter name (default "dc1").
	Datacenter string
	// NodeMeta is the node's metadata in the catalog.
	NodeMeta map[string]string
	// Locality is the node's region and zone (nil when not configured).
	Locality *Locality

	// DataDir holds Raft, local state and the node ID. Required unless
	// DevMode.
	DataDir string

	// Addresses are the IPs each listener binds and the one others use to
	// reach this node.
	Addresses Addresses
	// Ports are the listener ports.
	Ports Ports

	// RetryJoin lists the Serf LAN addresses to join at start, retried
	// every RetryInterval; an entry may lack a port (the Serf LAN port is
	// then assumed, as Consul does).
	RetryJoin []string
	// RetryInterval is the wait between join attempts (default 30s).
	RetryInterval time.Duration
	// RetryMax bounds join attempts; 0 retries forever.
	RetryMax int

	// LeaveOnTerminate: SIGTERM leaves the cluster gracefully before the
	// agent stops. Default: true on clients, false on servers (Consul's).
	LeaveOnTerminate bool
	// SkipLeaveOnInterrupt: SIGINT stops the agent without leaving.
	// Default: false on clients, true on servers (Consul's; sdk/testutil sets it).
	SkipLeaveOnInterrupt bool
	// ReconnectTimeout is how long a failed node stays in the member list
	// before it is reaped (default 72h, at least 8h as in Consul).
	ReconnectTimeout time.Duration

	// SessionTTLMin is the smallest session TTL accepted (default 10s).
	SessionTTLMin time.Duration
	// AEInterval is the base interval of the anti-entropy full sync
	// (default 1m, scaled up with the cluster size by the syncer).
	AEInterval time.Duration
	// SyncCoordinateIntervalMin is the shortest interval between two
	// coordinate reports of this agent (default 15s; scaled up so that a
	// cluster sends at most 64 reports a second, as Consul's).
	SyncCoordinateIntervalMin time.Duration
	// CheckUpdateInterval rate-limits check output-only updates to the
	// catalog (default 5m; 0 sends every change).
	CheckUpdateInterval time.Duration
	// RaftMultiplier scales Raft's timing (1 fastest, 10 slowest); Consul's
	// default is 5, and 1 in -dev.
	RaftMultiplier int
	// RPCHoldTimeout is how long a client agent keeps retrying an RPC
	// while no server answers (performance.rpc_hold_timeout, 7s) before
	// it fails, and ACLs fall back on acl.down_policy.
	RPCHoldTimeout time.Duration
	// Limits bound request sizes.
	Limits Limits

	// Connect configures the service mesh and its built-in CA.
	Connect Connect
	// XDSUpdateMaxPerSecond bounds proxy configuration snapshot deliveries
	// across all proxies of the agent (Consul's xds.update_max_per_second,
	// default 250; 0 = unlimited, the -dev default).
	XDSUpdateMaxPerSecond float64
	// Autopilot is the autopilot block: the configuration the leader
	// stores when the cluster has none.
	Autopilot Autopilot
	// IntentionDefaultPolicy is "allow" or "deny": what intentions decide
	// when none matches. It follows acl.default_policy, as in Consul
	// (default allow).
	IntentionDefaultPolicy string

	// ACL is the acl block (acl.go).
	ACL ACL

	// TLS holds the tls block's settings per protocol; tlsutil reads the
	// files and builds the listeners' and dialers' configurations.
	TLS TLS
	// AutoEncrypt is the auto_encrypt block (auto_encrypt.go).
	AutoEncrypt AutoEncrypt

	// DNS configures the DNS interface (domain, alt_domain, recursors,
	// dns_config); it listens on Addresses.DNS and Ports.DNS.
	DNS DNS

	// Encrypt is gossip encryption.
	Encrypt Encrypt

	// Logging sets the agent's log output.
	Logging Logging

	// DisableUpdateCheck mirrors Consul's key; Trellis never checks for
	// updates, so it changes nothing but is reported in /v1/agent/self.
	DisableUpdateCheck bool

	// PidFile, when set, is where the agent command writes its process ID
	// at start; it removes the file when it exits.
	PidFile string

	// EnableDebug serves Go's profiles under /debug/pprof/ on the HTTP
	// API (Consul's enable_debug; on in -dev).
	EnableDebug bool
	// EnableScriptChecks runs script and Docker checks, whoever registers
	// them: config files and the HTTP API. EnableLocalScriptChecks runs
	// only those of config files; the HTTP API refuses them (Consul's
	// enable_script_checks and enable_local_script_checks).
	EnableScriptChecks      bool
	EnableLocalScriptChecks bool

	// Services are the service definitions of the config sources (their
	// service and services keys), and Checks their check definitions, in
	// the order read. The agent registers them at start and again on each
	// reload, without persisting them: the files are their record.
	Services []Definition
	Checks   []Definition

	// Watches are the watch definitions of every config source, in the
	// order read; the agent runs them (agent/watches) and restarts them on
	// reload.
	Watches []map[string]any

	// ConfigFiles are the files read, in the order they were merged.
	ConfigFiles []string
}

// Addresses are bind and advertise IPs. Client-facing listeners (HTTP,
// gRPC) bind every address of their list; cluster-facing ones (server RPC,
// Serf LAN) bind one address.
type Addresses struct {
	// Bind is bind_addr, for server RPC (and Serf LAN unless SerfLAN is
	// set). It may be unspecified (0.0.0.0, the Consul default outside
	// -dev); Advertise is then detected.
	Bind string
	// SerfLAN is the Serf LAN bind IP (Consul's serf_lan key); defaults to
	// Bind.
	SerfLAN string
	// Advertise is the IP other nodes use to reach this one (Serf and
	// server RPC); never unspecified.
	Advertise string
	// Client is client_addr split on spaces: the default bind list of the
	// client listeners (default 127.0.0.1).
	Client []string
	// HTTP and GRPC are the bind lists of the HTTP API and the xDS/gRPC
	// listener (addresses.http / addresses.grpc, default Client). An entry
	// may be "unix:///path/to/socket".
	HTTP []string
	GRPC []string
	// DNS is the bind list of the DNS interface, UDP and TCP
	// (addresses.dns, default Client).
	DNS []string
	// HTTPS and GRPCTLS are the bind lists of the HTTPS API and the
	// gRPC-TLS (xDS) listener (addresses.https / addresses.grpc_tls,
	// default Client).
	HTTPS   []string
	GRPCTLS []string
}

// Ports are listener ports. -1 disables an optional listener (gRPC, DNS,
// HTTPS, gRPC TLS), as in Consul.
type Ports struct {
	HTTP    int // default 8500; -1 disables plaintext HTTP
	GRPC    int // xDS and gRPC health; default 8502 (enabled even outside -dev)
	Server  int // server RPC; default 8300
	SerfLAN int // default 8301
	// SidecarMin and SidecarMax bound the ports given to sidecar proxies
	// registered without one (default 21000-21255).
	SidecarMin int
	SidecarMax int
	DNS        int // UDP and TCP; default 8600
	// HTTPS serves the HTTP API over TLS (tls.https); GRPCTLS serves xDS
	// over TLS (tls.grpc). Both default to -1: off.
	HTTPS   int
	GRPCTLS int
	// SerfWAN is a server's WAN pool port (default 8302, -1 for none);
	// client agents have no WAN pool.
	SerfWAN int
}

// Limits bound request sizes.
type Limits struct {
	// KVMaxValueSize is the largest KV value accepted (default 512 KiB).
	KVMaxValueSize uint64
	// TxnMaxReqLen is the largest /v1/txn body accepted (default 512 KiB).
	TxnMaxReqLen uint64
}

// Connect configures the service mesh.
type Connect struct {
	// Enabled turns Connect on. Trellis is a mesh: default true.
	Enabled bool
	// CAProvider is "consul", the built-in CA (the only one).
	CAProvider string
	// ClusterID fixes the trust domain "<ClusterID>.consul" (connect.ca_config
	// .cluster_id); empty lets the leader generate one at CA bootstrap.
	ClusterID string
	// LeafCertTTL and RootCertTTL are the certificate lifetimes (Consul's
	// defaults 72h and 87600h).
	LeafCertTTL time.Duration
	RootCertTTL time.Duration
	// CSRMaxPerSecond (nil: Consul's 50) and CSRMaxConcurrent (0: off;
	// when set, the rate is ignored) are the leader's leaf-signing limits
	// a new CA configuration starts with (connect.ca_config
	// .csr_max_per_second, .csr_max_concurrent); the CA configuration
	// API changes them afterwards.
	CSRMaxPerSecond  *float64
	CSRMaxConcurrent int
}

// DNS is the DNS interface's configuration: Consul's domain, alt_domain,
// recursors and dns_config keys, resolved. agent/dns.Config says what each
// does to an answer.
type DNS struct {
	Domain    string   // lower case, fully qualified: "consul."
	AltDomain string   // "" when unset
	Recursors []string // "ip:port"; port 53 when the setting gave none

	RecursorRandom     bool // recursor_strategy "random" (default "sequential")
	RecursorTimeout    time.Duration
	NodeTTL            time.Duration
	ServiceTTL         map[string]time.Duration // keys as configured, "*" wildcards included
	AllowStale         bool
	MaxStale           time.Duration
	OnlyPassing        bool
	EnableTruncate     bool
	UDPAnswerLimit     int
	ARecordLimit       int
	NodeMetaTXT        bool // enable_additional_node_meta_txt
	DisableCompression bool
	SOA                SOA
}

// SOA is dns_config.soa.
type SOA struct {
	Refresh, Retry, Expire, MinTTL uint32
}

// Encrypt is gossip encryption: Consul's encrypt, encrypt_verify_incoming,
// encrypt_verify_outgoing and disable_keyring_file.
type Encrypt struct {
	// Key is the base64 gossip key ("" for none), already checked to be
	// 16, 24 or 32 bytes.
	Key string
	// VerifyIncoming refuses plaintext gossip, VerifyOutgoing never sends
	// it (both default true; off only while a rolling upgrade turns
	// encryption on).
	VerifyIncoming bool
	VerifyOutgoing bool
	// DisableKeyringFile keeps the keyring in memory only: Key is the one
	// key at every start, and keyring changes are lost on restart.
	DisableKeyringFile bool
}

// Keyring file names under the data dir (Consul's SerfLANKeyring and
// SerfWANKeyring).
const (
	LANKeyringFile = "serf/local.keyring"
	WANKeyringFile = "serf/remote.keyring"
)

// KeyringPath is where the pool's keyring is persisted (file is
// LANKeyringFile or WANKeyringFile), or "" when it is not: with
// disable_keyring_file, in -dev, and without a data dir.
func (c *RuntimeConfig) KeyringPath(file string) string {
	if c.Encrypt.DisableKeyringFile || c.DevMode || c.DataDir == "" {
		return ""
	}
	return filepath.Join(c.DataDir, file)
}

// Logging sets the agent's log output.
type Logging struct {
	// Level is one of trace, debug, info, warn, error (normalised to lower
	// case); ParseLogLevel maps it to a slog.Level.
	Level string
	// JSON selects JSON log lines instead of text.
	JSON bool
}

// HTTPListenAddrs returns the addresses the HTTP API listens on:
// "ip:port" entries and any "unix://" socket paths unchanged; nil when it
// is disabled (port -1, usually with HTTPS on).
func (c *RuntimeConfig) HTTPListenAddrs() []string {
	return listenAddrs(c.Addresses.HTTP, c.Ports.HTTP)
}

// HTTPSListenAddrs returns the addresses of the HTTPS API, or nil when it
// is disabled (port -1, or no tls.https certificate).
func (c *RuntimeConfig) HTTPSListenAddrs() []string {
	if !c.HTTPSHasCert() {
		return nil
	}
	return listenAddrs(c.Addresses.HTTPS, c.Ports.HTTPS)
}

// GRPCTLSListenAddrs returns the addresses of the gRPC-TLS (xDS) listener,
// or nil when it is disabled (port -1, or no tls.grpc certificate).
func (c *RuntimeConfig) GRPCTLSListenAddrs() []string {
	if !c.GRPCTLSHasCert() {
		return nil
	}
	return listenAddrs(c.Addresses.GRPCTLS, c.Ports.GRPCTLS)
}

// GRPCListenAddrs returns the addresses of the gRPC (xDS) listener, or nil
// when it is disabled (port -1).
func (c *RuntimeConfig) GRPCListenAddrs() []string {
	return listenAddrs(c.Addresses.GRPC, c.Ports.GRPC)
}

// DNSListenAddrs returns the "ip:port" addresses of the DNS interface
// (each bound for UDP and TCP), or nil when it is disabled (port -1).
// unix:// entries are skipped: DNS is not served on sockets.
func (c *RuntimeConfig) DNSListenAddrs() []string {
	var out []string
	for _, a := range listenAddrs(c.Addresses.DNS, c.Ports.DNS) {
		if !strings.HasPrefix(a, "unix://") {
			out = append(out, a)
		}
	}
	return out
}

// RPCBindAddr is the "ip:port" the server RPC listener binds.
func (c *RuntimeConfig) RPCBindAddr() string {
	return net.JoinHostPort(c.Addresses.Bind, strconv.Itoa(c.Ports.Server))
}

// RPCAdvertiseAddr is the "ip:port" other servers and clients dial for RPC.
func (c *RuntimeConfig) RPCAdvertiseAddr() string {
	return net.JoinHostPort(c.Addresses.Advertise, strconv.Itoa(c.Ports.Server))
}

// SerfLANBindAddr is the "ip:port" the Serf LAN memberlist binds.
func (c *RuntimeConfig) SerfLANBindAddr() string {
	return net.JoinHostPort(c.Addresses.SerfLAN, strconv.Itoa(c.Ports.SerfLAN))
}

// SerfLANAdvertiseAddr is the "ip:port" this node gossips as.
func (c *RuntimeConfig) SerfLANAdvertiseAddr() string {
	return net.JoinHostPort(c.Addresses.Advertise, strconv.Itoa(c.Ports.SerfLAN))
}

// ScaleRaft multiplies a Raft timing value tuned for RaftMultiplier 1 (as
// hashicorp/raft's defaults are) by the configured multiplier.
func (c *RuntimeConfig) ScaleRaft(d time.Duration) time.Duration {
	return d * time.Duration(c.RaftMultiplier)
}

// HTTPAddrForClients returns an "ip:port" a local client can dial to reach
// the HTTP API (a wildcard bind becomes 127.0.0.1), or a unix:// socket; ""
// when there is no HTTP listener.
func (c *RuntimeConfig) HTTPAddrForClients() string {
	for _, a := range c.HTTPListenAddrs() {
		if strings.HasPrefix(a, "unix://") {
			return a
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if ip.To4() != nil {
				host = "127.0.0.1"
			} else {
				host = "::1"
			}
		}
		return net.JoinHostPort(host, port)
	}
	return ""
}

func listenAddrs(ips []string, port int) []string {
	if port < 0 {
		return nil
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		if strings.HasPrefix(ip, "unix://") {
			out = append(out, ip)
			continue
		}
		out = append(out, net.JoinHostPort(ip, strconv.Itoa(port)))
	}
	return out
}

// Locality is Consul's locality block: where the node runs.
type Locality struct {
	Region string
	Zone   string
}
