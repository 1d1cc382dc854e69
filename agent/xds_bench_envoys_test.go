package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/trellis-mesh/trellis/bench"
)

// The simulated Envoys of BenchmarkXDSEndpointChange run in a child
// process: this test binary, re-executed to run that benchmark with
// xdsBenchClientsEnv set to "<gRPC address>,<N>". The parent drives it
// through stdin, one command a line, and reads its replies on stdout
// (lines starting with xdsBenchReply, so that the testing package's own
// output is ignored):
//
//	(start)                    -> ready             every stream holds its full config
//	expect <seq> <ip> <port>   -> armed <seq>       then, once every stream got an
//	                           -> arrived <seq> t1 .. tN   EDS response with ip:port
//	                                                (Unix ns at which each stream got it)
//	expect-gone <seq> <ip> <port> <service>         the same, for an EDS response without
//	                                                ip:port for a cluster of that upstream
//	cpu                        -> cpu <ns>          the child's CPU time so far
//	(stdin closed)                                  disconnect and exit
//
// Any failure is replied as "error <text>", which the parent reports.
const (
	xdsBenchClientsEnv = "TRELLIS_XDSBENCH_ENVOYS"
	xdsBenchReply      = "xdsbench: "
	// xdsBenchProfileEnv names a file for a CPU profile of the child,
	// from "ready" to its exit.
	xdsBenchProfileEnv = "TRELLIS_XDSBENCH_CLIENT_CPUPROFILE"
)

// runXDSBenchEnvoys is the child process's side of the benchmark.
func runXDSBenchEnvoys(b *testing.B) {
	addr, nStr, _ := strings.Cut(os.Getenv(xdsBenchClientsEnv), ",")
	n, err := strconv.Atoi(nStr)
	if err != nil {
		b.Fatalf("%s: %v", xdsBenchClientsEnv, err)
	}
	out := bufio.NewWriter(os.Stdout)
	reply := func(format string, args ...any) {
		_, _ = fmt.Fprintf(out, xdsBenchReply+format+"\n", args...)
		_ = out.Flush()
	}
	if err := serveXDSBenchEnvoys(addr, n, os.Stdin, reply); err != nil {
		reply("error %s", strings.ReplaceAll(err.Error(), "\n", " "))
		b.Fatal(err)
	}
}

// xdsBenchEnvoys are n simulated Envoys, one delta ADS stream and one
// HTTP/2 connection each, spoken by bench.ADSConn (a goroutine per
// connection, nothing else) rather than grpc-go's client, whose CPU would
// compete with the agent's.
type xdsBenchEnvoys struct {
	n      int
	ready  chan struct{}
	failed chan error
	expect atomic.Pointer[xdsBenchExpect]
}

// xdsBenchExpect is one expected endpoint change: which endpoint, and when
// each stream received it.
type xdsBenchExpect struct {
	addr string
	port uint32
	// gone expects the endpoint's removal: a stream gets it with an
	// endpoint set without it for a cluster whose name starts with
	// prefix (the upstream's: clusters are named by SNI, which starts
	// with the service name).
	gone     bool
	prefix   string
	arrivals []atomic.Int64 // Unix ns; 0 until received
	left     atomic.Int64
	done     chan struct{}
}

// saw records an endpoint set stream i received at t for cluster, with
// or without the expected endpoint (found): arrived is the first with it,
// or, when gone, the first of the upstream's without it. x may be nil
// (nothing expected).
func (x *xdsBenchExpect) saw(i int, cluster string, found bool, t time.Time) {
	switch {
	case x == nil:
	case !x.gone && found, x.gone && !found && strings.HasPrefix(cluster, x.prefix):
		x.arrived(i, t)
	}
}

// arrived records that stream i received the change at t (the first
// time only).
func (x *xdsBenchExpect) arrived(i int, t time.Time) {
	if x.arrivals[i].CompareAndSwap(0, t.UnixNano()) && x.left.Add(-1) == 0 {
		close(x.done)
	}
}

func serveXDSBenchEnvoys(addr string, n int, commands io.Reader, reply func(string, ...any)) error {
	e := &xdsBenchEnvoys{n: n, ready: make(chan struct{}, n), failed: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.stream(ctx, i, addr); err != nil && ctx.Err() == nil {
				select {
				case e.failed <- fmt.Errorf("stream %d: %w", i, err):
				default:
				}
			}
		}()
	}
	deadline := time.After(xdsBenchWait)
	for range n {
		select {
		case <-e.ready:
		case err := <-e.failed:
			return err
		case <-deadline:
			return errors.New("not every stream got its full config in time")
		}
	}
	if path := os.Getenv(xdsBenchProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	reply("ready")

	sc := bufio.NewScanner(commands)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "cpu":
			reply("cpu %d", processCPU().Nanoseconds())
		case len(f) == 4 && f[0] == "expect", len(f) == 5 && f[0] == "expect-gone":
			port, err := strconv.ParseUint(f[3], 10, 32)
			if err != nil {
				return err
			}
			x := &xdsBenchExpect{addr: f[2], port: uint32(port), arrivals: make([]atomic.Int64, n), done: make(chan struct{})}
			if f[0] == "expect-gone" {
				x.gone, x.prefix = true, f[4]+"."
			}
			x.left.Store(int64(n))
			e.expect.Store(x)
			reply("armed %s", f[1])
			select {
			case <-x.done:
			case err := <-e.failed:
				return err
			case <-time.After(xdsBenchWait):
				return fmt.Errorf("change %s: %d streams did not get %s:%d", f[1], x.left.Load(), x.addr, x.port)
			}
			e.expect.Store(nil)
			var sb strings.Builder
			sb.WriteString("arrived " + f[1])
			for i := range x.arrivals {
				sb.WriteByte(' ')
				sb.WriteString(strconv.FormatInt(x.arrivals[i].Load(), 10))
			}
			reply("%s", sb.String())
		default:
			return fmt.Errorf("unknown command %q", sc.Text())
		}
	}
	return sc.Err()
}

// stream is simulated Envoy i: it subscribes to clusters and listeners
// (wildcard), to the endpoints of every EDS cluster it receives, ACKs every
// response, reports once it holds its full configuration, and records the
// arrival of the expected endpoint. It has a connection of its own to
// addr, which ends with ctx.
func (e *xdsBenchEnvoys) stream(ctx context.Context, i int, addr string) error {
	s, err := bench.DialADS(ctx, addr, "")
	if err != nil {
		return err
	}
	defer s.Close()
	node := &corev3.Node{Id: fmt.Sprintf("client-%d-sidecar-proxy", i), Cluster: fmt.Sprintf("client-%d", i)}
	if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}); err != nil {
		return err
	}
	if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType}); err != nil {
		return err
	}
	listeners := map[string]bool{}
	clusters := map[string]string{} // EDS cluster name -> its assignment's name
	endpoints := map[string]int{}   // assignment name -> endpoint count
	subscribed := map[string]bool{}
	readied := false
	for {
		r, err := s.Recv()
		if err != nil {
			return err
		}
		now := time.Now()
		var subscribe []string
		switch r.GetTypeUrl() {
		case resource.ClusterType:
			for _, res := range r.GetResources() {
				var c clusterv3.Cluster
				if err := res.GetResource().UnmarshalTo(&c); err != nil {
					return err
				}
				if c.GetType() != clusterv3.Cluster_EDS && c.GetEdsClusterConfig() == nil {
					continue
				}
				eds := c.GetEdsClusterConfig().GetServiceName()
				if eds == "" {
					eds = c.GetName()
				}
				clusters[c.GetName()] = eds
				if !subscribed[eds] {
					subscribed[eds] = true
					subscribe = append(subscribe, eds)
				}
			}
			for _, name := range r.GetRemovedResources() {
				delete(clusters, name)
			}
		case resource.EndpointType:
			x := e.expect.Load()
			for _, res := range r.GetResources() {
				var cla endpointv3.ClusterLoadAssignment
				if err := res.GetResource().UnmarshalTo(&cla); err != nil {
					return err
				}
				count, found := 0, false
				for _, l := range cla.GetEndpoints() {
					for _, ep := range l.GetLbEndpoints() {
						count++
						sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
						found = found || x != nil && sa.GetAddress() == x.addr && sa.GetPortValue() == x.port
					}
				}
				x.saw(i, cla.GetClusterName(), found, now)
				endpoints[cla.GetClusterName()] = count
			}
			for _, name := range r.GetRemovedResources() {
				delete(endpoints, name)
			}
		case resource.ListenerType:
			for _, res := range r.GetResources() {
				listeners[res.GetName()] = true
			}
			for _, name := range r.GetRemovedResources() {
				delete(listeners, name)
			}
		}
		// Like Envoy: ask for the endpoints of new clusters before
		// acknowledging them.
		if len(subscribe) > 0 {
			if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: subscribe}); err != nil {
				return err
			}
		}
		if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()}); err != nil {
			return err
		}
		if !readied && e.complete(listeners, clusters, endpoints) {
			readied = true
			e.ready <- struct{}{}
		}
	}
}

// complete reports whether a proxy holds its full configuration: the
// public listener and one per upstream, an EDS cluster per upstream, and
// endpoints for each.
func (e *xdsBenchEnvoys) complete(listeners map[string]bool, clusters map[string]string, endpoints map[string]int) bool {
	if len(listeners) < 1+xdsBenchUpstreams || len(clusters) < xdsBenchUpstreams {
		return false
	}
	for _, eds := range clusters {
		if endpoints[eds] == 0 {
			return false
		}
	}
	return true
}
