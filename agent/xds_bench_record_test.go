package agent

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime/metrics"
	"slices"
	"testing"
	"time"
)

// changeLog writes the per-change lines of xdsBenchChangesEnv; a nil
// changeLog records nothing.
type changeLog struct {
	f      *os.File
	w      *bufio.Writer
	sample []metrics.Sample
	gc0    uint64
	sorted []time.Duration
}

func newChangeLog(b *testing.B, path string) *changeLog {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	l := &changeLog{f: f, w: bufio.NewWriter(f), sample: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}}
	_, _ = fmt.Fprintln(l.w, "# seq gcs p50-ms p99-ms max-ms")
	return l
}

// start marks the start of a change.
func (l *changeLog) start() {
	if l != nil {
		l.gc0 = l.cycles()
	}
}

// gcs is the number of GC cycles completed since start.
func (l *changeLog) gcs() uint64 {
	if l == nil {
		return 0
	}
	return l.cycles() - l.gc0
}

func (l *changeLog) cycles() uint64 {
	metrics.Read(l.sample)
	return l.sample[0].Value.Uint64()
}

// record writes the line of change seq, whose delays are ds.
func (l *changeLog) record(seq int, gcs uint64, ds []time.Duration) {
	if l == nil {
		return
	}
	l.sorted = append(l.sorted[:0], ds...)
	slices.Sort(l.sorted)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	_, _ = fmt.Fprintf(l.w, "%d %d %.1f %.1f %.1f\n", seq, gcs, ms(l.sorted[len(l.sorted)/2]), ms(l.sorted[len(l.sorted)*99/100]), ms(l.sorted[len(l.sorted)-1]))
}

func (l *changeLog) close(b *testing.B) {
	if err := l.w.Flush(); err != nil {
		b.Error(err)
	}
	if err := l.f.Close(); err != nil {
		b.Error(err)
	}
}

// delayHist counts delays in 0.1 ms buckets from -1 s to 10 s (a delay
// can be negative: a stream may get the change before the write's answer
// reaches the benchmark); delays beyond count in the end buckets. Its
// memory does not grow with the number of samples.
type delayHist struct {
	counts []uint32
	n      int
	max    time.Duration
}

const (
	delayHistMin  = -time.Second
	delayHistMax  = 10 * time.Second
	delayHistStep = 100 * time.Microsecond
)

func newDelayHist() *delayHist {
	return &delayHist{counts: make([]uint32, (delayHistMax-delayHistMin)/delayHistStep), max: math.MinInt64}
}

func (h *delayHist) add(d time.Duration) {
	i := int((d - delayHistMin) / delayHistStep)
	i = min(max(i, 0), len(h.counts)-1)
	h.counts[i]++
	h.n++
	h.max = max(h.max, d)
}

// quantile is the delay below which a fraction q of the samples lie, as
// the sorted samples' element q*n would be: the upper edge of its bucket
// (at most the largest delay).
func (h *delayHist) quantile(q float64) time.Duration {
	rank := int(q * float64(h.n))
	seen := 0
	for i, c := range h.counts {
		seen += int(c)
		if seen > rank {
			return min(delayHistMin+time.Duration(i+1)*delayHistStep, h.max)
		}
	}
	return h.max
}

// TestDelayHist: the histogram's quantiles are the sorted samples' to
// within a bucket, from below, and its maximum is exact.
func TestDelayHist(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 7, 1000, 30000} {
		h := newDelayHist()
		ds := make([]time.Duration, n)
		for i := range ds {
			ds[i] = time.Duration(rng.Int64N(int64(200*time.Millisecond))) - 5*time.Millisecond
			h.add(ds[i])
		}
		slices.Sort(ds)
		for _, q := range []float64{0, 0.5, 0.99} {
			want := ds[int(q*float64(n))]
			if got := h.quantile(q); got < want || got-want > delayHistStep {
				t.Errorf("n=%d: quantile(%v) = %v, sorted samples say %v", n, q, got, want)
			}
		}
		if h.max != ds[n-1] {
			t.Errorf("n=%d: max %v, want %v", n, h.max, ds[n-1])
		}
	}
}
