// Package wait holds the two timing helpers the agent's loops share: a
// sleep that ends with its context, and the random stagger that spreads
// many agents' (or many services') timers apart.
package wait

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits for d or until ctx is done, reporting whether the full wait
// elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Jitter is a uniformly random duration in [0, d); 0 when d is not
// positive.
func Jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d) //nolint:gosec // spreads timers, not a secret
}
