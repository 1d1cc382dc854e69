package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// leaseFraction is the share of Raft's heartbeat timeout a confirmed
// leadership is trusted for without asking the quorum again. A follower
// that acknowledged the leader at time t neither starts an election nor
// votes for anyone else before t + HeartbeatTimeout by its own clock
// (hashicorp/raft refuses votes while it knows a leader, and leadership
// transfer, which bypasses that, is never used), and any quorum that
// could elect a new leader holds such a follower. Half of that leaves a
// wide margin for clocks that run at different rates.
const leaseFraction = 0.5

// readGate decides when the leader may answer a read from its own state:
// the read must not see less than a write acknowledged before the read
// arrived, even if a newer leader exists that this one does not know of
// (it was paused or cut off). A default read is answered while a lease
// is fresh: a quorum confirmed this leadership, in this term, at most
// lease ago on the monotonic clock. Otherwise, and for every ?consistent
// read, the read waits for a quorum round that started after it arrived,
// as Raft's ReadIndex; the reads that arrive while one round is in flight
// share the next.
//
// A round is a Raft barrier, not VerifyLeader: a barrier is a new log
// entry, so only followers that accepted this leadership after the round
// began can commit it, and it returns once the FSM has applied everything
// before it. VerifyLeader counts any heartbeat answer that arrives after
// it was asked, including one a follower sent before a pause of this
// process, while a newer leader was being elected: it cannot prove
// leadership at the time a read arrived.
type readGate struct {
	verify      func() error  // one quorum round: nil while we lead
	currentTerm func() uint64 // Raft's current term
	lease       time.Duration
	// base anchors the lease's monotonic times, kept as nanoseconds since
	// it so that a read checks the lease without taking mu.
	base time.Time

	// leaseTerm and leaseUntil publish the lease: reads in leaseTerm may
	// be answered locally until base+leaseUntil. Written under mu, term
	// last cleared and first set around a change (see run).
	leaseTerm  atomic.Uint64
	leaseUntil atomic.Int64
	// used is set by every read the lease answers, and cleared by
	// renewWhileUsed: a lease nobody reads from is left to lapse.
	used atomic.Bool

	mu sync.Mutex
	// round is guarded by mu: the quorum round in flight, if any.
	round *verifyRound
}

// verifyRound is one quorum round; err is set before done closes.
type verifyRound struct {
	start time.Time
	done  chan struct{}
	err   error
}

func newReadGate(verify func() error, currentTerm func() uint64, heartbeatTimeout time.Duration) *readGate {
	return &readGate{
		verify:      verify,
		currentTerm: currentTerm,
		lease:       time.Duration(float64(heartbeatTimeout) * leaseFraction),
		base:        time.Now(),
	}
}

// leaseHolds reports whether reads in term may be answered locally now.
func (g *readGate) leaseHolds(term uint64) bool {
	if g.leaseTerm.Load() != term {
		return false
	}
	return int64(time.Since(g.base)) < g.leaseUntil.Load() && g.leaseTerm.Load() == term
}

// confirm returns nil once this server, leader in term, may answer a read
// that arrived now from its own state; an error wrapping ErrNoLeader if it
// is not the leader (the caller retries on the leader there is).
func (g *readGate) confirm(ctx context.Context, term uint64, consistent bool) error {
	if !consistent && g.leaseHolds(term) {
		if !g.used.Load() {
			g.used.Store(true)
		}
		return nil
	}
	arrived := time.Now()
	for {
		g.mu.Lock()
		if !consistent && g.leaseHolds(term) {
			g.mu.Unlock()
			return nil
		}
		r := g.round
		if r == nil {
			r = &verifyRound{start: time.Now(), done: make(chan struct{})}
			g.round = r
			g.mu.Unlock()
			g.run(r, term)
			return r.err
		}
		g.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !r.start.Before(arrived) {
			// The round began after this read arrived: its answer
			// covers the read.
			return r.err
		}
		// An older round says nothing of leadership when this read
		// arrived, though it may have renewed the lease: look again,
		// and share the next round with every read that waited too.
	}
}

// renewWhileUsed keeps the lease of term fresh while default reads use
// it, so that they seldom wait for a round: every quarter lease, if a read
// used the lease since the last look and less than half of it is left, it
// runs a round (unless one is in flight). The leader loop runs it for its
// term and stops it by cancelling ctx.
func (g *readGate) renewWhileUsed(ctx context.Context, term uint64) {
	tick := time.NewTicker(g.lease / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !g.used.Swap(false) || g.leaseTerm.Load() != term ||
			g.leaseUntil.Load()-int64(time.Since(g.base)) > int64(g.lease/2) {
			continue
		}
		g.mu.Lock()
		if g.round != nil {
			g.mu.Unlock()
			continue
		}
		r := &verifyRound{start: time.Now(), done: make(chan struct{})}
		g.round = r
		g.mu.Unlock()
		g.run(r, term)
	}
}

// run performs the round r for term and publishes its result.
func (g *readGate) run(r *verifyRound, term uint64) {
	err := g.verify()
	if err == nil && g.currentTerm() != term {
		err = fmt.Errorf("term changed from %d to %d", term, g.currentTerm())
	}
	if err != nil {
		r.err = fmt.Errorf("%w: leadership not confirmed: %v", structs.ErrNoLeader, err)
	}
	g.mu.Lock()
	if until := int64(r.start.Add(g.lease).Sub(g.base)); r.err == nil && (g.leaseTerm.Load() != term || g.leaseUntil.Load() < until) {
		// Cleared first so that no read pairs the new term with the old
		// deadline, or the reverse.
		g.leaseTerm.Store(0)
		g.leaseUntil.Store(until)
		g.leaseTerm.Store(term)
	}
	g.round = nil
	g.mu.Unlock()
	close(r.done)
}
