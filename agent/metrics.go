package agent

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/trellis-mesh/trellis/telemetry"
)

// newRegistry is the agent's one metrics registry: every component
// registers its instruments here, and /v1/agent/metrics serves it. The
// raft and serf libraries' go-metrics join it at Start
// (telemetry.InstallSink).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metricsHandler serves /v1/agent/metrics as Consul does: Prometheus text
// with ?format=prometheus, otherwise Consul's JSON summary, gathered from
// the same registry.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	prom := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") == "prometheus" {
			prom.ServeHTTP(w, r)
			return
		}
		families, err := reg.Gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(telemetry.Summarize(families, time.Now()))
	})
}
