package server

import (
	"context"
	"fmt"
	"sync"
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
// read, the read waits for a quorum round (Raft's VerifyLeader, a
// heartbeat to every follower) that started after it arrived, as Raft's
// ReadIndex; concurrent reads share one round.
type readGate struct {
	verify      func() error  // one quorum round: nil while we lead
	currentTerm func() uint64 // Raft's current term
	lease       time.Duration

	mu sync.Mutex
	// term, until and round are guarded by mu. Reads in term may be
	// answered locally until until (a monotonic time); round is the
	// quorum round in flight, if any.
	term  uint64
	until time.Time
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
	}
}

// confirm returns nil once this server, leader in term, may answer a read
// that arrived now from its own state; an error wrapping ErrNoLeader if it
// is not the leader (the caller retries on the leader there is).
func (g *readGate) confirm(ctx context.Context, term uint64, consistent bool) error {
	arrived := time.Now()
	for {
		g.mu.Lock()
		if !consistent && g.term == term && time.Now().Before(g.until) {
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
		// An older round: it says nothing of leadership when the read
		// arrived, though it may have renewed the lease; look again.
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
	if r.err == nil && (g.term != term || g.until.Before(r.start.Add(g.lease))) {
		g.term, g.until = term, r.start.Add(g.lease)
	}
	g.round = nil
	g.mu.Unlock()
	close(r.done)
}
