package telemetry

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRuntimeGauges: the runtime gauges carry Consul's names, the host
// name included (read back whole even when it has dashes or dots, which
// the Prometheus form turns into underscores), and sensible values.
func TestRuntimeGauges(t *testing.T) {
	for _, host := range []string{"build-host.example", ""} {
		t.Run("host="+host, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewRuntimeCollector(host))
			families, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			sum := Summarize(families, time.Now(), RuntimeGaugeNames(host)...)
			got := map[string]float64{}
			for _, g := range sum.Gauges {
				got[g.Name] = g.Value
			}
			prefix := "consul.runtime."
			if host != "" {
				prefix = "consul." + host + ".runtime."
			}
			for _, name := range []string{"num_goroutines", "alloc_bytes", "sys_bytes", "malloc_count", "free_count", "heap_objects", "total_gc_pause_ns", "total_gc_runs"} {
				v, ok := got[prefix+name]
				if !ok {
					t.Errorf("%s%s missing from %v", prefix, name, got)
					continue
				}
				if name != "total_gc_pause_ns" && name != "total_gc_runs" && name != "free_count" && v <= 0 {
					t.Errorf("%s%s = %v, want > 0", prefix, name, v)
				}
			}
		})
	}
}
