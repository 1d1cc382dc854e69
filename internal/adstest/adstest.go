// Package adstest is a minimal Envoy for tests that need what a proxy is
// sent and nothing else: one delta ADS stream that presents a node and an
// ACL token, subscribes as Envoy does (wildcard clusters and listeners,
// then the endpoints of every EDS cluster it receives), acknowledges every
// response, and keeps what it holds. The agent's and the integration
// tests both use it; tests that judge the protocol itself (NACKs, resume,
// ordering) have their own clients.
package adstest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Config says which proxy the stream is for.
type Config struct {
	// Addr is the agent's plaintext gRPC address, host:port.
	Addr string
	// ProxyID is the Envoy node ID: the proxy's service ID.
	ProxyID string
	// NodeName, when set, is sent as the node_name metadata: the node
	// the proxy is registered on, for a server serving a proxy of
	// another agent.
	NodeName string
	// Token is sent as x-consul-token metadata when not empty, as Envoy
	// sends the one of its bootstrap.
	Token string
}

// View is what a stream holds, by resource name. It is the stream's
// copy: the caller may keep it.
type View struct {
	Listeners map[string]*listenerv3.Listener
	Clusters  map[string]*clusterv3.Cluster
	// Endpoints are keyed by cluster (EDS service) name.
	Endpoints map[string]*endpointv3.ClusterLoadAssignment
}

// EndpointCount counts the endpoints held for the EDS clusters whose names
// start with prefix (Consul's cluster names end in the trust domain).
func (v View) EndpointCount(prefix string) int {
	n := 0
	for name, cla := range v.Endpoints {
		if len(name) >= len(prefix) && name[:len(prefix)] == prefix {
			for _, l := range cla.GetEndpoints() {
				n += len(l.GetLbEndpoints())
			}
		}
	}
	return n
}

// Leaves returns the PEM leaf certificates the stream holds: those the
// listeners' filter chains present and those the clusters present to
// their upstreams (the proxy's identity, one per TLS context).
func (v View) Leaves() []string {
	var out []string
	add := func(ts *corev3.TransportSocket, ctx interface {
		proto.Message
		GetCommonTlsContext() *tlsv3.CommonTlsContext
	}) {
		if ts.GetTypedConfig().UnmarshalTo(ctx) != nil {
			return
		}
		for _, c := range ctx.GetCommonTlsContext().GetTlsCertificates() {
			if pem := c.GetCertificateChain().GetInlineString(); pem != "" {
				out = append(out, pem)
			}
		}
	}
	for _, l := range v.Listeners {
		for _, fc := range l.GetFilterChains() {
			add(fc.GetTransportSocket(), &tlsv3.DownstreamTlsContext{})
		}
	}
	for _, c := range v.Clusters {
		add(c.GetTransportSocket(), &tlsv3.UpstreamTlsContext{})
	}
	return out
}

// Stream is one open ADS stream. It owns one receiving goroutine, which
// Close stops and waits for.
type Stream struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// view, ended and changed are guarded by mu. changed is closed and
	// replaced at every response and at the stream's end.
	view    View
	ended   error
	changed chan struct{}
}

// Open dials cfg.Addr and starts the stream with the cluster and listener
// subscriptions.
func Open(cfg Config) (*Stream, error) {
	conn, err := grpc.NewClient(cfg.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("adstest: dial %s: %w", cfg.Addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-consul-token", cfg.Token)
	}
	ads, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		cancel()
		_ = conn.Close()
		return nil, fmt.Errorf("adstest: open stream: %w", err)
	}
	s := &Stream{conn: conn, cancel: cancel, changed: make(chan struct{}), view: View{
		Listeners: map[string]*listenerv3.Listener{},
		Clusters:  map[string]*clusterv3.Cluster{},
		Endpoints: map[string]*endpointv3.ClusterLoadAssignment{},
	}}
	node := &corev3.Node{Id: cfg.ProxyID}
	if cfg.NodeName != "" {
		node.Metadata, _ = structpb.NewStruct(map[string]any{"node_name": cfg.NodeName})
	}
	first := []*discoveryv3.DeltaDiscoveryRequest{
		{Node: node, TypeUrl: resource.ClusterType},
		{TypeUrl: resource.ListenerType},
	}
	for _, r := range first {
		if err := ads.Send(r); err != nil {
			s.Close()
			return nil, fmt.Errorf("adstest: subscribe: %w", err)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.end(s.receive(ads))
	}()
	return s, nil
}

// Close ends the stream and waits for its goroutine. Calling it again is
// harmless.
func (s *Stream) Close() {
	s.cancel()
	s.wg.Wait()
	_ = s.conn.Close()
}

// Await waits until cond holds for what the stream holds, and returns that
// view; it returns the stream's error (a gRPC status) if the stream ends
// first, or ctx's.
func (s *Stream) Await(ctx context.Context, cond func(View) bool) (View, error) {
	for {
		s.mu.Lock()
		v, ended, ch := s.copyLocked(), s.ended, s.changed
		s.mu.Unlock()
		if cond(v) {
			return v, nil
		}
		if ended != nil {
			return v, ended
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-ch:
		}
	}
}

func (s *Stream) copyLocked() View {
	return View{Listeners: maps.Clone(s.view.Listeners), Clusters: maps.Clone(s.view.Clusters), Endpoints: maps.Clone(s.view.Endpoints)}
}

func (s *Stream) end(err error) {
	if err == nil {
		err = errors.New("adstest: stream ended")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = err
	close(s.changed)
	s.changed = make(chan struct{})
}

// receive applies responses until the stream fails: like Envoy, it asks
// for the endpoints of new EDS clusters before it acknowledges them.
func (s *Stream) receive(ads discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) error {
	subscribed := map[string]bool{}
	for {
		r, err := ads.Recv()
		if err != nil {
			return err
		}
		eds, err := s.apply(r)
		if err != nil {
			return err
		}
		var sub []string
		for _, name := range eds {
			if !subscribed[name] {
				subscribed[name] = true
				sub = append(sub, name)
			}
		}
		if len(sub) > 0 {
			if err := ads.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: sub}); err != nil {
				return err
			}
		}
		if err := ads.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
			return err
		}
	}
}

// apply takes one response into the view and returns the EDS names of the
// clusters it brought.
func (s *Stream) apply(r *discoveryv3.DeltaDiscoveryResponse) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		close(s.changed)
		s.changed = make(chan struct{})
	}()
	var eds []string
	for _, res := range r.GetResources() {
		m, err := res.GetResource().UnmarshalNew()
		if err != nil {
			return nil, fmt.Errorf("adstest: decode %s: %w", res.GetName(), err)
		}
		switch x := m.(type) {
		case *listenerv3.Listener:
			s.view.Listeners[res.GetName()] = x
		case *clusterv3.Cluster:
			s.view.Clusters[res.GetName()] = x
			if x.GetType() == clusterv3.Cluster_EDS || x.GetEdsClusterConfig() != nil {
				eds = append(eds, cmp.Or(x.GetEdsClusterConfig().GetServiceName(), x.GetName()))
			}
		case *endpointv3.ClusterLoadAssignment:
			s.view.Endpoints[res.GetName()] = x
		}
	}
	for _, name := range r.GetRemovedResources() {
		switch r.GetTypeUrl() {
		case resource.ListenerType:
			delete(s.view.Listeners, name)
		case resource.ClusterType:
			delete(s.view.Clusters, name)
		case resource.EndpointType:
			delete(s.view.Endpoints, name)
		}
	}
	return eds, nil
}
