package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// ackLog records the writes a server acknowledged (200 `true`): those, and
// only those, must survive whatever the scenario does to the cluster.
type ackLog struct {
	mu    sync.Mutex
	acked map[string]string
	last  time.Time
}

func newAckLog() *ackLog { return &ackLog{acked: map[string]string{}} }

func (a *ackLog) add(key, value string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acked[key] = value
	a.last = time.Now()
}

func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

func (a *ackLog) snapshot() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.acked)
}

// waitCount waits until at least n writes are acknowledged.
func (a *ackLog) waitCount(ctx context.Context, n int) error {
	for a.count() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d writes acknowledged, waited for %d: %w", a.count(), n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// writers keeps KV writes flowing while a scenario breaks the cluster.
// Writer w writes <prefix>w<w>/<seq>; a write that fails (connection
// refused by a killed server, a 500 during the election, a timeout) is
// retried with the same key and value on the next server until it is
// acknowledged, so the acknowledged set grows without holes.
type writers struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	errs     errorCollector
	attempts atomic.Int64
	failures atomic.Int64
}

// startWriters starts n writers over addrs; stop ends them.
func startWriters(ctx context.Context, rc *rawClient, addrs []string, n int, prefix string, acks *ackLog) *writers {
	ctx, cancel := context.WithCancel(ctx)
	w := &writers{cancel: cancel}
	for id := range n {
		w.wg.Go(func() { w.run(ctx, rc, addrs, id, prefix, acks) })
	}
	return w
}

func (w *writers) run(ctx context.Context, rc *rawClient, addrs []string, id int, prefix string, acks *ackLog) {
	for seq := 0; ; seq++ {
		key := fmt.Sprintf("%sw%d/%06d", prefix, id, seq)
		value := fmt.Sprintf("writer-%d-seq-%d", id, seq)
		for attempt := 0; ; attempt++ {
			if ctx.Err() != nil {
				return
			}
			w.attempts.Add(1)
			err := rc.kvPut(ctx, addrs[(id+seq+attempt)%len(addrs)], key, value)
			if err == nil {
				acks.add(key, value)
				break
			}
			if errors.Is(err, errProtocol) {
				w.errs.add(err)
				return
			}
			w.failures.Add(1)
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// stop cancels the writers, waits for them and returns any protocol
// violation they saw (a 200 whose body was not `true`).
func (w *writers) stop() error {
	w.cancel()
	w.wg.Wait()
	return w.errs.err()
}

// missingAcked compares what a server returned for the prefix with the
// acknowledged writes.
func missingAcked(got, acked map[string]string) error {
	var errs errorCollector
	missing := 0
	for k, want := range acked {
		v, ok := got[k]
		switch {
		case !ok:
			missing++
			errs.add(fmt.Errorf("acknowledged key %s is missing", k))
		case v != want:
			errs.add(fmt.Errorf("acknowledged key %s = %q, want %q", k, v, want))
		}
	}
	if err := errs.err(); err != nil {
		return fmt.Errorf("%d of %d acknowledged keys missing: %w", missing, len(acked), err)
	}
	return nil
}
