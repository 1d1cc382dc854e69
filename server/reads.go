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
// (hashicorp/raft refuses votes while it knows a leader), and any quorum
// that could elect a new leader holds such a follower. Half of that
// leaves a wide margin for clocks that run at different rates.
// Leadership transfer bypasses that refusal (its target campaigns at
// once, and voters grant it), so a leader gives up its lease for the rest
// of its term before it starts one (readGate.relinquish).
const leaseFraction = 0.5

// leaseClock gives the two readings a lease is checked against: the
// monotonic clock (time since a fixed point; it never jumps, but on Linux
// it stops while the machine is suspended, when the other servers' clocks
// go on) and the wall clock (it goes on through a suspension, and jumps
// when it is set). A lease holds only while both say it is fresh, so a
// jump of either, or a suspension, costs a quorum round, never a stale
// read.
type leaseClock interface {
	now() (mono time.Duration, wall int64)
}

// systemClock reads the machine's clocks.
type systemClock struct{ base time.Time }

func (c systemClock) now() (time.Duration, int64) {
	t := time.Now()
	return t.Sub(c.base), t.UnixNano()
}

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
	verify      func(timeout time.Duration) error // one quorum round: nil while we lead
	currentTerm func() uint64                     // Raft's current term
	lease       time.Duration
	clock       leaseClock

	// leaseTerm, leaseUntil and leaseWall publish the lease, so that a
	// read checks it without taking mu: reads in leaseTerm may be
	// answered locally until the monotonic reading leaseUntil, and while
	// the wall clock reads from leaseWall to leaseWall+lease. Written
	// under mu, term last cleared and first set around a change (see run).
	leaseTerm  atomic.Uint64
	leaseUntil atomic.Int64
	leaseWall  atomic.Int64
	// used is set by every read the lease answers, and cleared by
	// renewWhileUsed: a lease nobody reads from is left to lapse.
	used atomic.Bool
	// relinquished is the term whose lease was given up for a
	// leadership transfer: no read in it is answered by the lease, and
	// no round in it grants one (set under mu).
	relinquished atomic.Uint64

	mu sync.Mutex
	// round is guarded by mu: the quorum round in flight, if any.
	round *verifyRound
}

// verifyRound is one quorum round; err is set before done closes.
type verifyRound struct {
	start     time.Duration // monotonic
	startWall int64
	done      chan struct{}
	err       error
}

func newReadGate(verify func(time.Duration) error, currentTerm func() uint64, heartbeatTimeout time.Duration, clock leaseClock) *readGate {
	return &readGate{
		verify:      verify,
		currentTerm: currentTerm,
		lease:       time.Duration(float64(heartbeatTimeout) * leaseFraction),
		clock:       clock,
	}
}

// leaseHolds reports whether reads in term may be answered locally now.
func (g *readGate) leaseHolds(term uint64) bool {
	if g.leaseTerm.Load() != term || g.relinquished.Load() == term {
		return false
	}
	mono, wall := g.clock.now()
	from := g.leaseWall.Load()
	return int64(mono) < g.leaseUntil.Load() && wall >= from && wall < from+int64(g.lease) &&
		g.leaseTerm.Load() == term
}

// newRound starts a round record at the clock's readings now.
func (g *readGate) newRound() *verifyRound {
	mono, wall := g.clock.now()
	return &verifyRound{start: mono, startWall: wall, done: make(chan struct{})}
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
	arrived, _ := g.clock.now()
	for {
		g.mu.Lock()
		if !consistent && g.leaseHolds(term) {
			g.mu.Unlock()
			return nil
		}
		r := g.round
		if r == nil {
			r = g.newRound()
			g.round = r
			g.mu.Unlock()
			g.run(r, term, roundTimeout(ctx))
			return r.err
		}
		g.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.start >= arrived {
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
		mono, _ := g.clock.now()
		if !g.used.Swap(false) || g.leaseTerm.Load() != term ||
			g.leaseUntil.Load()-int64(mono) > int64(g.lease/2) {
			continue
		}
		g.mu.Lock()
		if g.round != nil {
			g.mu.Unlock()
			continue
		}
		r := g.newRound()
		g.round = r
		g.mu.Unlock()
		// A round slower than the lease renews nothing.
		g.run(r, term, g.lease)
	}
}

// relinquish gives up the lease of term for good, before a leadership
// transfer: the transfer's target campaigns at once and the voters grant
// it even though they know this leader, so from here on a lease of term
// proves nothing. Every later default read in term waits for a quorum
// round (which a deposed leader cannot complete), and no round in term
// grants a new lease. A later term of this server leads with leases
// again.
func (g *readGate) relinquish(term uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.relinquished.Store(term)
	if g.leaseTerm.Load() == term {
		g.leaseTerm.Store(0)
	}
}

// roundTimeout bounds a round a read runs by the read's deadline (a
// leader whose log cannot take the round's entry, as one that is stuck,
// must not hold the read past it) and by applyTimeout.
func roundTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return min(applyTimeout, time.Until(d))
	}
	return applyTimeout
}

// run performs the round r for term and publishes its result.
func (g *readGate) run(r *verifyRound, term uint64, timeout time.Duration) {
	err := context.DeadlineExceeded
	if timeout > 0 {
		err = g.verify(timeout)
	}
	if err == nil && g.currentTerm() != term {
		err = fmt.Errorf("term changed from %d to %d", term, g.currentTerm())
	}
	if err != nil {
		r.err = fmt.Errorf("%w: leadership not confirmed: %v", structs.ErrNoLeader, err) //nolint:errorlint // the sentinel alone decides whether a write may be retried: the cause must not match another
	}
	g.mu.Lock()
	if until := int64(r.start + g.lease); r.err == nil && g.relinquished.Load() != term &&
		(g.leaseTerm.Load() != term || g.leaseUntil.Load() <= until) {
		// Cleared first so that no read pairs the new term with the old
		// deadline, or the reverse.
		g.leaseTerm.Store(0)
		g.leaseUntil.Store(until)
		g.leaseWall.Store(r.startWall)
		g.leaseTerm.Store(term)
	}
	g.round = nil
	g.mu.Unlock()
	close(r.done)
}
