// Package agent runs one Trellis agent: its Serf LAN membership, the server
// (when it is one), the HTTP API, and (in later layers) local state,
// checks, proxycfg and xDS. cmd/trellis only parses flags and calls New,
// Start, Leave and Shutdown.
package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/serf/serf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-mesh/trellis/agent/aclcache"
	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/agent/cache"
	"github.com/trellis-mesh/trellis/agent/config"
	agentdns "github.com/trellis-mesh/trellis/agent/dns"
	"github.com/trellis-mesh/trellis/agent/grpccerts"
	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/agent/leafcert"
	"github.com/trellis-mesh/trellis/agent/logmonitor"
	"github.com/trellis-mesh/trellis/agent/router"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/agent/userevent"
	"github.com/trellis-mesh/trellis/agent/watches"
	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
	"github.com/trellis-mesh/trellis/telemetry"
	"github.com/trellis-mesh/trellis/tlsutil"
	"github.com/trellis-mesh/trellis/version"
)

// ErrNotServer is returned for server-only operations on a client agent.
var ErrNotServer = errors.New("agent: not a server")

// Config holds the agent's dependencies.
type Config struct {
	Runtime *config.RuntimeConfig
	Logger  *slog.Logger
	// Reload, when set, serves PUT /v1/agent/reload: it re-reads the
	// configuration files and applies them (ReloadConfig). Its owner, the
	// agent command, also runs it on SIGHUP. Nil answers the endpoint
	// with 501.
	Reload func() error
	// RootChangeJitter bounds the random delay after which a certificate
	// signed by a Connect CA root that is no longer active is re-signed
	// (service leaves and a client's auto_encrypt certificate); zero is
	// Consul's 30 s window, a negative value re-signs at once. Only tests
	// set it, to see a rotation's re-signing without waiting.
	RootChangeJitter time.Duration
}

// Agent is one running agent. Create it with New, then Start it.
type Agent struct {
	rc     *config.RuntimeConfig
	logger *slog.Logger
	// logs copies every record logger handles to /v1/agent/monitor's
	// subscribers; closed first on shutdown so that streams end.
	logs   *logmonitor.Hub
	reload func() error
	// acls is whether the ACL system is on (acl.enabled); tokens are the
	// agent's own (agent/token); aclCheck decides about tokens for the
	// agent's own edges (HTTP, xDS) when ACLs are on, and is nil
	// otherwise, so that they ask nothing. aclCache resolves tokens on a
	// client agent (nil on a server, which resolves them itself).
	acls     bool
	tokens   *token.Store
	aclCheck *authz.Checker
	aclCache *aclcache.Cache

	// tls builds every listener's and dialer's TLS configuration (tls.go).
	tls *tlsutil.Configurator

	server *server.Server
	// router and pool send a client agent's RPCs to the servers.
	router *router.Router
	pool   *server.ConnPool
	gossip *gossip.Gossip
	// members gives the server the member list once gossip has started.
	members gossip.Holder
	// wan is a server's WAN pool member (nil on clients and with
	// ports.serf_wan -1); wanRing hands it to the server (wan.go).
	wan      *gossip.Gossip
	wanRing  gossip.Holder
	wanFlood chan struct{}
	// stopWAN ends the WAN flood-join goroutine.
	stopWAN context.CancelFunc
	// local is the agent's own services and checks.
	local *localServices
	// leaf issues and renews this agent's services' leaf certificates.
	leaf *leafcert.Manager
	// grpcCerts keeps the Connect-native services' certificate files for
	// gRPC applications (grpc_certs.go).
	grpcCerts *grpccerts.Writer
	// proxies keeps every proxy's configuration snapshot current.
	proxies *proxyConfig
	// xds serves Envoy on the gRPC port.
	xds  *xdsServing
	http []*http.Server
	// httpAddr is the first HTTP listener, as the agent's own watches
	// dial it (host:port or unix://path).
	httpAddr string
	// watches runs the config's watches; watchesMu serialises their
	// restart on reload.
	watchesMu sync.Mutex
	watches   *watches.Runner // guarded by watchesMu
	// cache answers the HTTP API's ?cached reads.
	cache *cache.Cache
	// dns answers Consul's DNS interface on the DNS port (nil when -1).
	dns *agentdns.Server

	metrics *prometheus.Registry

	// codec encodes user events; events is the ring of those received.
	codec  *structs.Codec
	events *userevent.Buffer
	// stopCoordinates ends the coordinate reports (coordinate.go).
	stopCoordinates context.CancelFunc
	// autoCert is a client's current auto_encrypt certificate and the
	// roots that came with it (autoencrypt.go); stopAutoEncrypt ends its
	// renewal and roots watch, stopRootsWatch a server's Connect CA roots watch
	// (autoencrypt.go).
	autoCert        atomic.Pointer[autoCert]
	stopAutoEncrypt context.CancelFunc
	stopRootsWatch  context.CancelFunc
	// rootChangeJitter is Config.RootChangeJitter with its default.
	rootChangeJitter time.Duration

	wg       sync.WaitGroup
	stopOnce sync.Once
}

// New checks the configuration; nothing is bound until Start.
func New(cfg Config) (*Agent, error) {
	if cfg.Runtime == nil {
		return nil, errors.New("agent: Runtime config is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	logs := newLogHub()
	a := &Agent{rc: cfg.Runtime, acls: cfg.Runtime.ACL.Enabled, logger: slog.New(logs.Handler(cfg.Logger.Handler())), logs: logs, reload: cfg.Reload, metrics: newRegistry(metricsHostname()),
		codec: structs.NewCodec(), events: userevent.NewBuffer(userevent.DefaultBufferSize),
		// Made before gossip starts, whose events trigger passes; nothing
		// reads it on a client agent, where it stays full.
		wanFlood: make(chan struct{}, 1), rootChangeJitter: cfg.RootChangeJitter}
	if a.rootChangeJitter == 0 {
		a.rootChangeJitter = leafcert.DefaultRootChangeJitter
	}
	var err error
	if a.acls && !cfg.Runtime.ServerMode {
		// The agent is the cache's RPC: its router reaches the servers.
		if a.aclCache, err = newACLCache(cfg.Runtime, a, a.logger); err != nil {
			return nil, err
		}
	}
	if a.tokens, err = newTokenStore(cfg.Runtime, a.aclCache); err != nil {
		return nil, err
	}
	if a.acls {
		if a.aclCheck, err = a.newACLChecker(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// Start binds every listener, starts the server (if any), gossip and the
// HTTP API, and begins joining the cluster. On error everything started so
// far is stopped again.
func (a *Agent) Start(ctx context.Context) (err error) {
	defer func() {
		if err != nil {
			_ = a.Shutdown()
		}
	}()
	rc := a.rc
	// Before the server and gossip, whose libraries emit from their start.
	if err := telemetry.InstallSink(a.metrics); err != nil {
		return err
	}
	// Before anything binds: bad TLS material is a start-up error naming
	// the key and the file.
	if a.tls, err = newTLS(rc); err != nil {
		return err
	}
	if rc.ServerMode {
		if err := a.startServer(); err != nil {
			return err
		}
		if rc.AutoEncrypt.AllowTLS {
			a.startConnectRootsWatch() // autoencrypt.go
		}
	} else {
		a.pool = server.NewConnPool(server.ConnPoolConfig{TLS: a.tls})
		if rc.AutoEncrypt.TLS {
			// Before anything binds: the HTTPS API may serve this
			// certificate.
			if err := a.autoEncryptBootstrap(ctx); err != nil {
				return err
			}
		}
		a.router = router.New(router.Config{
			Logger:      a.logger.With("component", "router"),
			Datacenter:  rc.Datacenter,
			Caller:      a.pool,
			HoldTimeout: rc.RPCHoldTimeout,
			Retryable:   server.Retryable,
			RetryWrite:  server.NotApplied,
			// A write sent to a server that died before answering.
			OutcomeUnknown: server.OutcomeUnknown,
		})
	}
	// Local state starts before gossip so that member events, which may
	// arrive as soon as gossip runs, find it in place.
	if err := a.startLocal(); err != nil {
		return err
	}
	if err := a.startGossip(); err != nil {
		return err
	}
	if err := a.startWAN(); err != nil {
		return err
	}
	if rc.AutoEncrypt.TLS {
		a.startAutoEncryptRenewal()
	}
	leaf, err := a.startConnect()
	if err != nil {
		return err
	}
	a.leaf = leaf
	if err := a.startGRPCCerts(); err != nil {
		return err
	}
	if a.proxies, err = a.startProxycfg(); err != nil {
		return err
	}
	if err := a.startXDS(a.proxies.Source(), a.proxies.Manager()); err != nil {
		return err
	}
	if err := a.startHTTP(); err != nil {
		return err
	}
	if err := a.startDNS(); err != nil {
		return err
	}
	if err := a.startWatches(rc); err != nil {
		return err
	}
	a.startCoordinates()
	a.gossip.RetryJoin(rc.RetryJoin, rc.Ports.SerfLAN, rc.RetryInterval, rc.RetryMax)
	a.logger.Info("agent started", "node", rc.NodeName, "datacenter", rc.Datacenter,
		"server", rc.ServerMode, "http", rc.HTTPListenAddrs(), "https", rc.HTTPSListenAddrs(), "dns", rc.DNSListenAddrs(), "version", version.Version)
	return nil
}

func (a *Agent) startServer() error {
	rc := a.rc
	ln, err := net.Listen("tcp", rc.RPCBindAddr())
	if err != nil {
		return fmt.Errorf("agent: bind server port: %w", err)
	}
	adv, err := net.ResolveTCPAddr("tcp", rc.RPCAdvertiseAddr())
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("agent: server advertise address: %w", err)
	}
	wanMembers, wanCoords := a.wanPool()
	srv, err := server.New(server.Config{
		Logger:                 a.logger.With("component", "server"),
		NodeName:               rc.NodeName,
		NodeID:                 rc.NodeID,
		Datacenter:             rc.Datacenter,
		DataDir:                rc.DataDir,
		InMemory:               rc.DevMode,
		DevTiming:              rc.DevMode,
		Listener:               ln,
		Advertise:              adv,
		TLS:                    a.tls,
		Bootstrap:              rc.Bootstrap || rc.DevMode,
		BootstrapExpect:        rc.BootstrapExpect,
		RaftMultiplier:         rc.RaftMultiplier,
		SessionTTLMin:          rc.SessionTTLMin,
		DefaultIntentionPolicy: rc.IntentionDefaultPolicy,
		Connect: server.ConnectConfig{
			Disabled:         !rc.Connect.Enabled,
			ClusterID:        rc.Connect.ClusterID,
			LeafCertTTL:      rc.Connect.LeafCertTTL,
			RootCertTTL:      rc.Connect.RootCertTTL,
			CSRMaxPerSecond:  rc.Connect.CSRMaxPerSecond,
			CSRMaxConcurrent: rc.Connect.CSRMaxConcurrent,
		},
		AutoEncrypt: server.AutoEncryptConfig{
			AllowTLS:             rc.AutoEncrypt.AllowTLS,
			ManualCARoots:        a.tls.RPCCAPEMs,
			VerifyServerHostname: rc.TLS.InternalRPC.VerifyServerHostname,
		},
		Autopilot: &structs.AutopilotConfig{
			CleanupDeadServers: rc.Autopilot.CleanupDeadServers, LastContactThreshold: rc.Autopilot.LastContactThreshold,
			MaxTrailingLogs: rc.Autopilot.MaxTrailingLogs, MinQuorum: rc.Autopilot.MinQuorum,
			ServerStabilizationTime: rc.Autopilot.ServerStabilizationTime,
		},
		Membership:     &a.members,
		Coordinates:    &a.members,
		LANKeyring:     &a.members,
		WANKeyring:     a.wanKeyring(),
		WANMembers:     wanMembers,
		WANCoordinates: wanCoords,
		Metrics:        a.metrics,
		// As Consul's -dev: coordinates show up within a report interval.
		CoordinateUpdatePeriod: devDuration(rc.DevMode, 100*time.Millisecond),
		ACLs:                   a.serverACLs(),
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	a.server = srv
	return nil
}

// devDuration is d in -dev and zero (the component's default) otherwise.
func devDuration(dev bool, d time.Duration) time.Duration {
	if dev {
		return d
	}
	return 0
}

func (a *Agent) startGossip() error {
	rc := a.rc
	var tags map[string]string
	if rc.ServerMode {
		tags = gossip.ServerTags(rc.Datacenter, rc.NodeID, rc.Ports.Server, rc.BootstrapExpect, rc.Bootstrap || rc.DevMode, version.ConsulVersion)
	} else {
		tags = gossip.ClientTags(rc.Datacenter, rc.NodeID, version.ConsulVersion)
	}
	if rc.ServerMode && rc.Ports.SerfWAN > 0 {
		tags[gossip.TagWANJoinPort] = strconv.Itoa(rc.Ports.SerfWAN)
	}
	g, err := gossip.New(gossip.Config{
		Logger:           a.logger,
		NodeName:         rc.NodeName,
		BindAddr:         rc.Addresses.SerfLAN,
		BindPort:         rc.Ports.SerfLAN,
		AdvertiseAddr:    rc.Addresses.Advertise,
		AdvertisePort:    rc.Ports.SerfLAN,
		Tags:             tags,
		ReconnectTimeout: rc.ReconnectTimeout,
		SnapshotDir:      a.serfDir(),
		OnEvent:          a.onSerfEvent,
		Encryption:       a.encryption(config.LANKeyringFile),
	})
	if err != nil {
		return err
	}
	a.gossip = g
	a.members.Set(g)
	g.Start()
	return nil
}

func (a *Agent) onSerfEvent(ev serf.Event) {
	if ue, ok := ev.(serf.UserEvent); ok {
		a.handleUserEvent(ue) // events.go
		return
	}
	me, ok := ev.(serf.MemberEvent)
	if !ok {
		return
	}
	for _, m := range me.Members {
		a.logger.Debug("member event", "event", me.Type.String(), "member", gossip.Describe(m))
	}
	if a.server != nil {
		a.server.MemberEvent(me)
		a.triggerWANFlood()
	}
	if a.router != nil {
		a.router.Update(a.gossip.Members())
	}
	// A server joining (or coming back) is a reason to check that the
	// catalog holds what this agent has.
	if a.local != nil && me.Type == serf.EventMemberJoin {
		for _, m := range me.Members {
			if _, ok := gossip.ParseServer(m); ok {
				a.local.syncer.TriggerFullSync()
				break
			}
		}
	}
}

func (a *Agent) startHTTP() error {
	rc := a.rc
	leafCerts, authorizer := a.connectHTTPConfig(a.leaf)
	var reloader httpapi.Reloader
	if a.reload != nil {
		reloader = a
	}
	c, err := cache.New(cache.Config{RPC: a, Logger: a.logger.With("component", "cache")})
	if err != nil {
		return err
	}
	a.cache = c
	api, err := httpapi.New(httpapi.Config{
		Cache:             c,
		RPC:               a,
		Logger:            a.logger.With("component", "http"),
		NodeName:          rc.NodeName,
		Datacenter:        rc.Datacenter,
		SessionTTLMin:     rc.SessionTTLMin,
		Self:              a.self,
		Membership:        a,
		WANMembership:     a.wanMembers(),
		Leaver:            a,
		Reloader:          reloader,
		Monitor:           logMonitor{hub: a.logs},
		Metrics:           metricsHandler(a.metrics, metricsHostname()),
		Local:             a.local,
		ProxyStatus:       a,
		Events:            a,
		LeafCerts:         leafCerts,
		ConnectAuthorizer: authorizer,
		GRPCFiles:         a.httpGRPCFilesConfig(),
		EnableDebug:       rc.EnableDebug,
		Host:              hostInfo{},
		ACLsEnabled:       a.acls,
		DefaultACLPolicy:  rc.ACL.DefaultPolicy,
		Tokens:            a.tokens,
		ACL:               a.httpACL(),
	})
	if err != nil {
		return err
	}
	for _, l := range a.httpListeners() { // tls.go
		addr := l.addr
		ln, err := listen(addr)
		if err != nil {
			return fmt.Errorf("agent: bind %s %s: %w", l.name, addr, err)
		}
		if l.tls != nil {
			ln = tls.NewListener(ln, l.tls)
		}
		if a.httpAddr == "" {
			a.httpAddr = selfAddress(ln.Addr())
		}
		hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
		a.http = append(a.http, hs)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.logger.Error("HTTP server stopped", "addr", addr, "error", err)
			}
		}()
	}
	return nil
}

// startDNS serves the DNS interface on every DNS address, UDP and TCP,
// reading through the same RPC as the HTTP API.
func (a *Agent) startDNS() error {
	rc := a.rc
	addrs := rc.DNSListenAddrs()
	if len(addrs) == 0 {
		return nil
	}
	d := rc.DNS
	srv, err := agentdns.New(agentdns.Config{
		RPC:                a,
		Logger:             a.logger.With("component", "dns"),
		Datacenter:         rc.Datacenter,
		NodeName:           rc.NodeName,
		Domain:             d.Domain,
		AltDomain:          d.AltDomain,
		Recursors:          d.Recursors,
		RecursorRandom:     d.RecursorRandom,
		RecursorTimeout:    d.RecursorTimeout,
		NodeTTL:            d.NodeTTL,
		ServiceTTL:         d.ServiceTTL,
		AllowStale:         d.AllowStale,
		MaxStale:           d.MaxStale,
		OnlyPassing:        d.OnlyPassing,
		EnableTruncate:     d.EnableTruncate,
		UDPAnswerLimit:     d.UDPAnswerLimit,
		ARecordLimit:       d.ARecordLimit,
		NodeMetaTXT:        d.NodeMetaTXT,
		DisableCompression: d.DisableCompression,
		SOA:                agentdns.SOA(d.SOA),
		// Lookups carry acl.tokens.dns, else the default token, as
		// Consul's DNS does.
		Token: a.tokens.DNSToken,
	})
	if err != nil {
		return err
	}
	a.dns = srv
	for _, addr := range addrs {
		if err := srv.ListenAndServe(addr); err != nil {
			return fmt.Errorf("agent: bind DNS %s: %w", addr, err)
		}
	}
	return nil
}

func listen(addr string) (net.Listener, error) {
	if len(addr) > len("unix://") && addr[:len("unix://")] == "unix://" {
		return net.Listen("unix", addr[len("unix://"):])
	}
	return net.Listen("tcp", addr)
}

// RPC serves an internal API call: on a server, by the server itself
// (which forwards to the leader as needed); on a client agent, by a server
// the router picks.
func (a *Agent) RPC(ctx context.Context, method string, args, reply any) error {
	if a.server != nil {
		return a.server.RPC(ctx, method, args, reply)
	}
	err := a.router.RPC(ctx, method, args, reply)
	if a.aclCache != nil && errors.Is(err, structs.ErrACLNotFound) {
		// The token was deleted or expired: nothing cached about it
		// stands any longer.
		a.aclCache.Invalidate(rpcToken(args))
	}
	return err
}

// Members lists the Serf LAN members for /v1/agent/members.
func (a *Agent) Members() []httpapi.MemberInfo {
	members := a.gossip.Members()
	out := make([]httpapi.MemberInfo, 0, len(members))
	for _, m := range members {
		out = append(out, memberInfo(m))
	}
	return out
}

// Join joins the Serf LAN member at addr.
func (a *Agent) Join(addr string) (int, error) {
	return a.gossip.Join([]string{addr}, a.rc.Ports.SerfLAN)
}

// ForceLeave marks a failed member as left.
func (a *Agent) ForceLeave(node string, prune bool) error {
	return a.gossip.ForceLeave(node, prune)
}

// Leave leaves the cluster gracefully: a leading server first hands its
// Raft seat back, then the agent says goodbye over Serf.
func (a *Agent) Leave(ctx context.Context) error {
	var errs []error
	if a.server != nil {
		if err := a.server.Leave(); err != nil {
			errs = append(errs, fmt.Errorf("raft leave: %w", err))
		}
	}
	if a.gossip != nil {
		if err := a.gossip.Leave(); err != nil {
			errs = append(errs, fmt.Errorf("serf leave: %w", err))
		}
	}
	if a.wan != nil {
		if err := a.wan.Leave(); err != nil {
			errs = append(errs, fmt.Errorf("serf WAN leave: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Failed is closed once the agent can no longer do its job (its server's
// Raft stopped after a failed log write); Failure says why. A client
// agent never fails this way: its channel is nil. Call it after Start.
func (a *Agent) Failed() <-chan struct{} {
	if a.server == nil {
		return nil
	}
	return a.server.Failed()
}

// Failure is why the agent failed, once Failed is closed; nil before.
func (a *Agent) Failure() error {
	if a.server == nil {
		return nil
	}
	return a.server.Failure()
}

// Shutdown stops everything the agent started and waits for it.
func (a *Agent) Shutdown() error {
	var errs []error
	a.stopOnce.Do(func() {
		if a.stopCoordinates != nil {
			a.stopCoordinates()
		}
		for _, stop := range []context.CancelFunc{a.stopAutoEncrypt, a.stopRootsWatch} {
			if stop != nil {
				stop()
			}
		}
		a.stopWatches()
		if a.stopWAN != nil {
			a.stopWAN()
		}
		// Monitor streams never end by themselves: end them before the
		// HTTP servers wait for their requests.
		a.logs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, hs := range a.http {
			// Blocking queries end when the server shuts down below, so
			// close rather than wait for them here.
			if err := hs.Shutdown(ctx); err != nil {
				_ = hs.Close()
			}
		}
		if a.dns != nil {
			a.dns.Shutdown()
		}
		if a.cache != nil {
			a.cache.Close()
		}
		if a.aclCache != nil {
			a.aclCache.Close()
		}
		if a.xds != nil {
			a.xds.stop()
		}
		if a.proxies != nil {
			a.proxies.stop()
		}
		// Before the leaf manager, whose Gets the writer's goroutines wait in.
		if a.grpcCerts != nil {
			a.grpcCerts.Stop()
		}
		if a.leaf != nil {
			a.leaf.Stop()
		}
		if a.local != nil {
			a.local.stop()
		}
		if a.server != nil {
			if err := a.server.Shutdown(); err != nil {
				errs = append(errs, err)
			}
		}
		if a.gossip != nil {
			if err := a.gossip.Shutdown(); err != nil {
				errs = append(errs, err)
			}
		}
		if a.wan != nil {
			if err := a.wan.Shutdown(); err != nil {
				errs = append(errs, err)
			}
		}
		if a.pool != nil {
			a.pool.Close()
		}
		a.wg.Wait()
	})
	return errors.Join(errs...)
}

// self describes the agent for /v1/agent/self.
func (a *Agent) self() httpapi.SelfInfo {
	rc := a.rc
	info := httpapi.SelfInfo{
		NodeID:            rc.NodeID,
		Server:            rc.ServerMode,
		Version:           version.ConsulVersion,
		PrimaryDatacenter: rc.Datacenter,
		Meta:              rc.NodeMeta,
		Stats:             a.stats(),

		SerfAdvertiseAddrLAN: net.JoinHostPort(rc.Addresses.Advertise, strconv.Itoa(rc.Ports.SerfLAN)),
		SerfBindAddrLAN:      net.JoinHostPort(rc.Addresses.SerfLAN, strconv.Itoa(rc.Ports.SerfLAN)),
	}
	if a.gossip != nil {
		info.Member = memberInfo(a.gossip.LocalMember())
	}
	return info
}

func memberInfo(m serf.Member) httpapi.MemberInfo {
	return httpapi.MemberInfo{
		Name:        m.Name,
		Addr:        m.Addr.String(),
		Port:        m.Port,
		Tags:        m.Tags,
		Status:      int(m.Status),
		ProtocolMin: m.ProtocolMin,
		ProtocolMax: m.ProtocolMax,
		ProtocolCur: m.ProtocolCur,
		DelegateMin: m.DelegateMin,
		DelegateMax: m.DelegateMax,
		DelegateCur: m.DelegateCur,
	}
}

// httpACL is the agent's checker as the HTTP API takes it: a nil
// interface, not a nil pointer in one, with ACLs off.
func (a *Agent) httpACL() httpapi.ACLChecker {
	if a.aclCheck == nil {
		return nil
	}
	return a.aclCheck
}

// xdsACL is httpACL for the xDS streams.
func (a *Agent) xdsACL() xdsAuthorizer {
	if a.aclCheck == nil {
		return nil
	}
	return a.aclCheck
}
