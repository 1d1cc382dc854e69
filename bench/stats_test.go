package bench

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		ds := make([]time.Duration, len(vs))
		for i, v := range vs {
			ds[i] = time.Duration(v) * time.Millisecond
		}
		return ds
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one sample is every quantile", ms(7), 0.99, 7 * time.Millisecond},
		{"p0 is the minimum", ms(1, 2, 3), 0, 1 * time.Millisecond},
		{"p50 of two is the first", ms(1, 2), 0.5, 1 * time.Millisecond},
		{"p50 of three is the middle", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p90 of 100 is the 90th", ms(hundred...), 0.9, 90 * time.Millisecond},
		{"p99 of 10 is the maximum", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{"p100 is the maximum", ms(1, 2, 3), 1, 3 * time.Millisecond},
		{"negative delays", ms(-3, -1, 2), 0.5, -1 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", tt.sorted, tt.q, got, tt.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	got := Summarize(ds)
	want := Summary{N: 5, P50: 3, P90: 5, P99: 5, Max: 5}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if !slices.IsSorted(ds) {
		t.Errorf("Summarize left %v unsorted", ds)
	}
	if got := Summarize(nil); got != (Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", got)
	}
}

// TestHist: the histogram's quantiles are Percentile's to within a
// bucket, from above, and its maximum is exact.
func TestHist(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 1000, 30000} {
		h := NewHist()
		ds := make([]time.Duration, n)
		for i := range ds {
			ds[i] = time.Duration(rng.Int64N(int64(200*time.Millisecond))) - 5*time.Millisecond
			h.Add(ds[i])
		}
		slices.Sort(ds)
		for _, q := range []float64{0, 0.5, 0.9, 0.99, 1} {
			want := Percentile(ds, q)
			if got := h.Quantile(q); got < want || got-want > HistStep {
				t.Errorf("n=%d: Quantile(%v) = %v, Percentile says %v", n, q, got, want)
			}
		}
		if h.Max() != ds[n-1] || h.N() != n {
			t.Errorf("n=%d: max %v over %d, want %v over %d", n, h.Max(), h.N(), ds[n-1], n)
		}
	}
	if h := NewHist(); h.Quantile(0.5) != 0 || h.Max() != 0 {
		t.Errorf("empty histogram: quantile %v, max %v, want 0", h.Quantile(0.5), h.Max())
	}
}
