// Package server is a Trellis server: a Raft voter holding the replicated
// state store, answering the internal RPC API (locally and over gRPC on the
// server port), forwarding what only the leader may do, and running the
// leader's duties (reconciling Serf members into the catalog, managing Raft
// peers, expiring sessions, reaping KV tombstones).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/trellis-mesh/trellis/fsm"
	"github.com/trellis-mesh/trellis/structs"
)

// ErrShutdown is returned by calls made after Shutdown.
var ErrShutdown = errors.New("server: shut down")

// Membership is the agent's Serf LAN view, which the server reads to
// bootstrap, to find peers and to reconcile the catalog.
type Membership interface {
	Members() []serf.Member
}

// Config holds everything a server needs. Zero durations take defaults.
type Config struct {
	Logger     *slog.Logger
	NodeName   string
	NodeID     string
	Datacenter string
	// DataDir holds raft/raft.db and raft/snapshots; ignored when InMemory.
	DataDir  string
	InMemory bool
	// DevTiming shortens Raft's timeouts to tens of milliseconds, as
	// Consul's -dev does: a single in-memory server elects itself at once.
	// Never for servers that talk to others over a real network.
	DevTiming bool
	// Listener is the bound server port; the server owns it from here on.
	Listener net.Listener
	// Advertise is the address other servers reach this one at.
	Advertise *net.TCPAddr
	// Bootstrap makes this server a cluster of one at first start (-dev,
	// -bootstrap). BootstrapExpect waits for that many servers instead.
	Bootstrap       bool
	BootstrapExpect int
	// RaftMultiplier scales Raft's timeouts (Consul's
	// performance.raft_multiplier): 1 is fastest failover.
	RaftMultiplier    int
	SessionTTLMin     time.Duration
	TombstoneTTL      time.Duration
	ReconcileInterval time.Duration
	// Membership may be nil for a server that gossips with no one.
	Membership Membership
	// LANKeyring and WANKeyring run keyring operations on the agent's
	// pools (Internal.KeyringOperation); nil for a pool the agent has not.
	LANKeyring Keyring
	WANKeyring Keyring
	// WANMembers and WANCoordinates are the agent's WAN pool (every
	// datacenter's servers, named "<node>.<dc>") and its coordinates, for
	// Catalog.ListDatacenters and Coordinate.ListDatacenters; nil without
	// a WAN pool, when only this datacenter is known.
	WANMembers     Membership
	WANCoordinates CoordinateSource
	// Coordinates is the agent's Serf coordinate view, for
	// Coordinate.ListDatacenters; nil lists the servers without
	// coordinates.
	Coordinates CoordinateSource
	// CoordinateUpdatePeriod is how often the leader commits the queued
	// coordinate reports (default 5s); CoordinateUpdateBatchSize (128) and
	// CoordinateUpdateMaxBatches (5) bound one period's commits, as
	// Consul's settings of the same names.
	CoordinateUpdatePeriod     time.Duration
	CoordinateUpdateBatchSize  int
	CoordinateUpdateMaxBatches int
	// CSRMaxPerSecond limits leaf signing on the leader (a token bucket; see connect_ca.go): 0 means Consul's default of 50/s, negative disables the limit, and a CSRMaxPerSecond in the CA configuration overrides it.
	CSRMaxPerSecond float64
	// Metrics is where the server registers its instruments; nil keeps
	// them unregistered.
	Metrics prometheus.Registerer
	// Dial, when set, opens the connections this server forwards calls to
	// the leader over (nil: plain TCP). Tests inject faults through it.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// RaftDial, when set, opens Raft's connections to the other servers
	// (nil: plain TCP). Tests cut the network between servers through it.
	RaftDial func(ctx context.Context, addr string) (net.Conn, error)
	// TLS, when set, secures the server port (Raft and gRPC alike): TLS
	// connections are served with its certificate, plaintext ones refused
	// when it requires TLS, and this server's own connections to the
	// others (forwarding, Raft) are TLS when it says so.
	TLS RPCTLS
	// WrapLogStore, when set, wraps the Raft log store (on disk or in
	// memory) once it is open. Tests inject disk faults through it.
	WrapLogStore func(raft.LogStore) raft.LogStore
	// Autopilot is the autopilot configuration the leader stores when the
	// cluster has none (the agent config's autopilot block); nil means
	// Consul's defaults.
	Autopilot *structs.AutopilotConfig
	// DefaultIntentionPolicy decides connections no intention matches:
	// "allow" (the default, as Consul without ACLs) or "deny".
	DefaultIntentionPolicy string
	// Connect is the agent's connect block: whether the CA runs, and what
	// the first CA configuration holds.
	Connect ConnectConfig
	// ACLs turns on the ACL system (acl.go) when ACLs.Enabled
	// (acl.enabled): the leader creates the built-in objects, the
	// /v1/acl endpoints answer and every method enforces its rule.
	ACLs ACLConfig
	// AutoEncrypt is the servers' auto_encrypt block (AutoEncrypt.Sign).
	AutoEncrypt AutoEncryptConfig
}

// ConnectConfig is the part of Consul's connect block the servers read.
// The zero value is Connect enabled with a generated cluster ID and the
// default TTLs.
type ConnectConfig struct {
	// Disabled is connect.enabled = false: the leader creates no CA and the
	// CA endpoints answer ErrConnectNotEnabled, as Consul's do.
	Disabled bool
	// ClusterID fixes the trust domain ("<ClusterID>.consul") of a CA
	// created from scratch (connect.ca_config.cluster_id); empty generates
	// one. It never changes an existing CA.
	ClusterID string
	// LeafCertTTL and RootCertTTL seed the first CA configuration
	// (connect.ca_config.leaf_cert_ttl, root_cert_ttl); zero keeps the
	// defaults.
	LeafCertTTL time.Duration
	RootCertTTL time.Duration
	// CSRMaxPerSecond (nil keeps the server's CSRMaxPerSecond) and
	// CSRMaxConcurrent (0 leaves it out) seed the first CA configuration's
	// signing limits (connect.ca_config.csr_max_per_second,
	// csr_max_concurrent).
	CSRMaxPerSecond  *float64
	CSRMaxConcurrent int
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RaftMultiplier <= 0 {
		c.RaftMultiplier = 1
	}
	if c.SessionTTLMin <= 0 {
		c.SessionTTLMin = 10 * time.Second
	}
	if c.TombstoneTTL <= 0 {
		c.TombstoneTTL = 15 * time.Minute
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = 60 * time.Second
	}
	if c.Datacenter == "" {
		c.Datacenter = "dc1"
	}
	if c.Autopilot == nil {
		d := structs.DefaultAutopilotConfig()
		c.Autopilot = &d
	}
	if c.CoordinateUpdatePeriod <= 0 {
		c.CoordinateUpdatePeriod = defaultCoordinateUpdatePeriod
	}
	if c.CoordinateUpdateBatchSize <= 0 {
		c.CoordinateUpdateBatchSize = defaultCoordinateUpdateBatchSize
	}
	if c.CoordinateUpdateMaxBatches <= 0 {
		c.CoordinateUpdateMaxBatches = defaultCoordinateUpdateMaxBatches
	}
}

// Server is one running Trellis server.
type Server struct {
	cfg    Config
	logger *slog.Logger
	codec  *structs.Codec
	// rpcCodec encodes the internal RPC payloads, caller's token included
	// (codec, for Raft, leaves it out).
	rpcCodec *structs.Codec

	fsm       *fsm.FSM
	raft      *raft.Raft
	raftStore *raftStores
	transport *raft.NetworkTransport
	mux       *portMux
	grpc      *grpc.Server
	// unverifiedGRPC serves connections without a client certificate
	// (auto_encrypt.allow_tls): AutoEncrypt.Sign only.
	unverifiedGRPC *grpc.Server
	pool           *connPool
	endpoints      map[string]endpoint
	metrics        *metrics

	sessionTimers *sessionTimers
	health        serverHealth    // the leader's view of every server (autopilot.go)
	connectCA     connectCA       // the leader's CA signing state (connect_ca.go)
	aclCache      aclCache        // resolved tokens (acl_resolve.go)
	coordinates   coordinateQueue // the leader's pending coordinate reports (coordinate_endpoint.go)
	// leaderNotify is Raft's NotifyCh: true on gaining leadership, false on
	// losing it.
	leaderNotify chan bool
	// reconcileCh carries member changes to the leader loop.
	reconcileCh chan serf.Member
	// reassertCh asks the leadership monitor to restart the leader loop
	// (after a snapshot restore); it closes the channel sent once done.
	reassertCh chan chan struct{}
	// bootstrapped is set once this server has (or joined) a Raft
	// configuration, after which bootstrap-expect does nothing more.
	bootstrapped atomic.Bool
	// readyTerm is the term in which this server, as leader, has applied
	// every entry earlier terms committed (its barrier completed): it
	// answers no call but stale reads in a term before that (leader.go).
	readyTerm atomic.Uint64
	// reads confirms leadership for the reads the leader answers (reads.go).
	reads *readGate
	// logFailed carries the first Raft log write failure (failstop.go).
	logFailed chan error
	// raftStopped is set when Raft is stopped on a log failure. Raft's
	// State cannot say it: a follower whose heartbeat timer fires as it
	// shuts down records itself a candidate after Shutdown (failstop.go).
	raftStopped atomic.Bool
	// failed is closed once Raft stopped on a log failure; failure, set
	// before, says why (failstop.go).
	failed  chan struct{}
	failure error

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// New starts a server: Raft, the server port (Raft + gRPC), and the
// leadership monitor. It does not join anyone: gossip is the agent's job.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if cfg.Listener == nil || cfg.Advertise == nil {
		return nil, errors.New("server: Listener and Advertise are required")
	}
	if cfg.NodeID == "" || cfg.NodeName == "" {
		return nil, errors.New("server: NodeID and NodeName are required")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:         cfg,
		logger:      cfg.Logger,
		codec:       structs.NewCodec(),
		rpcCodec:    structs.NewRPCCodec(),
		reconcileCh: make(chan serf.Member, 256),
		reassertCh:  make(chan chan struct{}),
		// Raft blocks on this channel: buffer it so a burst of leadership
		// flips never stalls Raft while the monitor catches up.
		leaderNotify: make(chan bool, 16),
		logFailed:    make(chan error, 1),
		failed:       make(chan struct{}),
		ctx:          ctx,
		cancel:       cancel,
	}
	s.fsm = fsm.New(fsm.Config{Logger: cfg.Logger.With("component", "fsm"), Codec: s.codec})
	s.endpoints = s.endpointTable()
	s.metrics = newMetrics(cfg.Metrics, s)
	s.sessionTimers = newSessionTimers()
	s.pool = newConnPool(secureDial(cfg.Dial, cfg.TLS))

	s.mux = newPortMux(cfg.Listener, cfg.TLS, cfg.Logger)
	if err := s.setupRaft(); err != nil {
		_ = s.mux.Close()
		cancel()
		return nil, err
	}
	// A snapshot archive is one message (snapshot_endpoint.go).
	s.grpc = grpc.NewServer(grpc.UnknownServiceHandler(s.handleGRPC), grpc.MaxRecvMsgSize(rpcMaxMessage), grpc.MaxSendMsgSize(rpcMaxMessage))
	s.unverifiedGRPC = grpc.NewServer(grpc.UnknownServiceHandler(s.handleUnverifiedGRPC))
	s.wg.Add(5)
	go func() {
		defer s.wg.Done()
		_ = s.grpc.Serve(s.mux.grpc)
	}()
	go func() {
		defer s.wg.Done()
		_ = s.unverifiedGRPC.Serve(s.mux.insecure)
	}()
	go func() {
		defer s.wg.Done()
		s.coordinateBatchLoop(s.ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.stopOnLogFailure()
	}()
	go func() {
		defer s.wg.Done()
		s.monitorLeadership()
	}()
	return s, nil
}

// Shutdown stops the server and waits for every goroutine it started. It
// does not leave the cluster (see Leave).
func (s *Server) Shutdown() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		// Session expiries under way finish while Raft still runs: an
		// apply caught in Raft's shutdown can stay unanswered for good
		// (hashicorp/raft v1.7.3 drops committed entries not yet handed
		// to the FSM without answering their futures), and close waits
		// for them.
		s.sessionTimers.close()
		s.grpc.Stop()
		s.unverifiedGRPC.Stop()
		if f := s.raft.Shutdown(); f.Error() != nil {
			err = fmt.Errorf("raft shutdown: %w", f.Error())
		}
		// Pooled outbound Raft connections are not closed by Close: left
		// open, each keeps a goroutine of the peer reading from it.
		s.transport.CloseStreams()
		_ = s.transport.Close()
		_ = s.mux.Close()
		s.wg.Wait()
		s.pool.Close()
		if s.raftStore != nil {
			if cerr := s.raftStore.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
	})
	return err
}

// Leave removes this server from the Raft configuration (when the cluster
// has other servers) so that quorum shrinks safely, before the agent leaves
// Serf. A follower asks the leader, which removes it when it sees the Serf
// leave; here we only handle the leader's own removal.
func (s *Server) Leave() error {
	if !s.IsLeader() {
		return nil
	}
	cfgFuture := s.raft.GetConfiguration()
	if err := cfgFuture.Error(); err != nil {
		return err
	}
	if len(cfgFuture.Configuration().Servers) <= 1 {
		return nil
	}
	return s.raft.RemoveServer(raft.ServerID(s.cfg.NodeID), 0, 0).Error()
}

// IsLeader reports whether this server is the Raft leader now.
func (s *Server) IsLeader() bool { return s.raft.State() == raft.Leader }

// RaftStats is hashicorp/raft's statistics ("state", "term",
// "last_log_index", ...), the raft section of /v1/agent/self's Stats.
func (s *Server) RaftStats() map[string]string { return s.raft.Stats() }

// LeaderAddr is the leader's server address, or "" when none is known.
func (s *Server) LeaderAddr() string {
	addr, _ := s.raft.LeaderWithID()
	return string(addr)
}

// MemberEvent hands a Serf membership event to the server: it may complete
// bootstrap-expect and, on the leader, updates the catalog and Raft peers.
func (s *Server) MemberEvent(ev serf.MemberEvent) {
	s.maybeBootstrap()
	for _, m := range ev.Members {
		if ev.Type == serf.EventMemberReap {
			// Serf gave up on a failed member after the reconnect timeout:
			// treat it as gone, which deregisters it.
			m.Status = serf.StatusLeft
		}
		select {
		case s.reconcileCh <- m:
		default:
			// The periodic full reconcile repairs whatever a full channel drops.
			s.logger.Debug("reconcile queue full, member deferred to the next full reconcile", "member", m.Name)
		}
	}
}
