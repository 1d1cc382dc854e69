package checks

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/internal/wait"
)

// lifecycle owns one runner goroutine: start launches it with a context
// that stop cancels, and stop waits for it to return.
type lifecycle struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// start runs fn in a new goroutine unless the runner was already started
// or stopped (a stopped runner is never restarted: the Manager builds a
// new one instead).
func (l *lifecycle) start(fn func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.stopped {
		return
	}
	l.started = true
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		fn(ctx)
	}()
}

// stop cancels the goroutine and waits for it; it is idempotent and safe
// before start.
func (l *lifecycle) stop() {
	l.mu.Lock()
	l.stopped = true
	if l.cancel != nil {
		l.cancel()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// probeFunc runs one probe. It must return promptly once ctx is done.
type probeFunc func(ctx context.Context) (status, output string)

// periodic is the loop shared by HTTP, TCP and gRPC checks: after a random
// stagger within one interval (so that checks registered together do not
// fire together, as in Consul), probe, report, wait an interval, repeat.
type periodic struct {
	checkID  string
	interval time.Duration
	notify   Notifier
	logger   *slog.Logger
	probe    probeFunc
	lc       lifecycle
}

func (p *periodic) run(ctx context.Context) {
	timer := time.NewTimer(wait.Jitter(p.interval))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		status, output := p.probe(ctx)
		// A probe cut short by Stop says nothing about the target.
		if ctx.Err() != nil {
			return
		}
		p.notify.UpdateCheck(p.checkID, status, output)
		timer.Reset(p.interval)
	}
}

// orDiscard returns l, or a logger that drops everything when l is nil.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// positiveOr returns d when positive, def otherwise.
func positiveOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
