package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trellis-mesh/trellis/telemetry"
)

// metrics are the server's own instruments under Consul's names,
// registered on the agent's registry (Config.Metrics) so that
// /v1/agent/metrics shows them. Raft's own (consul.raft.apply,
// commitTime, leader.lastContact, state.*) come from the raft library
// through go-metrics (telemetry.InstallSink), not from here.
type metrics struct {
	rpcRequests  prometheus.Counter
	rpcErrors    prometheus.Counter
	kvsApply     prometheus.Summary
	catalogReg   prometheus.Summary
	lastIndex    prometheus.GaugeFunc
	appliedIndex prometheus.GaugeFunc
	isLeader     prometheus.GaugeFunc
	autopilot    autopilotHealthy
}

func newMetrics(reg prometheus.Registerer, s *Server) *metrics {
	counter := func(name string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: telemetry.PromName(name), Help: telemetry.Help(name)})
	}
	gauge := func(name string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: telemetry.PromName(name), Help: telemetry.Help(name)}, func() float64 {
			if s.raft == nil {
				return 0
			}
			return f()
		})
	}
	timer := func(name string) prometheus.Summary { return telemetry.NewTimer(name, telemetry.Help(name)) }
	m := &metrics{
		rpcRequests:  counter("consul.rpc.request"),
		rpcErrors:    counter("consul.rpc.request_error"),
		kvsApply:     timer("consul.kvs.apply"),
		catalogReg:   timer("consul.catalog.register"),
		lastIndex:    gauge("consul.raft.last_index", func() float64 { return float64(s.raft.LastIndex()) }),
		appliedIndex: gauge("consul.raft.applied_index", func() float64 { return float64(s.raft.AppliedIndex()) }),
		isLeader: gauge("consul.server.isLeader", func() float64 {
			if s.IsLeader() {
				return 1
			}
			return 0
		}),
		autopilot: autopilotHealthy{s: s, desc: prometheus.NewDesc(telemetry.PromName("consul.autopilot.healthy"), telemetry.Help("consul.autopilot.healthy"), nil, nil)},
	}
	if reg != nil {
		reg.MustRegister(m.rpcRequests, m.rpcErrors, m.kvsApply, m.catalogReg, m.lastIndex, m.appliedIndex, m.isLeader, m.autopilot)
	}
	return m
}

func (m *metrics) observeRPC(err error) {
	m.rpcRequests.Inc()
	if err != nil {
		m.rpcErrors.Inc()
	}
}

// autopilotHealthy reports consul.autopilot.healthy only while this server
// leads and has a view, as Consul's leader alone emits it: a follower's 0
// would read as an unhealthy cluster.
type autopilotHealthy struct {
	s    *Server
	desc *prometheus.Desc
}

func (a autopilotHealthy) Describe(ch chan<- *prometheus.Desc) { ch <- a.desc }

func (a autopilotHealthy) Collect(ch chan<- prometheus.Metric) {
	h := a.s.health.latest()
	if h == nil {
		return
	}
	v := 0.0
	if h.Healthy {
		v = 1
	}
	ch <- prometheus.MustNewConstMetric(a.desc, prometheus.GaugeValue, v)
}

// since is telemetry.ObserveSince for a deferred call: the start is taken
// when the defer statement runs.
func since(o prometheus.Observer, start time.Time) { telemetry.ObserveSince(o, start) }
