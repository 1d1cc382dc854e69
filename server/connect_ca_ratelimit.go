package server

import (
	"context"
	"sync"
	"time"
)

// csrQueueWait bounds how far ahead a signing request may queue for its
// token before it is refused with ErrRateLimited: the queue holds
// CSRMaxPerSecond x csrQueueWait requests (250 at Consul's default of
// 50/s), served one by one, first come first served, at the rate. Consul
// refuses what the limit cannot serve within 500 ms, which turns a burst
// of sidecars registered together (a node starting, a deployment) into
// refusals and retries; queueing serves the same burst at the same rate,
// so the limit still bounds the leader's signing CPU, and the bound keeps
// a flood from piling up requests that their callers (30 s RPC timeout)
// would abandon.
const csrQueueWait = 5 * time.Second

// tokenBucket is a token bucket with a burst of one, as Consul's CSR
// limiter (a hard rate with no bursting). Reservations are handed out in
// arrival order, each one interval after the previous: a FIFO of waiters
// served at the rate. Its zero value is ready; the rate
// is given on every call so that a configuration change applies at once.
type tokenBucket struct {
	mu sync.Mutex
	// rate (tokens per second), tokens and last are guarded by mu. tokens
	// goes negative when callers are queued behind future tokens.
	rate   float64
	tokens float64
	last   time.Time
}

// reserve takes a token at now, returning how long the caller must wait
// for it, or false (taking nothing) when that is longer than maxWait.
func (b *tokenBucket) reserve(now time.Time, rate float64, maxWait time.Duration) (time.Duration, bool) {
	const burst = 1.0
	b.mu.Lock()
	defer b.mu.Unlock()
	if rate != b.rate || b.last.IsZero() {
		b.rate, b.tokens, b.last = rate, burst, now
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(burst, b.tokens+elapsed.Seconds()*rate)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0, true
	}
	wait := time.Duration(-b.tokens / rate * float64(time.Second))
	if wait > maxWait {
		b.tokens++
		return 0, false
	}
	return wait, true
}

// release gives back a token whose wait was abandoned.
func (b *tokenBucket) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(1, b.tokens+1)
}

// wait blocks until a token at rate per second is the caller's. It reports
// false when none comes within maxWait or ctx ends first.
func (b *tokenBucket) wait(ctx context.Context, rate float64, maxWait time.Duration) bool {
	d, ok := b.reserve(time.Now(), rate, maxWait)
	if !ok {
		return false
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		b.release()
		return false
	}
}

// csrSlots bounds the signings under way to csr_max_concurrent, as
// Consul's concurrency limiter: a signing takes a slot for as long as it
// runs. Waiters are served first come first served and give up after
// maxWait (then the caller answers ErrRateLimited, as for the rate). The
// zero value is ready; the limit is given on every call so that a
// configuration change applies at once.
type csrSlots struct {
	mu sync.Mutex
	// busy and queue are guarded by mu. A waiter's channel is closed when
	// a slot is handed to it (busy already counts it).
	busy  int
	queue []chan struct{}
}

// acquire takes a slot of limit, waiting up to maxWait behind earlier
// callers; false means none came in time or ctx ended first.
func (c *csrSlots) acquire(ctx context.Context, limit int, maxWait time.Duration) bool {
	c.mu.Lock()
	if c.busy < limit && len(c.queue) == 0 {
		c.busy++
		c.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	c.queue = append(c.queue, ch)
	c.mu.Unlock()
	t := time.NewTimer(maxWait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-ch:
		// Handed over while giving up: pass it on.
		c.releaseLocked(limit)
	default:
		for i, q := range c.queue {
			if q == ch {
				c.queue = append(c.queue[:i], c.queue[i+1:]...)
				break
			}
		}
	}
	return false
}

// release gives a slot back, handing it to the first waiter.
func (c *csrSlots) release(limit int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked(limit)
}

func (c *csrSlots) releaseLocked(limit int) {
	c.busy--
	for c.busy < max(limit, 1) && len(c.queue) > 0 {
		ch := c.queue[0]
		c.queue = c.queue[1:]
		c.busy++
		close(ch)
	}
}
