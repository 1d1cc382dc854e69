package telemetry

import (
	"cmp"
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Summary is Consul's JSON metrics summary (GET /v1/agent/metrics).
type Summary struct {
	Timestamp string
	Gauges    []GaugeValue
	Points    []PointValue
	Counters  []SampledValue
	Samples   []SampledValue
}

// GaugeValue is one gauge of the summary.
type GaugeValue struct {
	Name   string
	Value  float64
	Labels map[string]string
}

// PointValue is one point of the summary; Trellis emits none, as Consul's
// agents in practice.
type PointValue struct {
	Name   string
	Points []float64
}

// SampledValue is one counter or timer of the summary, with Consul's
// aggregate fields.
type SampledValue struct {
	Name   string
	Count  int
	Rate   float64
	Sum    float64
	Min    float64
	Max    float64
	Mean   float64
	Stddev float64
	Labels map[string]string
}

// Summarize converts gathered families into Consul's JSON shape. Consul's
// in-memory sink aggregates over a 10 s interval; a Prometheus registry is
// cumulative, so here a counter's Count and Sum are its total since start
// (Mean 1 per increment, Rate the total over the 10 s interval Consul
// reports), and a timer's Count, Sum and Mean are its totals with Min and
// Max its lowest and highest quantiles of the last 10 s. known are dotted
// names beyond Definitions (such as RuntimeGaugeNames) whose Prometheus
// form is to be read back to them.
func Summarize(families []*dto.MetricFamily, now time.Time, known ...string) Summary {
	names := newDottedNames()
	for _, n := range known {
		names[PromName(n)] = n
	}
	out := Summary{
		Timestamp: now.UTC().Truncate(10 * time.Second).Format("2006-01-02 15:04:05 -0700 MST"),
		Gauges:    []GaugeValue{}, Points: []PointValue{}, Counters: []SampledValue{}, Samples: []SampledValue{},
	}
	for _, f := range families {
		name := names.dotted(f.GetName())
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				out.Gauges = append(out.Gauges, GaugeValue{Name: name, Value: finite(m.GetGauge().GetValue()), Labels: labels})
			case dto.MetricType_COUNTER:
				out.Counters = append(out.Counters, counterValue(name, m.GetCounter().GetValue(), labels))
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				var qs []float64
				for _, q := range s.GetQuantile() {
					if v := q.GetValue(); !math.IsNaN(v) {
						qs = append(qs, v)
					}
				}
				out.Samples = append(out.Samples, sampleValue(name, s.GetSampleCount(), s.GetSampleSum(), qs, labels))
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out.Samples = append(out.Samples, sampleValue(name, h.GetSampleCount(), h.GetSampleSum(), nil, labels))
			}
		}
	}
	byName := func(a, b string) int { return cmp.Compare(a, b) }
	slices.SortStableFunc(out.Gauges, func(a, b GaugeValue) int { return byName(a.Name, b.Name) })
	slices.SortStableFunc(out.Counters, func(a, b SampledValue) int { return byName(a.Name, b.Name) })
	slices.SortStableFunc(out.Samples, func(a, b SampledValue) int { return byName(a.Name, b.Name) })
	return out
}

func counterValue(name string, total float64, labels map[string]string) SampledValue {
	total = finite(total)
	v := SampledValue{Name: name, Count: int(math.Round(total)), Sum: total, Rate: total / 10, Labels: labels}
	if v.Count > 0 {
		v.Min, v.Max, v.Mean = 1, 1, total/float64(v.Count)
	}
	return v
}

func sampleValue(name string, count uint64, sum float64, quantiles []float64, labels map[string]string) SampledValue {
	sum = finite(sum)
	v := SampledValue{Name: name, Count: int(min(count, math.MaxInt)), Sum: sum, Rate: sum / 10, Labels: labels}
	if count > 0 {
		v.Mean = sum / float64(count)
		v.Min, v.Max = v.Mean, v.Mean
	}
	if len(quantiles) > 0 {
		v.Min, v.Max = slices.Min(quantiles), slices.Max(quantiles)
	}
	return v
}

// finite keeps NaN and infinities, which encoding/json refuses, out of
// the summary.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}
