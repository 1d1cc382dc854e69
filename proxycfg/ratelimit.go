package proxycfg

import (
	"math"
	"sync"
	"time"
)

// tokenBucket is the manager-wide limit on snapshot deliveries. A state
// machine reserves a token and learns how long to wait for it, instead of
// blocking: its goroutine must keep handling events meanwhile. Tokens may
// go negative (reserved in advance), which queues reservations fairly in
// arrival order.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

func newTokenBucket(perSecond float64, burst int, now func() time.Time) *tokenBucket {
	b := float64(burst)
	if burst <= 0 {
		b = math.Max(1, perSecond)
	}
	return &tokenBucket{rate: perSecond, burst: b, tokens: b, last: now(), now: now}
}

// reserve takes one token and returns how long the caller must wait
// before using it (0: at once).
func (b *tokenBucket) reserve() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// unreserve gives back a token reserved but not used (a state stopped
// while waiting for it).
func (b *tokenBucket) unreserve() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refillLocked()
	b.tokens = math.Min(b.burst, b.tokens+1)
}

func (b *tokenBucket) refillLocked() {
	now := b.now()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = math.Min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
}
