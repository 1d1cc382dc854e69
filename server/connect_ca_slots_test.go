package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestCSRSlots: at most limit holders at once, waiters served in arrival
// order, a waiter that gives up takes nothing, and a slot handed to one
// that gave up goes to the next.
func TestCSRSlots(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		callers int
	}{
		{"one slot", 1, 20},
		{"three slots", 3, 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				s         csrSlots
				wg        sync.WaitGroup
				held, top atomic.Int32
			)
			for range tc.callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if !s.acquire(context.Background(), tc.limit, 10*time.Second) {
						t.Error("no slot within the wait")
						return
					}
					n := held.Add(1)
					for {
						m := top.Load()
						if n <= m || top.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(time.Millisecond)
					held.Add(-1)
					s.release(tc.limit)
				}()
			}
			wg.Wait()
			if got := int(top.Load()); got < 1 || got > tc.limit {
				t.Fatalf("%d signings at once, limit %d", got, tc.limit)
			}
			if s.busy != 0 || len(s.queue) != 0 {
				t.Fatalf("left busy %d, queue %d", s.busy, len(s.queue))
			}
		})
	}

	t.Run("a waiter that gives up takes nothing", func(t *testing.T) {
		var s csrSlots
		if !s.acquire(context.Background(), 1, time.Second) {
			t.Fatal("first acquire")
		}
		if s.acquire(context.Background(), 1, 20*time.Millisecond) {
			t.Fatal("second acquire got the held slot")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if s.acquire(ctx, 1, time.Second) {
			t.Fatal("acquire with an ended ctx")
		}
		s.release(1)
		if !s.acquire(context.Background(), 1, 20*time.Millisecond) {
			t.Fatal("the released slot is not free")
		}
		s.release(1)
		if s.busy != 0 || len(s.queue) != 0 {
			t.Fatalf("left busy %d, queue %d", s.busy, len(s.queue))
		}
	})
}

// TestConnectCAConcurrencyLimit: with CSRMaxConcurrent set in the CA
// configuration the rate limit is ignored (as in Consul): a burst far
// beyond a rate of 0.01/s is signed, a few at a time.
func TestConnectCAConcurrencyLimit(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	roots := waitForCA(t, s)
	if err := setCAConfig(t, s, map[string]interface{}{"CSRMaxPerSecond": 0.01, "CSRMaxConcurrent": 2}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := signFor(t, s, roots.TrustDomain, "dc1", "web"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if errors.Is(err, structs.ErrRateLimited) {
			t.Fatalf("refused under a concurrency limit: %v", err)
		}
		t.Fatal(err)
	}
}
