package telemetry

import (
	"fmt"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// InstallSink registers a go-metrics Prometheus sink on reg and makes it
// go-metrics' global, where hashicorp/raft and serf send their metrics
// under the service name "consul". The global is the libraries' and is
// process-wide: the last agent started in a process receives them, which
// is every agent in production (one per process).
func InstallSink(reg prometheus.Registerer) error {
	opts := gmprom.PrometheusOpts{Registerer: reg, Name: "trellis_gometrics_sink"}
	for _, d := range Definitions() {
		if !d.Library {
			continue
		}
		name := []string{d.Name}
		switch d.Kind {
		case Counter:
			opts.CounterDefinitions = append(opts.CounterDefinitions, gmprom.CounterDefinition{Name: name, Help: d.Help})
		case Timer:
			opts.SummaryDefinitions = append(opts.SummaryDefinitions, gmprom.SummaryDefinition{Name: name, Help: d.Help})
		case Gauge:
			opts.GaugeDefinitions = append(opts.GaugeDefinitions, gmprom.GaugeDefinition{Name: name, Help: d.Help})
		}
	}
	sink, err := gmprom.NewPrometheusSinkFrom(opts)
	if err != nil {
		return fmt.Errorf("telemetry: prometheus sink: %w", err)
	}
	conf := gometrics.DefaultConfig("consul")
	// As Consul's defaults: no hostname in names; runtime metrics are the
	// registry's Go collector's job, and would start an unowned goroutine.
	conf.EnableHostname = false
	conf.EnableRuntimeMetrics = false
	if _, err := gometrics.NewGlobal(conf, sink); err != nil {
		return fmt.Errorf("telemetry: go-metrics global: %w", err)
	}
	return nil
}

// NewTimer returns a summary of durations in milliseconds under Consul's
// dotted name, with the quantiles and window go-metrics' sink gives the
// library timers, so that both kinds read the same.
func NewTimer(name, help string) prometheus.Summary {
	return prometheus.NewSummary(prometheus.SummaryOpts{
		Name:       PromName(name),
		Help:       help,
		Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		MaxAge:     10 * time.Second,
	})
}

// ObserveSince records the time since start on t, in milliseconds.
func ObserveSince(t prometheus.Observer, start time.Time) {
	t.Observe(float64(time.Since(start)) / float64(time.Millisecond))
}
