package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/trellis-mesh/trellis/agent/hostinfo"
	"github.com/trellis-mesh/trellis/telemetry"
)

// newRegistry is the agent's one metrics registry: every component
// registers its instruments here, and /v1/agent/metrics serves it. The
// raft and serf libraries' go-metrics join it at Start
// (telemetry.InstallSink). Besides client_golang's Go and process
// collectors it holds Consul's own runtime gauges, named with the host
// name as Consul's are by default.
func newRegistry(hostname string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		telemetry.NewRuntimeCollector(hostname))
	return reg
}

// hostInfo serves /v1/agent/host from this machine.
type hostInfo struct{}

func (hostInfo) HostInfo(ctx context.Context) any { return hostinfo.Collect(ctx) }

// metricsHostname is the host name in Consul's gauge names: the OS's, as
// go-metrics takes it; none when the OS cannot say.
func metricsHostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// metricsHandler serves /v1/agent/metrics as Consul does: Prometheus text
// with ?format=prometheus, otherwise Consul's JSON summary, gathered from
// the same registry.
func metricsHandler(reg *prometheus.Registry, hostname string) http.Handler {
	known := telemetry.RuntimeGaugeNames(hostname)
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
		_ = json.NewEncoder(w).Encode(telemetry.Summarize(families, time.Now(), known...))
	})
}
