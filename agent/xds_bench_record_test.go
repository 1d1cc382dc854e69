package agent

import (
	"bufio"
	"fmt"
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
