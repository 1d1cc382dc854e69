package server

import (
	"context"
	"sync"
	"time"
)

// leaderDutyRetryMax bounds the wait between failed setup attempts of a
// leader duty.
const leaderDutyRetryMax = 30 * time.Second

// leaderDuty is work the leader does for one term: a setup that must
// succeed once (the CA bootstrap, the built-in ACL objects), retried with
// backoff until it does or the term ends, then a task repeated every
// interval (pruning roots, reaping tokens).
type leaderDuty struct {
	what  string // what setup sets up, for its log line
	setup func() error
	every time.Duration
	tick  func(now time.Time) error
	fails string // the log message of a failed tick
	// after, when set, holds setup back until it is closed; ready, when
	// set, is closed once setup succeeded. The CA waits so for the ACLs,
	// as Consul's leader sets up ACLs first: a client that waits for the
	// CA roots (sdk/testutil) then finds the initial management token.
	after <-chan struct{}
	ready chan struct{}
}

// startLeaderDuty runs d until ctx ends; the leader loop defers the
// returned function, which stops it and waits.
func (s *Server) startLeaderDuty(ctx context.Context, d leaderDuty) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.runLeaderDuty(ctx, d)
	}()
	return func() {
		cancel()
		wg.Wait()
	}
}

func (s *Server) runLeaderDuty(ctx context.Context, d leaderDuty) {
	if d.after != nil {
		select {
		case <-ctx.Done():
			return
		case <-d.after:
		}
	}
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, leaderDutyRetryMax) {
		err := d.setup()
		if err == nil {
			if d.ready != nil {
				close(d.ready)
			}
			break
		}
		s.logger.Error("failed to initialize "+d.what+", will retry", "error", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
	t := time.NewTicker(d.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if err := d.tick(now); err != nil {
				s.logger.Warn(d.fails, "error", err)
			}
		}
	}
}
