// Package dns serves Consul's DNS interface: service, node, Connect,
// ingress, addr and PTR lookups in the agent's domain (and alt domain),
// answered from the catalog and health reads of the internal RPC, the same
// reads the HTTP API makes, and forwarding of every other name to the
// configured recursors.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/trellis-mesh/trellis/structs"
)

// Sentinel errors of the package.
var (
	// ErrClosed: ListenAndServe after Shutdown.
	ErrClosed = errors.New("dns: server is shut down")
	// ErrInvalidConfig: New was given a Config it cannot run with.
	ErrInvalidConfig = errors.New("dns: invalid config")
)

// rpcTimeout bounds the reads of one question. It is longer than the
// servers' 7 s hold time, so that a read waiting out a leader election
// still gets its answer rather than a SERVFAIL.
const rpcTimeout = 8 * time.Second

// shutdownTimeout bounds how long Shutdown waits for open TCP connections.
const shutdownTimeout = 5 * time.Second

// SOA holds the timers of the SOA record, in seconds (dns_config.soa).
type SOA struct {
	Refresh, Retry, Expire, MinTTL uint32
}

// Config holds the server's dependencies and Consul's DNS settings.
type Config struct {
	// RPC answers the catalog and health reads (the agent's RPC: the
	// server itself, or a client agent's router).
	RPC    structs.Caller
	Logger *slog.Logger
	// Datacenter is the agent's; names for another one are NXDOMAIN.
	Datacenter string
	// NodeName is the agent's node: what a prepared query's Near "_agent"
	// sorts by.
	NodeName string
	// Token returns the agent's default ACL token, which every read
	// carries so that the servers answer only what it may read (node:read,
	// service:read); nil or "" reads as the anonymous token, as Consul's
	// DNS does without a default token.
	Token func() string
	// Domain is the zone answered, fully qualified ("consul."); AltDomain,
	// when set, is answered the same way, with its own name in answers.
	Domain    string
	AltDomain string
	// Recursors are "ip:port" resolvers that answer names outside the
	// zones; without any such names are REFUSED.
	Recursors       []string
	RecursorRandom  bool
	RecursorTimeout time.Duration
	// NodeTTL is the TTL of node, addr and PTR answers; ServiceTTL that of
	// service answers by service name, with "*" and "prefix*" keys.
	NodeTTL    time.Duration
	ServiceTTL map[string]time.Duration
	// AllowStale lets any server answer; an answer staler than MaxStale
	// is read again from the leader.
	AllowStale bool
	MaxStale   time.Duration
	// OnlyPassing drops instances with a warning check; critical ones are
	// always dropped.
	OnlyPassing bool
	// EnableTruncate sets the TC bit on a UDP answer that was cut.
	EnableTruncate bool
	// UDPAnswerLimit caps the answers of a UDP reply to a client without
	// EDNS0 (at most 8; 0: only the size limit). ARecordLimit caps A,
	// AAAA and ANY answers over both transports (0: no cap).
	UDPAnswerLimit int
	ARecordLimit   int
	// NodeMetaTXT adds node metadata as TXT records to the additional
	// section of node and SRV answers.
	NodeMetaTXT        bool
	DisableCompression bool
	SOA                SOA
}

// Server answers DNS questions. Create it with New, bind it with
// ListenAndServe (once per address), stop it with Shutdown.
type Server struct {
	cfg        Config
	logger     *slog.Logger
	serviceTTL ttlTable

	// ctx bounds every RPC and recursion; Shutdown cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// servers and closed are guarded by mu.
	servers []*mdns.Server
	closed  bool
}

// New checks cfg and fills its defaults; nothing is bound until
// ListenAndServe.
func New(cfg Config) (*Server, error) {
	if cfg.RPC == nil {
		return nil, fmt.Errorf("%w: RPC is required", ErrInvalidConfig)
	}
	if cfg.Datacenter == "" {
		return nil, fmt.Errorf("%w: Datacenter is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Domain == "" {
		cfg.Domain = "consul."
	}
	cfg.Domain = mdns.CanonicalName(cfg.Domain)
	if cfg.AltDomain != "" {
		cfg.AltDomain = mdns.CanonicalName(cfg.AltDomain)
	}
	if cfg.RecursorTimeout <= 0 {
		cfg.RecursorTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		cfg:        cfg,
		logger:     cfg.Logger,
		serviceTTL: newTTLTable(cfg.ServiceTTL),
		ctx:        ctx,
		cancel:     cancel,
	}, nil
}

// ListenAndServe binds addr ("ip:port") for UDP and TCP and serves both
// until Shutdown. It returns once both listeners accept questions, or
// with the error that kept one from binding.
func (s *Server) ListenAndServe(addr string) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("dns: bind UDP %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_ = pc.Close()
		return fmt.Errorf("dns: bind TCP %s: %w", addr, err)
	}
	// A UDP question with EDNS0 may be larger than the 512-byte default
	// read buffer.
	udp := &mdns.Server{PacketConn: pc, Handler: s, UDPSize: mdns.MaxMsgSize}
	tcp := &mdns.Server{Listener: ln, Handler: s}
	if err := s.serve(udp, "udp", addr); err != nil {
		_ = ln.Close()
		return err
	}
	return s.serve(tcp, "tcp", addr)
}

// serve runs srv in a goroutine the Server owns and waits until it runs,
// so that Shutdown always finds it started.
func (s *Server) serve(srv *mdns.Server, network, addr string) error {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		closeListeners(srv)
		return ErrClosed
	}
	s.servers = append(s.servers, srv)
	s.wg.Add(1)
	s.mu.Unlock()
	failed := make(chan error, 1)
	go func() {
		defer s.wg.Done()
		if err := srv.ActivateAndServe(); err != nil {
			failed <- err
		}
	}()
	select {
	case <-started:
		s.logger.Info("DNS listening", "network", network, "addr", addr)
		return nil
	case err := <-failed:
		return fmt.Errorf("dns: serve %s %s: %w", network, addr, err)
	}
}

func closeListeners(srv *mdns.Server) {
	if srv.PacketConn != nil {
		_ = srv.PacketConn.Close()
	}
	if srv.Listener != nil {
		_ = srv.Listener.Close()
	}
}

// Shutdown stops every listener, ends the reads in flight and waits for
// the serving goroutines. Calling it twice is harmless.
func (s *Server) Shutdown() {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if err := srv.ShutdownContext(ctx); err != nil {
			closeListeners(srv)
		}
	}
	s.wg.Wait()
}

// ServeDNS answers one message: names in the domain or alt domain from the
// catalog, reverse names from the node addresses, anything else through
// the recursors.
func (s *Server) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	network := "tcp"
	if _, ok := w.RemoteAddr().(*net.UDPAddr); ok {
		network = "udp"
	}
	resp := s.answer(network, req)
	if resp == nil {
		s.recurse(w, req, network)
		return
	}
	if err := w.WriteMsg(resp); err != nil {
		s.logger.Debug("DNS reply not sent", "error", err)
	}
}

// answer builds the reply to req, or returns nil when the recursors are
// to answer it.
func (s *Server) answer(network string, req *mdns.Msg) *mdns.Msg {
	resp := new(mdns.Msg)
	if len(req.Question) != 1 {
		return resp.SetRcodeFormatError(req)
	}
	if req.Opcode != mdns.OpcodeQuery {
		return resp.SetRcode(req, mdns.RcodeNotImplemented)
	}
	name := strings.ToLower(req.Question[0].Name)
	ctx, cancel := context.WithTimeout(s.ctx, rpcTimeout)
	defer cancel()
	switch {
	case mdns.IsSubDomain(s.cfg.Domain, name):
		resp = s.answerZone(ctx, req, s.cfg.Domain)
	case s.cfg.AltDomain != "" && mdns.IsSubDomain(s.cfg.AltDomain, name):
		resp = s.answerZone(ctx, req, s.cfg.AltDomain)
	case mdns.IsSubDomain("arpa.", name):
		resp = s.answerPTR(ctx, req)
		if resp == nil {
			return nil
		}
	case len(s.cfg.Recursors) > 0:
		return nil
	default:
		// Consul answers names outside its zones only through recursors.
		return resp.SetRcode(req, mdns.RcodeRefused)
	}
	s.finish(network, req, resp)
	return resp
}

// recurse forwards req to the recursors in turn and relays the first
// answer that is not an error; SERVFAIL when none gives one.
func (s *Server) recurse(w mdns.ResponseWriter, req *mdns.Msg, network string) {
	c := &mdns.Client{Net: network, Timeout: s.cfg.RecursorTimeout}
	order := make([]int, len(s.cfg.Recursors))
	for i := range order {
		order[i] = i
	}
	if s.cfg.RecursorRandom {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] }) //nolint:gosec // spreading queries over recursors needs no unpredictability
	}
	for _, i := range order {
		addr := s.cfg.Recursors[i]
		r, _, err := c.ExchangeContext(s.ctx, req, addr)
		if err == nil && r != nil && (r.Rcode == mdns.RcodeSuccess || r.Rcode == mdns.RcodeNameError) {
			r.Compress = !s.cfg.DisableCompression
			if err := w.WriteMsg(r); err != nil {
				s.logger.Debug("DNS reply not sent", "error", err)
			}
			return
		}
		s.logger.Debug("recursor failed", "recursor", addr, "name", req.Question[0].Name, "error", err)
	}
	resp := new(mdns.Msg).SetRcode(req, mdns.RcodeServerFailure)
	resp.RecursionAvailable = true
	if err := w.WriteMsg(resp); err != nil {
		s.logger.Debug("DNS reply not sent", "error", err)
	}
}
