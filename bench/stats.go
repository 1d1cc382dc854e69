package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile is the nearest-rank q-quantile (0 <= q <= 1) of sorted: the
// smallest sample at or below which at least a fraction q of the samples
// lie, so p99 of 100 samples is the 99th smallest and p50 of 2 is the
// first. It is 0 for no samples.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[rank(q, len(sorted))]
}

// rank is the 0-based index of the nearest-rank q-quantile of n samples.
func rank(q float64, n int) int {
	r := int(math.Ceil(q*float64(n))) - 1
	return min(max(r, 0), n-1)
}

// Summary is the distribution of a set of latencies.
type Summary struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

// Summarize sorts ds in place and summarizes it.
func Summarize(ds []time.Duration) Summary {
	slices.Sort(ds)
	s := Summary{N: len(ds), P50: Percentile(ds, 0.5), P90: Percentile(ds, 0.9), P99: Percentile(ds, 0.99)}
	if len(ds) > 0 {
		s.Max = ds[len(ds)-1]
	}
	return s
}

// Hist counts delays in HistStep buckets from HistMin to HistMax (a delay
// can be negative: a proxy may get a change before the write's answer
// reaches the tool); delays beyond count in the end buckets. Its memory
// does not grow with the number of samples, which matters when the
// process that records them is the one being measured.
type Hist struct {
	counts []uint32
	n      int
	max    time.Duration
}

// The range and resolution of a Hist.
const (
	HistMin  = -time.Second
	HistMax  = 10 * time.Second
	HistStep = 100 * time.Microsecond
)

// NewHist returns an empty histogram.
func NewHist() *Hist {
	return &Hist{counts: make([]uint32, (HistMax-HistMin)/HistStep), max: math.MinInt64}
}

// Add records one delay.
func (h *Hist) Add(d time.Duration) {
	i := int((d - HistMin) / HistStep)
	i = min(max(i, 0), len(h.counts)-1)
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

// N is the number of delays recorded.
func (h *Hist) N() int { return h.n }

// Max is the largest delay recorded (exact, not bucketed).
func (h *Hist) Max() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.max
}

// Quantile is Percentile of the recorded delays to within one bucket,
// from above: the upper edge of the bucket holding the nearest-rank
// sample, but never more than the largest delay.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	r := rank(q, h.n)
	seen := 0
	for i, c := range h.counts {
		seen += int(c)
		if seen > r {
			return min(HistMin+time.Duration(i+1)*HistStep, h.max)
		}
	}
	return h.max
}
