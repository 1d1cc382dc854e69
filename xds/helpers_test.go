package xds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Short names for the four core type URLs.
const (
	cdsURL = resource.ClusterType
	edsURL = resource.EndpointType
	ldsURL = resource.ListenerType
	rdsURL = resource.RouteType
)

// quiet is how long a test waits to conclude that nothing more comes.
const quiet = 150 * time.Millisecond

// fakeSource is a Source driven by the test: Set publishes a proxy's
// resources to its watches (latest wins, like proxycfg).
type fakeSource struct {
	mu      sync.Mutex
	sets    map[string]Resources
	watches map[string][]*fakeWatch
	refs    []ProxyRef
	err     error
}

type fakeWatch struct {
	ch     chan Resources
	closed bool
}

func newFakeSource() *fakeSource {
	return &fakeSource{sets: map[string]Resources{}, watches: map[string][]*fakeWatch{}}
}

func (f *fakeSource) Watch(ctx context.Context, p ProxyRef) (<-chan Resources, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.refs = append(f.refs, p)
	w := &fakeWatch{ch: make(chan Resources, 1)}
	if res, ok := f.sets[p.ServiceID]; ok {
		w.ch <- res
	}
	f.watches[p.ServiceID] = append(f.watches[p.ServiceID], w)
	context.AfterFunc(ctx, func() { f.closeWatch(p.ServiceID, w) })
	return w.ch, nil
}

// Builder hands the published sets over as they are.
func (f *fakeSource) Builder(ProxyRef) Builder[Resources] {
	return func(r Resources) (Resources, error) { return r, nil }
}

func (f *fakeSource) closeWatch(id string, w *fakeWatch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	close(w.ch)
	f.watches[id] = slices.DeleteFunc(f.watches[id], func(x *fakeWatch) bool { return x == w })
}

// Set publishes a proxy's resources.
func (f *fakeSource) Set(id string, res Resources) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets[id] = res
	for _, w := range f.watches[id] {
		select {
		case <-w.ch:
		default:
		}
		w.ch <- res
	}
}

// CloseAll closes every watch early, as a Source that gives up would.
func (f *fakeSource) CloseAll() {
	f.mu.Lock()
	var all []struct {
		id string
		w  *fakeWatch
	}
	for id, ws := range f.watches {
		for _, w := range ws {
			all = append(all, struct {
				id string
				w  *fakeWatch
			}{id, w})
		}
	}
	f.mu.Unlock()
	for _, x := range all {
		f.closeWatch(x.id, x.w)
	}
}

func (f *fakeSource) Refs() []ProxyRef {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.refs)
}

// testLogger writes the server's log to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// startServer runs an ADS server on 127.0.0.1, as the agent does
// (NewGRPCServer), and returns it and a client connection to it. Cleanup
// stops everything and waits.
func startServer(t testing.TB, src Source[Resources], logger *slog.Logger) (*Server[Resources], *grpc.ClientConn) {
	t.Helper()
	return startServerKind(t, src, logger, false)
}

// serverKinds are the two ways to serve a Server: its own gRPC server
// (responses sent as their encoding) and Register on any other (responses
// sent as messages). Protocol tests run on both.
var serverKinds = []struct {
	name     string
	register bool
}{{"encoded", false}, {"registered", true}}

// onEveryServerKind runs a protocol test case on a fresh server of every
// kind, in parallel: most of a case is waiting for what must not come.
func onEveryServerKind(t *testing.T, name string, run func(t *testing.T, src *fakeSource, srv *Server[Resources], conn *grpc.ClientConn)) {
	for _, kind := range serverKinds {
		t.Run(name+"/"+kind.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeSource()
			srv, conn := startServerKind(t, src, testLogger(t), kind.register)
			run(t, src, srv, conn)
		})
	}
}

// startServerKind is startServer, on a gRPC server of the Server's own
// (NewGRPCServer) or one it is registered on.
func startServerKind(t testing.TB, src Source[Resources], logger *slog.Logger, register bool) (*Server[Resources], *grpc.ClientConn) {
	t.Helper()
	srv, err := New(Config[Resources]{Source: src, NodeName: "agent-node", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Fixed windows, as the agent's xDS server has (no BDP pings).
	opts := []grpc.ServerOption{grpc.InitialWindowSize(1 << 20), grpc.InitialConnWindowSize(1 << 20)}
	var g *grpc.Server
	if register {
		g = grpc.NewServer(opts...)
		srv.Register(g)
	} else {
		g = srv.NewGRPCServer(opts...)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("grpc serve: %v", err)
		}
	})
	return srv, conn
}

// node is an Envoy node for a proxy; nodeName, when set, goes into the
// node_name metadata.
func node(id, nodeName string) *corev3.Node {
	n := &corev3.Node{Id: id, Cluster: "web"}
	if nodeName != "" {
		n.Metadata, _ = structpb.NewStruct(map[string]any{"node_name": nodeName})
	}
	return n
}

// clientStream is the half of an ADS client shared by both protocols: a
// goroutine receives into a channel, so tests can wait with a timeout.
type clientStream[Req, Resp any] struct {
	t      testing.TB
	stream grpc.BidiStreamingClient[Req, Resp]
	resps  chan *Resp
	done   chan error
	cancel context.CancelFunc
}

func newClientStream[Req, Resp any](t testing.TB, open func(ctx context.Context) (grpc.BidiStreamingClient[Req, Resp], error), token string) *clientStream[Req, Resp] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-consul-token", token)
	}
	s, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c := &clientStream[Req, Resp]{t: t, stream: s, resps: make(chan *Resp, 64), done: make(chan error, 1), cancel: cancel}
	go func() {
		for {
			r, err := s.Recv()
			if err != nil {
				close(c.resps)
				c.done <- err
				return
			}
			c.resps <- r
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *clientStream[Req, Resp]) close() {
	c.cancel()
	for range c.resps {
	}
}

func (c *clientStream[Req, Resp]) send(r *Req) {
	c.t.Helper()
	if err := c.stream.Send(r); err != nil && !errors.Is(err, io.EOF) {
		c.t.Fatalf("send: %v", err)
	}
}

// recv waits for the next response.
func (c *clientStream[Req, Resp]) recv() *Resp {
	c.t.Helper()
	select {
	case r, ok := <-c.resps:
		if !ok {
			c.t.Fatalf("stream ended: %v", <-c.done)
		}
		return r
	case <-time.After(5 * time.Second):
		c.t.Fatal("no response within 5s")
	}
	return nil
}

// none asserts that nothing arrives for a while.
func (c *clientStream[Req, Resp]) none() {
	c.t.Helper()
	select {
	case r, ok := <-c.resps:
		if ok {
			c.t.Fatalf("unexpected response: %v", r)
		}
		c.t.Fatalf("stream ended: %v", <-c.done)
	case <-time.After(quiet):
	}
}

// ended waits for the stream to end and returns its error.
func (c *clientStream[Req, Resp]) ended() error {
	c.t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-c.resps:
			if !ok {
				return <-c.done
			}
		case <-deadline:
			c.t.Fatal("stream did not end within 5s")
			return nil
		}
	}
}

type deltaClient = clientStream[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]
type sotwClient = clientStream[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]

func newDeltaClient(t testing.TB, conn *grpc.ClientConn, token string) *deltaClient {
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	return newClientStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse], error) {
		return ads.DeltaAggregatedResources(ctx)
	}, token)
}

func newSotWClient(t testing.TB, conn *grpc.ClientConn, token string) *sotwClient {
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	return newClientStream(t, func(ctx context.Context) (grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse], error) {
		return ads.StreamAggregatedResources(ctx)
	}, token)
}

// deltaAck acknowledges a delta response.
func deltaAck(c *deltaClient, r *discoveryv3.DeltaDiscoveryResponse) {
	c.t.Helper()
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
}

// deltaNack rejects a delta response with Envoy's error text.
func deltaNack(c *deltaClient, r *discoveryv3.DeltaDiscoveryResponse, msg string) {
	c.t.Helper()
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce(),
		ErrorDetail: &rpcstatus.Status{Code: 3, Message: msg}})
}

// sotwAck acknowledges a state-of-the-world response, keeping names.
func sotwAck(c *sotwClient, r *discoveryv3.DiscoveryResponse, names ...string) {
	c.t.Helper()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: r.GetTypeUrl(), VersionInfo: r.GetVersionInfo(),
		ResponseNonce: r.GetNonce(), ResourceNames: names})
}

// deltaNames lists a delta response's resources as "name" and removals as
// "-name", in order.
func deltaNames(r *discoveryv3.DeltaDiscoveryResponse) []string {
	var out []string
	for _, res := range r.GetResources() {
		out = append(out, res.GetName())
	}
	for _, n := range r.GetRemovedResources() {
		out = append(out, "-"+n)
	}
	return out
}

// sotwNames lists a state-of-the-world response's resource names.
func sotwNames(t testing.TB, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resName(m))
	}
	return out
}

// Resource builders. gen varies content without changing names.

func cluster(name string, gen int) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig:   &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
			ServiceName: name,
		},
		ConnectTimeout: durationpb.New(time.Duration(5+gen) * time.Second),
	}
}

func cla(name string, port int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: sockAddr("10.0.0.1", port),
				}},
			}},
		}},
	}
}

func listener(name string, port int) *listenerv3.Listener {
	return &listenerv3.Listener{Name: name, Address: sockAddr("127.0.0.1", port)}
}

func route(name, clusterName string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{
		Name: clusterName, Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: clusterName}}},
		}},
	}}}
}

func sockAddr(ip string, port int) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}

// set builds a Resources value from messages, each keyed by its name.
func set(msgs ...proto.Message) Resources {
	res := Resources{}
	for _, m := range msgs {
		typeURL := resource.APITypePrefix + string(m.ProtoReflect().Descriptor().FullName())
		if res[typeURL] == nil {
			res[typeURL] = map[string]proto.Message{}
		}
		res[typeURL][resName(m)] = m
	}
	return res
}

// baseSet is a small proxy config: clusters a and b with endpoints, a
// listener, a route.
func baseSet() Resources {
	return set(cluster("a", 0), cluster("b", 0), cla("a", 8080), cla("b", 9090),
		listener("public_listener", 21000), route("api", "a"))
}

// resName is the xDS name of a resource.
func resName(m proto.Message) string {
	if c, ok := m.(*endpointv3.ClusterLoadAssignment); ok {
		return c.GetClusterName()
	}
	return m.(interface{ GetName() string }).GetName()
}

// typeOf returns a short name for a type URL, for messages.
func typeOf(url string) string {
	switch url {
	case cdsURL:
		return "CDS"
	case edsURL:
		return "EDS"
	case ldsURL:
		return "LDS"
	case rdsURL:
		return "RDS"
	}
	return fmt.Sprintf("%q", url)
}

// waitFor polls until cond holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
