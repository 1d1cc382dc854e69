package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// ProxySpec is one simulated Envoy: its node and what its full
// configuration holds.
type ProxySpec struct {
	// ID is the node id, the sidecar's proxy service ID.
	ID string
	// Cluster is the node cluster, the proxied service's name.
	Cluster string
	// Upstreams is how many upstreams the sidecar has: its full config
	// is the public listener and one listener per upstream, an EDS
	// cluster per upstream with endpoints, and every route its
	// listeners name.
	Upstreams int
}

// FleetConfig configures StartFleet.
type FleetConfig struct {
	// Addr is the ADS server, host:port.
	Addr string
	// Token is sent as x-consul-token, when not empty.
	Token   string
	Proxies []ProxySpec
	// Logger receives stream failures; nil discards them.
	Logger *slog.Logger
}

// Fleet is a set of simulated Envoys, one delta ADS stream on a
// connection of its own each, behaving as Envoy does: wildcard CDS and
// LDS subscriptions, EDS and RDS subscriptions following the clusters
// and listeners received, every response ACKed. It owns one goroutine
// per stream; Close stops and waits for them.
type Fleet struct {
	cfg    FleetConfig
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	start  time.Time

	// firstAt and firstBytes are, per stream, when (ns after start) it
	// first held its full config and the bytes received until then.
	firstAt    []atomic.Int64
	firstBytes []atomic.Int64
	readyLeft  atomic.Int64
	ready      chan struct{}
	reconnects atomic.Int64

	msgs, bytes atomic.Int64
	expect      atomic.Pointer[Expect]
}

// StartFleet opens every proxy's stream.
func StartFleet(cfg FleetConfig) *Fleet {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{
		cfg:        cfg,
		log:        cmpLogger(cfg.Logger),
		cancel:     cancel,
		start:      time.Now(),
		firstAt:    make([]atomic.Int64, len(cfg.Proxies)),
		firstBytes: make([]atomic.Int64, len(cfg.Proxies)),
		ready:      make(chan struct{}),
	}
	f.readyLeft.Store(int64(len(cfg.Proxies)))
	if len(cfg.Proxies) == 0 {
		close(f.ready)
	}
	for i := range cfg.Proxies {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.run(ctx, i)
		}()
	}
	return f
}

// Reconnect backoff of a simulated Envoy whose stream failed: Envoy
// retries its ADS stream with a jittered exponential backoff too.
const (
	reconnectMin = 250 * time.Millisecond
	reconnectMax = 4 * time.Second
)

// run is simulated Envoy i: its stream, opened again after each failure
// until ctx ends, as Envoy does. A failure is counted (Reconnects), not
// fatal to the run: on a loaded machine a target may drop a few of
// thousands of connections, and what matters is whether and when each
// proxy gets its configuration.
func (f *Fleet) run(ctx context.Context, i int) {
	backoff := reconnectMin
	for {
		err := f.stream(ctx, i)
		if ctx.Err() != nil {
			return
		}
		f.reconnects.Add(1)
		f.log.Warn("stream failed; reconnecting", "proxy", f.cfg.Proxies[i].ID, "error", err, "after", backoff)
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1)) //nolint:gosec // spreads reconnects, not a secret
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, reconnectMax)
	}
}

func cmpLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Close disconnects every stream and waits for their goroutines.
func (f *Fleet) Close() {
	f.cancel()
	f.wg.Wait()
}

// WaitReady waits until every stream holds its full config, ctx ends or
// wait passes; only ctx's end is an error (the streams not ready count as
// missing in FirstConfig).
func (f *Fleet) WaitReady(ctx context.Context, wait time.Duration) error {
	select {
	case <-f.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return nil
	}
}

// Reconnects is how many times a stream failed and was opened again.
func (f *Fleet) Reconnects() int64 { return f.reconnects.Load() }

// FirstConfig returns, for every stream that holds its full config, the
// time from the fleet's start until it did and the bytes it received
// until then; missing counts the others.
func (f *Fleet) FirstConfig() (times []time.Duration, bytes []int64, missing int) {
	for i := range f.firstAt {
		at := f.firstAt[i].Load()
		if at == 0 {
			missing++
			continue
		}
		times = append(times, time.Duration(at))
		bytes = append(bytes, f.firstBytes[i].Load())
	}
	return times, bytes, missing
}

// Arm makes the streams record the arrival of x (nil disarms).
func (f *Fleet) Arm(x *Expect) { f.expect.Store(x) }

// Traffic is the number of responses and their bytes (gRPC messages
// with their 5-byte prefix) every stream received so far.
func (f *Fleet) Traffic() (msgs, bytes int64) { return f.msgs.Load(), f.bytes.Load() }

// node is the node of proxy p as Envoy sends it from the bootstrap
// `consul connect envoy` writes: id, cluster, the namespace and
// partition metadata, and Envoy's name and version (1.33), by which
// servers choose features as they do for a real Envoy.
func node(p ProxySpec) *corev3.Node {
	md, _ := structpb.NewStruct(map[string]any{"namespace": "default", "partition": "default"})
	version := &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: &corev3.BuildVersion{
		Version: &typev3.SemanticVersion{MajorNumber: 1, MinorNumber: 33},
	}}
	return &corev3.Node{Id: p.ID, Cluster: p.Cluster, Metadata: md, UserAgentName: "envoy", UserAgentVersionType: version}
}

// envoyState is what one stream holds.
type envoyState struct {
	listeners map[string]bool
	clusters  map[string]string // EDS cluster name -> its assignment's name
	endpoints map[string]int    // assignment name -> endpoint count
	edsSubs   map[string]bool
	routeSubs map[string]bool
	routes    map[string]bool
}

func (s *envoyState) complete(p ProxySpec) bool {
	if len(s.listeners) < 1+p.Upstreams || len(s.clusters) < p.Upstreams {
		return false
	}
	for _, eds := range s.clusters {
		if s.endpoints[eds] == 0 {
			return false
		}
	}
	for name := range s.routeSubs {
		if !s.routes[name] {
			return false
		}
	}
	return true
}

// stream is simulated Envoy i, until ctx ends or the server fails it.
func (f *Fleet) stream(ctx context.Context, i int) error {
	p := f.cfg.Proxies[i]
	c, err := DialADS(ctx, f.cfg.Addr, f.cfg.Token)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node(p), TypeUrl: resource.ClusterType}); err != nil {
		return err
	}
	if err := c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType}); err != nil {
		return err
	}
	st := &envoyState{
		listeners: map[string]bool{}, clusters: map[string]string{}, endpoints: map[string]int{},
		edsSubs: map[string]bool{}, routeSubs: map[string]bool{}, routes: map[string]bool{},
	}
	var received int64
	for {
		r, err := c.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		size := int64(5 + proto.Size(r))
		received += size
		f.msgs.Add(1)
		f.bytes.Add(size)
		follow, err := st.apply(r, i, f.expect.Load(), now)
		if err != nil {
			return err
		}
		// Like Envoy: ask for the endpoints of new clusters (the routes
		// of new listeners) before acknowledging them.
		if follow != nil {
			if err := c.Send(follow); err != nil {
				return err
			}
		}
		if err := c.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
			return err
		}
		// Once per proxy, over its reconnects: the time counts from the
		// fleet's start, so a failed first stream shows in it.
		if f.firstAt[i].Load() == 0 && st.complete(p) {
			f.firstAt[i].Store(int64(max(now.Sub(f.start), 1)))
			f.firstBytes[i].Store(received)
			if f.readyLeft.Add(-1) == 0 {
				close(f.ready)
			}
		}
	}
}

// apply takes response r into the state and returns the subscription
// change it calls for, if any. Endpoint sets are shown to x.
func (s *envoyState) apply(r *discoveryv3.DeltaDiscoveryResponse, i int, x *Expect, now time.Time) (*discoveryv3.DeltaDiscoveryRequest, error) {
	var sub, unsub []string
	typ := resource.EndpointType
	switch r.GetTypeUrl() {
	case resource.ClusterType:
		for _, res := range r.GetResources() {
			var c clusterv3.Cluster
			if err := res.GetResource().UnmarshalTo(&c); err != nil {
				return nil, fmt.Errorf("decode cluster: %w", err)
			}
			if c.GetType() != clusterv3.Cluster_EDS && c.GetEdsClusterConfig() == nil {
				continue
			}
			eds := c.GetEdsClusterConfig().GetServiceName()
			if eds == "" {
				eds = c.GetName()
			}
			s.clusters[c.GetName()] = eds
			if !s.edsSubs[eds] {
				s.edsSubs[eds] = true
				sub = append(sub, eds)
			}
		}
		for _, name := range r.GetRemovedResources() {
			if eds, ok := s.clusters[name]; ok {
				delete(s.clusters, name)
				delete(s.edsSubs, eds)
				delete(s.endpoints, eds)
				unsub = append(unsub, eds)
			}
		}
	case resource.EndpointType:
		for _, res := range r.GetResources() {
			var cla endpointv3.ClusterLoadAssignment
			if err := res.GetResource().UnmarshalTo(&cla); err != nil {
				return nil, fmt.Errorf("decode endpoints: %w", err)
			}
			x.Observe(i, &cla, now)
			count := 0
			for _, l := range cla.GetEndpoints() {
				count += len(l.GetLbEndpoints())
			}
			s.endpoints[cla.GetClusterName()] = count
		}
		for _, name := range r.GetRemovedResources() {
			delete(s.endpoints, name)
		}
	case resource.ListenerType:
		typ = resource.RouteType
		for _, res := range r.GetResources() {
			var l listenerv3.Listener
			if err := res.GetResource().UnmarshalTo(&l); err != nil {
				return nil, fmt.Errorf("decode listener: %w", err)
			}
			s.listeners[res.GetName()] = true
			for _, name := range routeNames(&l) {
				if !s.routeSubs[name] {
					s.routeSubs[name] = true
					sub = append(sub, name)
				}
			}
		}
		for _, name := range r.GetRemovedResources() {
			delete(s.listeners, name)
		}
	case resource.RouteType:
		for _, res := range r.GetResources() {
			s.routes[res.GetName()] = true
		}
		for _, name := range r.GetRemovedResources() {
			delete(s.routes, name)
		}
	}
	if len(sub) == 0 && len(unsub) == 0 {
		return nil, nil
	}
	return &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub}, nil
}

// errNoHCM is returned by hcmOf for a filter that is not an HTTP
// connection manager.
var errNoHCM = errors.New("not an http connection manager")

// routeNames lists the RDS route configurations a listener's HTTP
// connection managers name.
func routeNames(l *listenerv3.Listener) []string {
	var names []string
	chains := append([]*listenerv3.FilterChain{l.GetDefaultFilterChain()}, l.GetFilterChains()...)
	for _, fc := range chains {
		for _, flt := range fc.GetFilters() {
			hcm, err := hcmOf(flt)
			if err != nil {
				continue
			}
			if name := hcm.GetRds().GetRouteConfigName(); name != "" {
				names = append(names, name)
			}
		}
	}
	return names
}

func hcmOf(flt *listenerv3.Filter) (*hcmv3.HttpConnectionManager, error) {
	tc := flt.GetTypedConfig()
	if tc == nil || tc.GetTypeUrl() != "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" {
		return nil, errNoHCM
	}
	var hcm hcmv3.HttpConnectionManager
	if err := tc.UnmarshalTo(&hcm); err != nil {
		return nil, fmt.Errorf("decode http connection manager: %w", err)
	}
	return &hcm, nil
}
