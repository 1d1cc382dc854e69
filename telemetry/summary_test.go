package telemetry

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSummarize(t *testing.T) {
	reg := prometheus.NewRegistry()
	apply := prometheus.NewCounter(prometheus.CounterOpts{Name: PromName("consul.raft.apply"), Help: "h"})
	apply.Add(4)
	lastIndex := prometheus.NewGauge(prometheus.GaugeOpts{Name: PromName("consul.raft.last_index"), Help: "h"})
	lastIndex.Set(42)
	labelled := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "consul_serf_queue_Event", Help: "h"}, []string{"dc"})
	labelled.WithLabelValues("dc1").Set(2)
	// A summary's quantiles depend on when it is read; a constant one's do not.
	kvs := constCollector{prometheus.MustNewConstSummary(
		prometheus.NewDesc(PromName("consul.kvs.apply"), "h", nil, nil), 4, 12, map[float64]float64{0.5: 2, 0.9: 6, 0.99: 6})}
	idle := NewTimer("consul.catalog.register", "h")
	reg.MustRegister(apply, lastIndex, labelled, kvs, idle)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := Summarize(families, time.Date(2026, 1, 2, 3, 4, 56, 0, time.UTC))

	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"timestamp", got.Timestamp, "2026-01-02 03:04:50 +0000 UTC"},
		{"gauges", got.Gauges, []GaugeValue{
			{Name: "consul.raft.last_index", Value: 42, Labels: map[string]string{}},
			{Name: "consul.serf.queue.Event", Value: 2, Labels: map[string]string{"dc": "dc1"}},
		}},
		{"points", got.Points, []PointValue{}},
		{"counters", got.Counters, []SampledValue{
			{Name: "consul.raft.apply", Count: 4, Rate: 0.4, Sum: 4, Min: 1, Max: 1, Mean: 1, Labels: map[string]string{}},
		}},
		{"samples", got.Samples, []SampledValue{
			{Name: "consul.catalog.register", Labels: map[string]string{}},
			{Name: "consul.kvs.apply", Count: 4, Rate: 1.2, Sum: 12, Min: 2, Max: 6, Mean: 3, Labels: map[string]string{}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("got %+v\nwant %+v", tc.got, tc.want)
			}
		})
	}

	// The field names clients decode, Consul's.
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var shape map[string]json.RawMessage
	if err := json.Unmarshal(b, &shape); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Timestamp", "Gauges", "Points", "Counters", "Samples"} {
		if _, ok := shape[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	var counters []map[string]any
	if err := json.Unmarshal(shape["Counters"], &counters); err != nil || len(counters) != 1 {
		t.Fatalf("counters %s: %v", shape["Counters"], err)
	}
	for _, k := range []string{"Name", "Count", "Rate", "Sum", "Min", "Max", "Mean", "Stddev", "Labels"} {
		if _, ok := counters[0][k]; !ok {
			t.Errorf("counter lacks %q: %v", k, counters[0])
		}
	}
}

// constCollector serves one fixed metric.
type constCollector struct{ m prometheus.Metric }

func (c constCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.m.Desc() }
func (c constCollector) Collect(ch chan<- prometheus.Metric) { ch <- c.m }

func TestNames(t *testing.T) {
	for _, tc := range []struct{ dotted, prom, back string }{
		{"consul.raft.commitTime", "consul_raft_commitTime", "consul.raft.commitTime"},
		{"consul.raft.last_index", "consul_raft_last_index", "consul.raft.last_index"},
		// Not in the table: every underscore reads as a dot.
		{"consul.raft.replication.appendEntries.rpc.s-1", "consul_raft_replication_appendEntries_rpc_s_1", "consul.raft.replication.appendEntries.rpc.s.1"},
	} {
		if got := PromName(tc.dotted); got != tc.prom {
			t.Errorf("PromName(%q) = %q, want %q", tc.dotted, got, tc.prom)
		}
		if got := newDottedNames().dotted(tc.prom); got != tc.back {
			t.Errorf("dotted(%q) = %q, want %q", tc.prom, got, tc.back)
		}
	}
}
