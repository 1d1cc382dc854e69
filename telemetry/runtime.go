package telemetry

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// runtimeGauge is one Go runtime gauge, read from a runtime.MemStats.
type runtimeGauge struct {
	name string
	help string
	read func(*runtime.MemStats) float64
}

// runtimeGauges are the Go runtime gauges Consul's agents report through
// go-metrics' runtime statistics, in its order.
func runtimeGauges() []runtimeGauge {
	return []runtimeGauge{
		{"num_goroutines", "Goroutines running.", func(*runtime.MemStats) float64 { return float64(runtime.NumGoroutine()) }},
		{"alloc_bytes", "Bytes of allocated heap objects.", func(m *runtime.MemStats) float64 { return float64(m.Alloc) }},
		{"sys_bytes", "Bytes of memory obtained from the OS.", func(m *runtime.MemStats) float64 { return float64(m.Sys) }},
		{"malloc_count", "Heap objects allocated since start.", func(m *runtime.MemStats) float64 { return float64(m.Mallocs) }},
		{"free_count", "Heap objects freed since start.", func(m *runtime.MemStats) float64 { return float64(m.Frees) }},
		{"heap_objects", "Allocated heap objects.", func(m *runtime.MemStats) float64 { return float64(m.HeapObjects) }},
		{"total_gc_pause_ns", "Nanoseconds of GC stop-the-world pauses since start.", func(m *runtime.MemStats) float64 { return float64(m.PauseTotalNs) }},
		{"total_gc_runs", "Completed GC cycles since start.", func(m *runtime.MemStats) float64 { return float64(m.NumGC) }},
	}
}

// RuntimeGaugeNames are the dotted names NewRuntimeCollector(hostname)
// reports under, for Summarize: "consul.<hostname>.runtime.alloc_bytes".
func RuntimeGaugeNames(hostname string) []string {
	gauges := runtimeGauges()
	names := make([]string, len(gauges))
	for i, g := range gauges {
		names[i] = runtimeGaugeName(hostname, g.name)
	}
	return names
}

// runtimeGaugeName is Consul's name of a runtime gauge: go-metrics puts
// the host name into gauge names unless telemetry.disable_hostname is
// set, which Consul leaves off by default.
func runtimeGaugeName(hostname, gauge string) string {
	if hostname == "" {
		return "consul.runtime." + gauge
	}
	return "consul." + hostname + ".runtime." + gauge
}

// runtimeCollector reads the runtime gauges at each gather, so that they
// need no goroutine of their own (go-metrics samples them every second
// from one).
type runtimeCollector struct {
	gauges []runtimeGauge
	descs  []*prometheus.Desc
}

// NewRuntimeCollector returns a collector of Consul's Go runtime gauges
// (consul.<hostname>.runtime.num_goroutines, alloc_bytes, sys_bytes,
// malloc_count, free_count, heap_objects, total_gc_pause_ns,
// total_gc_runs); an empty hostname leaves it out of the names.
func NewRuntimeCollector(hostname string) prometheus.Collector {
	c := &runtimeCollector{gauges: runtimeGauges()}
	for _, g := range c.gauges {
		c.descs = append(c.descs, prometheus.NewDesc(PromName(runtimeGaugeName(hostname, g.name)), g.help, nil, nil))
	}
	return c
}

func (c *runtimeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *runtimeCollector) Collect(ch chan<- prometheus.Metric) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	for i, g := range c.gauges {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, g.read(&m))
	}
}
