package xds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The benchmark proxies look like Consul sidecars with 5 upstreams: 5 EDS
// clusters each carrying an inline upstream TLS context (leaf, key, roots:
// about 3 KB), their 5 endpoint sets of 3 instances, a public listener with
// the same TLS material and 5 upstream listeners.
const (
	benchProxies   = 1000
	benchUpstreams = 5
)

// pem stands in for inline certificate material.
var pem = strings.Repeat("MIIBszCCAVmgAwIBAgIIU2VjcmV0S2V5", 32) // ~1 KB

func tlsSocket() *corev3.TransportSocket {
	ctx := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: pem}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: pem}},
		}},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: pem}},
		}},
	}}
	a, _ := anypb.New(ctx)
	return &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

// benchSet builds a proxy's resources from its shared part; gen changes
// one endpoint.
func benchSet(gen int, shared []proto.Message) Resources {
	res := set(shared...)
	res[edsURL] = map[string]proto.Message{}
	for u := range benchUpstreams {
		name := fmt.Sprintf("up%d.default.dc1.internal.trust.consul", u)
		c := cla(name, 20000)
		for k := 1; k < 3; k++ {
			port := 20000 + k
			if u == 0 && k == 2 {
				port += gen % 2
			}
			c.Endpoints[0].LbEndpoints = append(c.Endpoints[0].LbEndpoints, cla(name, port).Endpoints[0].LbEndpoints[0])
		}
		res[edsURL][name] = c
	}
	return res
}

// benchShared builds the unchanging resources of proxy i (clusters and
// listeners), reused across generations as a caching generator would.
func benchShared(i int) []proto.Message {
	var msgs []proto.Message
	sock := tlsSocket()
	for u := range benchUpstreams {
		name := fmt.Sprintf("up%d.default.dc1.internal.trust.consul", u)
		c := cluster(name, 0)
		c.TransportSocket = sock
		msgs = append(msgs, c, listener(fmt.Sprintf("up%d:127.0.0.1:%d", u, 9000+u), 9000+u))
	}
	pl := listener(fmt.Sprintf("public_listener:10.0.%d.%d:21000", i/256, i%256), 21000)
	pl.FilterChains = []*listenerv3.FilterChain{{TransportSocket: sock}}
	return append(msgs, pl)
}

// simEnvoy is a minimal delta-ADS Envoy: it subscribes to clusters and
// listeners, subscribes to the endpoints of every cluster it gets, ACKs
// everything, and reports each endpoint response.
func simEnvoy(ctx context.Context, id string, send func(*discoveryv3.DeltaDiscoveryRequest) error,
	recv func() (*discoveryv3.DeltaDiscoveryResponse, error), ready chan<- struct{}, eds chan<- time.Time) {
	if send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: id}, TypeUrl: cdsURL}) != nil {
		return
	}
	if send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: ldsURL}) != nil {
		return
	}
	readied := false
	for {
		r, err := recv()
		if err != nil {
			return
		}
		if send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}) != nil {
			return
		}
		switch r.GetTypeUrl() {
		case cdsURL:
			var names []string
			for _, res := range r.GetResources() {
				names = append(names, res.GetName())
			}
			if send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesSubscribe: names}) != nil {
				return
			}
		case ldsURL:
			if !readied {
				readied = true
				ready <- struct{}{}
			}
		case edsURL:
			if readied {
				select {
				case eds <- time.Now():
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// memStream is an in-memory delta ADS server stream: the benchmark drives
// the real handler without gRPC, to measure the server alone.
type memStream struct {
	ctx   context.Context
	reqs  chan *discoveryv3.DeltaDiscoveryRequest
	resps chan *discoveryv3.DeltaDiscoveryResponse
}

func (m *memStream) Recv() (*discoveryv3.DeltaDiscoveryRequest, error) {
	select {
	case r := <-m.reqs:
		return r, nil
	case <-m.ctx.Done():
		return nil, m.ctx.Err()
	}
}

func (m *memStream) Send(r *discoveryv3.DeltaDiscoveryResponse) error {
	select {
	case m.resps <- r:
		return nil
	case <-m.ctx.Done():
		return m.ctx.Err()
	}
}

func (m *memStream) SetHeader(metadata.MD) error  { return nil }
func (m *memStream) SendHeader(metadata.MD) error { return nil }
func (m *memStream) SetTrailer(metadata.MD)       {}
func (m *memStream) Context() context.Context     { return m.ctx }
func (m *memStream) SendMsg(any) error            { return errors.New("memStream: SendMsg is not used") }

// RecvMsg is Recv into msg: the server reads requests this way, into a
// message it reuses.
func (m *memStream) RecvMsg(msg any) error {
	r, err := m.Recv()
	if err != nil {
		return err
	}
	proto.Merge(msg.(proto.Message), r)
	return nil
}

var _ grpc.BidiStreamingServer[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse] = (*memStream)(nil)

func memUsage() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDeltaStreams connects 1,000 simulated delta-ADS proxies with 5
// upstreams each, then changes one endpoint of every proxy per iteration
// and waits until every stream has received (and ACKed) it. It reports
// memory per connected stream, CPU per endpoint change (one proxy's
// update) and the p99 delay from the Source delivering a change to the
// proxy receiving it.
//
//	go test -run '^$' -bench DeltaStreams -benchtime 20x ./xds/
//
// "fresh" sets are built from new messages every time (a generator that
// rebuilds everything from each snapshot: the server re-encodes and
// re-hashes all of a proxy's resources per change); "reused" sets keep the
// message pointers of unchanged clusters and listeners (a caching
// generator). "inmem" drives the handlers through in-memory streams, so the
// memory figures are the server's plus one small simulated-Envoy goroutine
// per stream; "grpc" goes through real gRPC on 127.0.0.1, all streams on
// one connection, and its memory figures include both gRPC ends; "conns"
// gives every stream a connection of its own, as every Envoy has: the
// cost of the ADS server and gRPC per proxy, with no proxycfg, generation
// or coalescing in front (grpc-go clients in this process, so CPU is both
// ends').
func BenchmarkDeltaStreams(b *testing.B) {
	for _, tc := range []struct{ transport, sets string }{
		{"inmem", "fresh"}, {"inmem", "reused"}, {"grpc", "fresh"}, {"conns", "reused"},
	} {
		b.Run(tc.transport+"/"+tc.sets, func(b *testing.B) { benchDeltaStreams(b, tc.transport, tc.sets == "fresh") })
	}
}

func benchDeltaStreams(b *testing.B, transport string, fresh bool) {
	src := newFakeSource()
	sets := make([][2]Resources, benchProxies)
	for i := range benchProxies {
		shared := benchShared(i)
		sets[i][0] = benchSet(0, shared)
		if fresh {
			shared = benchShared(i)
		}
		sets[i][1] = benchSet(1, shared)
		src.Set(fmt.Sprintf("proxy-%d", i), sets[i][0])
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	ready := make(chan struct{}, benchProxies)
	edsCh := make([]chan time.Time, benchProxies)
	for i := range edsCh {
		edsCh[i] = make(chan time.Time, 4)
	}

	var srv *Server[Resources]
	var open func(i int)
	switch transport {
	case "inmem":
		var err error
		srv, err = New(Config[Resources]{Source: src, NodeName: "n", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		open = func(i int) {
			ms := &memStream{ctx: ctx, reqs: make(chan *discoveryv3.DeltaDiscoveryRequest), resps: make(chan *discoveryv3.DeltaDiscoveryResponse)}
			wg.Add(2)
			go func() {
				defer wg.Done()
				if err := srv.DeltaAggregatedResources(ms); err != nil && ctx.Err() == nil {
					b.Errorf("stream %d: %v", i, err)
				}
			}()
			go func() {
				defer wg.Done()
				simEnvoy(ctx, fmt.Sprintf("proxy-%d", i),
					func(r *discoveryv3.DeltaDiscoveryRequest) error {
						select {
						case ms.reqs <- r:
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					},
					func() (*discoveryv3.DeltaDiscoveryResponse, error) {
						select {
						case r := <-ms.resps:
							return r, nil
						case <-ctx.Done():
							return nil, ctx.Err()
						}
					}, ready, edsCh[i])
			}()
		}
	case "conns":
		var conn *grpc.ClientConn
		srv, conn = startServer(b, src, slog.New(slog.DiscardHandler))
		open = func(i int) {
			c, err := grpc.NewClient(conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
			if err != nil {
				b.Fatal(err)
			}
			s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(c).DeltaAggregatedResources(ctx)
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { _ = c.Close() }()
				simEnvoy(ctx, fmt.Sprintf("proxy-%d", i), s.Send, s.Recv, ready, edsCh[i])
			}()
		}
	case "grpc":
		var conn *grpc.ClientConn
		srv, conn = startServer(b, src, slog.New(slog.DiscardHandler))
		ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
		open = func(i int) {
			s, err := ads.DeltaAggregatedResources(ctx)
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				simEnvoy(ctx, fmt.Sprintf("proxy-%d", i), s.Send, s.Recv, ready, edsCh[i])
			}()
		}
	}
	for i := range benchProxies {
		open(i)
	}
	for range benchProxies {
		select {
		case <-ready:
		case <-time.After(time.Minute):
			b.Fatal("the streams did not all get their configuration")
		}
	}
	heap1, stack1 := memUsage()

	delays := make([]time.Duration, 0, b.N*benchProxies)
	cpu0 := cpuTime()
	b.ResetTimer()
	for n := range b.N {
		if testing.Verbose() && n > 0 {
			b.Logf("round %d: max delay %v", n-1, slices.Max(delays[len(delays)-benchProxies:]))
		}
		start := make([]time.Time, benchProxies)
		for i := range benchProxies {
			start[i] = time.Now()
			src.Set(fmt.Sprintf("proxy-%d", i), sets[i][(n+1)%2])
		}
		for i := range benchProxies {
			select {
			case got := <-edsCh[i]:
				delays = append(delays, got.Sub(start[i]))
			case <-time.After(30 * time.Second):
				b.Fatalf("proxy %d got no endpoint update", i)
			}
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	slices.Sort(delays)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*benchProxies), "cpu-us/change")
	b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(delays[len(delays)-1].Microseconds())/1000, "max-ms")

	// Memory per stream: connected minus after every stream closed, so the
	// Source's resource sets (alive throughout) do not count.
	cancel()
	wg.Wait()
	srv.Stop()
	heap2, stack2 := memUsage()
	runtime.KeepAlive(sets)
	runtime.KeepAlive(src)
	b.ReportMetric((float64(heap1)-float64(heap2))/benchProxies/1024, "heap-KB/stream")
	b.ReportMetric((float64(stack1)-float64(stack2))/benchProxies/1024, "stack-KB/stream")
}
