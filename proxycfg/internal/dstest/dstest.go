// Package dstest holds test helpers shared by the data-source packages:
// a subscriber that records what a data source sends it.
package dstest

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/proxycfg"
)

// Timeout bounds every wait of the helpers.
const Timeout = 10 * time.Second

// NotifyFunc starts one watch on a data source.
type NotifyFunc func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error

// Sub is one watch: its channel is unbuffered, like the worst consumer,
// so a source that sends from Notify itself deadlocks the test.
type Sub struct {
	Corr   string
	Ch     chan proxycfg.UpdateEvent
	Cancel context.CancelFunc
}

// Watch starts a watch with notify and cancels it when the test ends.
func Watch(t testing.TB, corr string, notify NotifyFunc) *Sub {
	t.Helper()
	return WatchBuffered(t, corr, 0, notify)
}

// WatchBuffered is Watch with a channel of n slots, like the manager's
// state machines have: a test may then read several watches one after
// the other, whatever order the source sends in.
func WatchBuffered(t testing.TB, corr string, n int, notify NotifyFunc) *Sub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sub{Corr: corr, Ch: make(chan proxycfg.UpdateEvent, n), Cancel: cancel}
	if err := notify(ctx, corr, s.Ch); err != nil {
		cancel()
		t.Fatalf("Notify %s: %v", corr, err)
	}
	t.Cleanup(cancel)
	return s
}

// Next waits for the next successful result, failing the test on a
// timeout; error events are skipped (and logged).
func (s *Sub) Next(t testing.TB) any {
	t.Helper()
	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	for {
		select {
		case ev := <-s.Ch:
			if ev.CorrelationID != s.Corr {
				t.Fatalf("event for %q on the watch %q", ev.CorrelationID, s.Corr)
			}
			if ev.Err != nil {
				t.Logf("%s: error event: %v", s.Corr, ev.Err)
				continue
			}
			if ev.Result == nil {
				t.Fatalf("%s: event without result or error", s.Corr)
			}
			return ev.Result
		case <-deadline.C:
			t.Fatalf("%s: no result within %s", s.Corr, Timeout)
			return nil
		}
	}
}

// NextErr waits for the next error event.
func (s *Sub) NextErr(t testing.TB) error {
	t.Helper()
	select {
	case ev := <-s.Ch:
		if ev.Err == nil {
			t.Fatalf("%s: want an error event, got %T", s.Corr, ev.Result)
		}
		return ev.Err
	case <-time.After(Timeout):
		t.Fatalf("%s: no error within %s", s.Corr, Timeout)
		return nil
	}
}

// None checks that nothing arrives for d.
func (s *Sub) None(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case ev := <-s.Ch:
		t.Fatalf("%s: unexpected event: result %#v, error %v", s.Corr, ev.Result, ev.Err)
	case <-time.After(d):
	}
}

// WaitFor polls cond until it holds, failing the test after Timeout.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
