package proxycfg

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// The benchmarks run real state machines over fake sources that behave
// like the deduplicating client source: one shared, read-only result per
// distinct question, fanned out to every subscriber.
//
//	go test -run '^$' -bench . -benchmem ./proxycfg/
//	go test -run '^$' -bench MemoryPerProxy -benchtime 3x ./proxycfg/

const (
	fleetUpstreams = 5  // upstreams per proxy
	upstreamPool   = 50 // distinct upstream services in the fleet
)

// sharedResults caches one result per question, as a deduplicating
// source would.
type sharedResults struct {
	chains sync.Map // service -> *structs.DiscoveryChainResponse
	nodes  sync.Map // service -> *structs.IndexedCheckServiceNodes
}

func (r *sharedResults) chain(name string) any {
	v, _ := r.chains.LoadOrStore(name, testChain(name, target{service: name, dc: "dc1"}))
	return v
}

func (r *sharedResults) health(name string) any {
	v, _ := r.nodes.LoadOrStore(name, testNodes(name, "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	return v
}

// answerEverything makes the fakes answer every watch a sidecar makes.
func answerEverything(f *fakes, r *sharedResults) {
	f.autoBasics()
	f.chain.setRespond(func(q *structs.DiscoveryChainRequest) any { return r.chain(q.Name) })
	f.health.setRespond(func(q *structs.ServiceSpecificRequest) any { return r.health(q.ServiceName) })
}

// fleetProxy is proxy i of a fleet: five distinct upstreams from the
// pool, the first replaced by "hot" for the first hot proxies.
func fleetProxy(i, hot int) *structs.NodeService {
	ups := make([]structs.Upstream, 0, fleetUpstreams)
	for k := range fleetUpstreams {
		name := fmt.Sprintf("up-%d", (i+k)%upstreamPool)
		if k == 0 && i < hot {
			name = "hot"
		}
		ups = append(ups, structs.Upstream{DestinationName: name, LocalBindAddress: "127.0.0.1", LocalBindPort: 10000 + k})
	}
	svc := testSidecar(fmt.Sprintf("svc-%d", i), ups...)
	svc.Meta = map[string]string{"version": "v1"}
	svc.Tags = []string{"primary"}
	return svc
}

// complete accepts a snapshot whose upstreams all have their endpoints.
func complete(s *ConfigSnapshot) error {
	if len(s.ConnectProxy.Upstreams) != fleetUpstreams {
		return fmt.Errorf("%d upstreams", len(s.ConnectProxy.Upstreams))
	}
	for _, u := range s.ConnectProxy.Upstreams {
		if u.Chain == nil || len(u.Endpoints) != 1 {
			return fmt.Errorf("upstream %s incomplete", u.ID)
		}
	}
	return nil
}

// startFleet registers n proxies on m, watches each, and waits until every
// snapshot is complete.
func startFleet(b *testing.B, m *Manager, n, hot int) []<-chan *ConfigSnapshot {
	b.Helper()
	chans := make([]<-chan *ConfigSnapshot, n)
	for i := range n {
		svc := fleetProxy(i, hot)
		id := idFor(svc)
		if err := m.Register(id, svc, SourceLocal, "token-1", true); err != nil {
			b.Fatal(err)
		}
		chans[i], _ = m.Watch(id) // Close ends the watches
	}
	for _, ch := range chans {
		waitSnap(b, ch, complete)
	}
	return chans
}

// BenchmarkUpstreamEndpointChange measures one change of an upstream's
// endpoints with 1,000 proxies registered, of which `affected` have that
// upstream: the fan-out to the affected state machines, their snapshot
// builds and deliveries. Unaffected proxies must do nothing (checked via
// the manager's counters and reported as snapshots/op).
func BenchmarkUpstreamEndpointChange(b *testing.B) {
	const proxies = 1000
	for _, affected := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("proxies=%d/affected=%d", proxies, affected), func(b *testing.B) {
			h := newHarness(b, func(c *Config) { c.Coalesce = -1 })
			answerEverything(h.f, &sharedResults{})
			chans := startFleet(b, h.m, proxies, affected)
			time.Sleep(20 * time.Millisecond)
			for _, ch := range chans { // nothing pending
				select {
				case <-ch:
				default:
				}
			}
			hot := h.f.health.active(forService("hot"))
			if len(hot) != affected {
				b.Fatalf("%d hot watches, want %d", len(hot), affected)
			}
			results := []any{testNodes("hot", "10.1.0.1"), testNodes("hot", "10.1.0.1", "10.1.0.2")}
			before := h.m.Stats()

			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				r := results[i%2]
				for _, s := range hot {
					s.sendFast(r)
				}
				for _, ch := range chans[:affected] {
					<-ch
				}
			}
			b.StopTimer()

			after := h.m.Stats()
			snaps := float64(after.SnapshotsDelivered-before.SnapshotsDelivered) / float64(b.N)
			b.ReportMetric(snaps, "snapshots/op")
			if snaps != float64(affected) {
				b.Fatalf("%.1f snapshots per change, want %d (only affected proxies)", snaps, affected)
			}
		})
	}
}

// BenchmarkMemoryPerProxy measures the memory one registered sidecar with
// five upstreams costs once its snapshot is complete: its registration
// copy, state machine, watches (including the fake sources' per-watch
// records, standing in for a real source's subscriber entry), goroutine
// stack and current snapshot. Shared data-source results are excluded (a
// real source holds them once for all proxies).
func BenchmarkMemoryPerProxy(b *testing.B) {
	const n = 1000
	var heapPer, stackPer float64
	for range b.N {
		f := newFakes()
		shared := &sharedResults{}
		answerEverything(f, shared)
		for i := range upstreamPool { // shared results exist before the proxies
			shared.chain(fmt.Sprintf("up-%d", i))
			shared.health(fmt.Sprintf("up-%d", i))
		}
		m, err := New(Config{DataSources: f.dataSources(), Datacenter: "dc1", Coalesce: time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)

		startFleet(b, m, n, 0)
		f.wg.Wait()

		runtime.GC()
		runtime.ReadMemStats(&after)
		heapPer += float64(after.HeapAlloc-before.HeapAlloc) / n
		stackPer += float64(after.StackInuse-before.StackInuse) / n
		m.Close()
	}
	heapPer /= float64(b.N)
	stackPer /= float64(b.N)
	b.ReportMetric(heapPer, "heap-B/proxy")
	b.ReportMetric(stackPer, "stack-B/proxy")
	b.ReportMetric(heapPer+stackPer, "B/proxy")
	if heapPer+stackPer > 50*1024 {
		b.Errorf("%.0f bytes per proxy; the goal is under 50 KB", heapPer+stackPer)
	}
}
