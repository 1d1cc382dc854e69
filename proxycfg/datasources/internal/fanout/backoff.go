package fanout

import (
	"context"
	"math/rand/v2"
	"time"
)

// Default retry bounds of the data sources.
const (
	DefaultRetryMin = 500 * time.Millisecond
	DefaultRetryMax = 30 * time.Second
)

// Backoff is a jittered exponential backoff between Min and Max (zero
// values take the defaults above). The zero value is ready to use.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration
}

// Next returns the next wait: Min at first, doubling up to Max, each
// spread over [d/2, d) so that queries failing together retry apart.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultRetryMin
	}
	if hi < lo {
		hi = max(DefaultRetryMax, lo)
	}
	if b.cur == 0 {
		b.cur = lo
	} else {
		b.cur = min(2*b.cur, hi)
	}
	return b.cur/2 + rand.N(b.cur/2+1) //nolint:gosec // jitter to spread timers, not a secret
}

// Reset starts over from Min after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// Static is a runner that publishes one value and then waits for ctx:
// for data that does not change while the agent runs.
func Static(v any) Runner {
	return func(ctx context.Context, out Sink) {
		out.Result(v)
		<-ctx.Done()
	}
}
