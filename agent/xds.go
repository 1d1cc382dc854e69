package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
	"github.com/trellis-mesh/trellis/telemetry"
	"github.com/trellis-mesh/trellis/xds"
	"github.com/trellis-mesh/trellis/xds/gen"
)

// proxyWatcher is where the xDS server gets a proxy's snapshots: the local
// config source on a client agent, the catalog config source on a server.
// The channel delivers nothing until the proxy is known and its snapshot
// valid, and is closed once ctx ends (and when the agent shuts down).
type proxyWatcher interface {
	Watch(ctx context.Context, id proxycfg.ProxyID) (<-chan *proxycfg.ConfigSnapshot, error)
}

// xdsSource gives the ADS server the proxies' proxycfg snapshots and
// turns them into Envoy resources on each stream's goroutine, with one
// generator per stream (which rebuilds only what a snapshot changed) and
// endpoint sets shared between all of them.
type xdsSource struct {
	watcher proxyWatcher
	// endpoints shares endpoint sets between the proxies' generators.
	endpoints gen.EndpointCache
	// acl, with ACLs on, asks the servers whether a stream's token may
	// have its proxy's configuration; nil lets every stream through.
	acl xdsAuthorizer
	// localService is this agent's registration of a service ID (nil if
	// none), so that a local proxy's stream is refused before its
	// configuration is built: a token that may not write the service
	// usually may not read what the configuration needs either, and the
	// stream would wait forever for a first snapshot.
	localService func(id string) *structs.NodeService

	// native runs the proxies of proxyless gRPC streams (xds_grpc.go),
	// for the services watchLocal follows in local state (a copy, and a
	// channel closed at the service's next change); nodeName and
	// datacenter are this agent's.
	native     *proxycfg.Manager
	watchLocal func(id string) (*structs.NodeService, <-chan struct{})
	nodeName   string
	datacenter string
	// nativeStreams numbers the proxyless streams, so each gets its own
	// proxy.
	nativeStreams atomic.Uint64
	// wg tracks the goroutines of proxyless streams' watches and the
	// streams' recheck relays (see recheckIdle); stop waits for them once
	// the streams ended.
	wg sync.WaitGroup
}

// xdsAuthorizer is agent/authz.Checker as the xDS streams use it.
type xdsAuthorizer interface {
	Require(ctx context.Context, token string, checks ...authz.Check) error
}

// xdsACLTimeout bounds one question to the servers about a stream's
// token; a stream whose question fails ends (Envoy reconnects).
const xdsACLTimeout = 10 * time.Second

// xdsACLRecheck is how long a stream's permission is trusted before the
// next snapshot asks again: a revoked token loses its stream at the first
// change after it, without a round trip to the servers per change per
// proxy (an endpoint change reaches every proxy at once).
const xdsACLRecheck = 30 * time.Second

// authorizeProxy is Consul's rule for an xDS stream: service:write on a
// sidecar's destination service, or on a gateway's own service. A denial
// is gRPC PermissionDenied with Consul's text, an unknown token
// Unauthenticated, and a failure to ask Unavailable.
func (s *xdsSource) authorizeProxy(token string, svc *structs.NodeService) error {
	if svc == nil {
		return status.Error(codes.PermissionDenied, "permission denied: no service registration")
	}
	name := svc.Service
	if svc.Kind == structs.ServiceKindConnectProxy && svc.Proxy.DestinationServiceName != "" {
		name = svc.Proxy.DestinationServiceName
	}
	ctx, cancel := context.WithTimeout(context.Background(), xdsACLTimeout)
	defer cancel()
	err := s.acl.Require(ctx, token, authz.Write(acl.ResourceService, name))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, structs.ErrACLNotFound):
		return status.Errorf(codes.Unauthenticated, "unauthenticated: %v", structs.ErrACLNotFound)
	case errors.Is(err, structs.ErrPermissionDenied):
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return status.Errorf(codes.Unavailable, "error resolving acl token: %v", err)
}

func (s *xdsSource) Watch(ctx context.Context, ref xds.ProxyRef) (<-chan *proxycfg.ConfigSnapshot, error) {
	if ref.Proxyless && s.native != nil {
		return s.watchNative(ctx, ref)
	}
	if s.acl != nil && s.localService != nil {
		if svc := s.localService(ref.ServiceID); svc != nil {
			if err := s.authorizeProxy(ref.Token, svc); err != nil {
				return nil, err
			}
		}
	}
	// The one place a stream's identity becomes the manager's.
	ch, err := s.watcher.Watch(ctx, proxycfg.ProxyID{Node: ref.Node, ServiceID: ref.ServiceID, Token: ref.Token})
	if err != nil || s.acl == nil {
		return ch, err
	}
	return s.recheckIdle(ctx, ch), nil
}

// xdsIdleOffer is how often a stream whose configuration does not change
// is offered its latest snapshot again, so that the Builder's check of
// its token runs (at most every xdsACLRecheck) even then: a proxy whose
// token is deleted gets no new snapshot at all (every read of its
// configuration is refused), and would otherwise keep its stream. Consul
// re-checks a stream's token on a timer too.
const xdsIdleOffer = xdsACLRecheck / 2

// recheckIdle relays in's snapshots, offering the latest again every
// xdsIdleOffer. Its goroutine ends with ctx (the stream's), or when in
// is closed, and then closes the returned channel.
func (s *xdsSource) recheckIdle(ctx context.Context, in <-chan *proxycfg.ConfigSnapshot) <-chan *proxycfg.ConfigSnapshot {
	out := make(chan *proxycfg.ConfigSnapshot, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		t := time.NewTicker(xdsIdleOffer)
		defer t.Stop()
		var last *proxycfg.ConfigSnapshot
		for {
			select {
			case <-ctx.Done():
				return
			case snap, ok := <-in:
				if !ok {
					return
				}
				last = snap
			case <-t.C:
				if last == nil {
					continue
				}
			}
			offer(out, last)
		}
	}()
	return out
}

func (s *xdsSource) Builder(ref xds.ProxyRef) xds.Builder[*proxycfg.ConfigSnapshot] {
	if ref.Proxyless && s.native != nil {
		return s.nativeBuilder(ref)
	}
	g := &gen.Generator{Endpoints: &s.endpoints}
	authorize := s.recheck(ref)
	// The server is done with a set's outer map once it asks for the next
	// (xds.Source): one map per stream, not one per proxy per change.
	var last gen.Resources
	return func(snap *proxycfg.ConfigSnapshot) (xds.Resources, error) {
		if err := authorize(snap); err != nil {
			return nil, err
		}
		res, err := g.GenerateInto(last, snap)
		if res != nil {
			last = res
		}
		return xds.Resources(res), err
	}
}

// recheck returns one stream's permission check, asked of the servers at
// its first snapshot and then at most every xdsACLRecheck; it lets
// everything through without ACLs.
func (s *xdsSource) recheck(ref xds.ProxyRef) func(*proxycfg.ConfigSnapshot) error {
	var checked time.Time
	return func(snap *proxycfg.ConfigSnapshot) error {
		if s.acl == nil || (!checked.IsZero() && time.Since(checked) < xdsACLRecheck) {
			return nil
		}
		if err := s.authorizeProxy(ref.Token, snap.Service); err != nil {
			return err
		}
		checked = time.Now()
		return nil
	}
}

// xdsReceiveWindow is the HTTP/2 receive window of each xDS stream and
// connection: far above what Envoy's requests need.
const xdsReceiveWindow = 1 << 20

// xdsWriteBuffer is the size of the buffer frames are gathered in before
// each write to an Envoy's connection.
const xdsWriteBuffer = 8 << 10

// xdsServing is the agent's gRPC listener for Envoy.
type xdsServing struct {
	ads  *xds.Server[*proxycfg.ConfigSnapshot]
	grpc *grpc.Server
	src  *xdsSource
	wg   sync.WaitGroup
}

// startXDS serves ADS on every -grpc-port address and, with TLS, every
// -grpc-tls-port address (none when both are disabled).
func (a *Agent) startXDS(watcher proxyWatcher, native *proxycfg.Manager) error {
	addrs := a.grpcListeners() // tls.go
	if len(addrs) == 0 {
		return nil
	}
	src := &xdsSource{
		watcher: watcher, acl: a.xdsACL(), localService: a.localProxy,
		native: native, watchLocal: a.watchLocalService, nodeName: a.rc.NodeName, datacenter: a.rc.Datacenter,
	}
	ads, err := xds.New(xds.Config[*proxycfg.ConfigSnapshot]{
		Source:   src,
		NodeName: a.rc.NodeName,
		Logger:   a.logger.With("component", "xds"),
	})
	if err != nil {
		return err
	}
	streams := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: telemetry.PromName("consul.xds.server.streams"), Help: telemetry.Help("consul.xds.server.streams"),
	}, func() float64 { return float64(ads.Streams()) })
	if err := a.metrics.Register(streams); err != nil {
		return fmt.Errorf("agent: xds metrics: %w", err)
	}
	// Fixed receive windows turn grpc-go's bandwidth estimation off. Envoy's
	// requests are small, so it gains nothing here, and it costs a PING
	// round trip after nearly every ACK: at 1,000 proxies a fifth of the
	// agent's CPU per endpoint change, and as much again in the proxies.
	//
	// The write buffer is borrowed from a pool per flush; at grpc-go's
	// default 32 KiB, the pool's misses during a fan-out to 1,000 streams
	// were a fifth of the agent's garbage per change (and garbage is what
	// paces the GC whose assists make the slowest deliveries). An endpoint
	// update is well under 8 KiB; a larger response takes a few writes.
	// For the same reason the ADS server's own gRPC server encodes
	// responses into pooled buffers (xds.Server.NewGRPCServer).
	gs := ads.NewGRPCServer(
		grpc.InitialWindowSize(xdsReceiveWindow), grpc.InitialConnWindowSize(xdsReceiveWindow),
		grpc.WriteBufferSize(xdsWriteBuffer),
	)
	x := &xdsServing{ads: ads, grpc: gs, src: src}
	for _, l := range addrs {
		addr := l.addr
		ln, err := listen(addr)
		if err != nil {
			x.stop()
			return fmt.Errorf("agent: bind %s %s: %w", l.name, addr, err)
		}
		if l.tls != nil {
			// The gRPC server itself stays without credentials: the TLS
			// is the listener's, so one server serves both ports.
			ln = tls.NewListener(ln, l.tls)
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			if err := gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				a.logger.Error("gRPC server stopped", "addr", addr, "error", err)
			}
		}()
	}
	a.xds = x
	return nil
}

// stop ends every ADS stream first (they never end on their own, and
// their ends stop their recheck relays), then the gRPC server.
func (x *xdsServing) stop() {
	x.ads.Stop()
	x.grpc.GracefulStop()
	x.wg.Wait()
	x.src.wg.Wait()
}

// ProxyStatus reports a proxy's xDS streams for /v1/agent/proxy-status.
func (a *Agent) ProxyStatus(proxyID string) any {
	if a.xds == nil {
		return []xds.StreamStatus{}
	}
	st := a.xds.ads.Status(proxyID)
	if st == nil {
		st = []xds.StreamStatus{}
	}
	return st
}

// watchLocalService is this agent's registration of service id (nil if
// none) and a channel closed at its next change.
func (a *Agent) watchLocalService(id string) (*structs.NodeService, <-chan struct{}) {
	svc, _, ch := a.local.state.WatchService(id)
	return svc, ch
}

// localProxy is this agent's registration of service id, nil if none.
func (a *Agent) localProxy(id string) *structs.NodeService {
	return a.local.state.Services()[id]
}
