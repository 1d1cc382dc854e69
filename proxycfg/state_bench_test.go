package proxycfg

import (
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// BenchmarkStateEndpointChange is the work of one proxy for one change
// of an upstream's endpoints, without the scheduling noise of
// BenchmarkUpstreamEndpointChange's thousand goroutines: handling the
// event, then building the snapshot. With results=shared, the proxy gets
// results other proxies got too (the first of them did the shared work);
// with results=distinct, every result is new to the manager, as when no
// other proxy asks the same question (another ACL token, say).
func BenchmarkStateEndpointChange(b *testing.B) {
	for _, shared := range []bool{true, false} {
		name := "results=shared"
		if !shared {
			name = "results=distinct"
		}
		b.Run(name, func(b *testing.B) {
			h := newHarness(b, func(c *Config) { c.Coalesce = -1 })
			answerEverything(h.f, &sharedResults{})
			s := readyState(b, h, fleetProxy(0, 1))
			hot := h.f.health.active(forService("hot"))
			if len(hot) != 1 {
				b.Fatalf("%d hot watches, want 1", len(hot))
			}
			results := make([]*structs.IndexedCheckServiceNodes, 1024)
			refill := func() {
				for i := range results {
					if shared && results[i] != nil {
						continue
					}
					results[i] = testNodes("hot", "10.1.0.1", "10.1.0.2")
				}
				if shared {
					for _, r := range results { // as if other proxies went first
						h.m.endpoints.single(target{service: "hot", dc: "dc1"}.id(), r)
						h.m.endpoints.single(target{service: "hot", dc: "dc1"}.id(), r)
					}
				}
			}
			refill()
			var snap *ConfigSnapshot
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if j := i % len(results); j == 0 && i > 0 && !shared {
					b.StopTimer()
					refill()
					b.StartTimer()
				}
				s.handleEvent(UpdateEvent{CorrelationID: hot[0].corr, Result: results[i%len(results)]})
				snap = s.build()
			}
			b.StopTimer()
			if err := complete(snap); err != nil {
				b.Fatal(err)
			}
		})
	}
}
