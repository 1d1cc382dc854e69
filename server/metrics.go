package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's own instruments, registered on the agent's
// registry (Config.Metrics) so that /v1/agent/metrics shows them.
type metrics struct {
	rpcs     *prometheus.CounterVec
	apply    prometheus.Histogram
	isLeader prometheus.GaugeFunc
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	m := &metrics{
		rpcs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "trellis_rpc_requests_total",
			Help: "Internal RPC calls served or forwarded by this server, by method and outcome.",
		}, []string{"method", "result"}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "trellis_raft_apply_seconds",
			Help:    "Time from submitting a command to Raft until it is committed and applied.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		isLeader: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "trellis_server_is_leader",
			Help: "1 while this server is the Raft leader.",
		}, func() float64 {
			if s.raft != nil && s.IsLeader() {
				return 1
			}
			return 0
		}),
	}
	if reg != nil {
		reg.MustRegister(m.rpcs, m.apply, m.isLeader)
	}
	return m
}

func (m *metrics) observeRPC(method string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.rpcs.WithLabelValues(method, result).Inc()
}

func (m *metrics) observeApply(start time.Time) { m.apply.Observe(time.Since(start).Seconds()) }
