package agent

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSidecarMemory measures what N local sidecars cost an agent
// once each has its first snapshot, before any Envoy connects (issue 17,
// RSS at 5,000 sidecars): live heap, goroutine stacks and goroutines, per
// sidecar and in total. The goroutines are what a blocking read, a timer
// or a renewal costs when each holds one: at 5,000 sidecars a goroutine
// per sidecar is 5,000 stacks.
//
//	go test ./agent -run '^$' -bench 'SidecarMemory/sidecars=5000$' -benchtime 1x
//
// Set-up is that of BenchmarkXDSEndpointChange without the Envoys: an
// in-process -dev agent with the CSR limit lifted, 5 upstream services, N
// client services each with a sidecar listing all 5 and a TTL check,
// registered in local state and settled (anti-entropy done, every proxy's
// snapshot delivered). The iterations do nothing: the figures are of the
// set-up.
func BenchmarkSidecarMemory(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("sidecars=%d", n), func(b *testing.B) {
			env := &xdsBenchEnv{n: n}
			defer env.close()
			env.agent, env.client, env.http, _ = startXDSBenchAgent(b)
			env.liftCSRLimit(b)
			for k := range xdsBenchUpstreams {
				env.registerUpstream(b, k, fmt.Sprintf("up-node-%d", k), fmt.Sprintf("10.0.0.%d", k+1))
			}
			base := readMem()
			start := time.Now()
			env.registerClients(b)
			env.settle(b)
			b.Logf("sidecars=%d: registered and settled in %v", n, time.Since(start).Round(time.Millisecond))
			m := readMem()
			for b.Loop() {
			}
			b.ReportMetric((m.heap-base.heap)/float64(n)/1024, "heap-KB/sidecar")
			b.ReportMetric((m.stack-base.stack)/float64(n)/1024, "stack-KB/sidecar")
			b.ReportMetric((m.goroutines-base.goroutines)/float64(n), "goroutines/sidecar")
			b.ReportMetric(m.goroutines, "goroutines")
			b.ReportMetric((m.heap+m.stack)/(1<<20), "heap+stack-MB")
		})
	}
}
