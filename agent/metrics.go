package agent

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
)

// newRegistry is the agent's one metrics registry: every component
// registers its instruments here, and /v1/agent/metrics serves it.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metricsHandler serves /v1/agent/metrics as Consul does: Prometheus text
// with ?format=prometheus, otherwise Consul's JSON summary of gauges and
// counters.
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
		_ = json.NewEncoder(w).Encode(summarize(families, time.Now()))
	})
}

type metricValue struct {
	Name   string
	Value  float64
	Labels map[string]string
}

type metricsSummary struct {
	Timestamp string
	Gauges    []metricValue
	Points    []struct{}
	Counters  []metricValue
	Samples   []metricValue
}

func summarize(families []*dto.MetricFamily, now time.Time) metricsSummary {
	out := metricsSummary{
		Timestamp: now.UTC().Truncate(10 * time.Second).Format("2006-01-02 15:04:05 -0700 MST"),
		Gauges:    []metricValue{}, Points: []struct{}{}, Counters: []metricValue{}, Samples: []metricValue{},
	}
	for _, f := range families {
		name := strings.ReplaceAll(f.GetName(), "_", ".")
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				out.Gauges = append(out.Gauges, metricValue{Name: name, Value: m.GetGauge().GetValue(), Labels: labels})
			case dto.MetricType_COUNTER:
				out.Counters = append(out.Counters, metricValue{Name: name, Value: m.GetCounter().GetValue(), Labels: labels})
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				mean := 0.0
				if h.GetSampleCount() > 0 {
					mean = h.GetSampleSum() / float64(h.GetSampleCount())
				}
				out.Samples = append(out.Samples, metricValue{Name: name, Value: mean, Labels: labels})
			}
		}
	}
	sort.Slice(out.Gauges, func(i, j int) bool { return out.Gauges[i].Name < out.Gauges[j].Name })
	sort.Slice(out.Counters, func(i, j int) bool { return out.Counters[i].Name < out.Counters[j].Name })
	return out
}
