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

// fakeQuorum stands in for Raft's VerifyLeader: it counts rounds, can
// hold them until released, and answers with err.
type fakeQuorum struct {
	rounds  atomic.Int32
	mu      sync.Mutex
	err     error
	release chan struct{} // when set, rounds wait for it
}

func (q *fakeQuorum) verify(time.Duration) error {
	q.rounds.Add(1)
	q.mu.Lock()
	release, err := q.release, q.err
	q.mu.Unlock()
	if release != nil {
		<-release
	}
	return err
}

func (q *fakeQuorum) set(err error, release chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.err, q.release = err, release
}

// TestReadGateLease: default reads are answered without a quorum round
// while the lease is fresh, and need one once it ran out (a leader paused
// past its lease asks the quorum, which a deposed leader cannot get);
// consistent reads always need one; a failed round is "No cluster leader"
// so the read goes to the leader there is.
func TestReadGateLease(t *testing.T) {
	const term = 7
	q := &fakeQuorum{}
	g := newReadGate(q.verify, func() uint64 { return term }, time.Second, systemClock{base: time.Now()}) // a 500ms lease
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		pause      time.Duration // before the read
		consistent bool
		term       uint64
		fail       error
		rounds     int32 // rounds run by this read
		ok         bool
	}{
		{"first default read confirms", 0, false, term, nil, 1, true},
		{"fresh lease: local", 0, false, term, nil, 0, true},
		{"consistent: always a round", 0, true, term, nil, 1, true},
		{"another term: a round", 0, false, term + 1, nil, 1, false}, // the fake's term is 7: the round sees it changed
		{"paused past the lease: a round", 600 * time.Millisecond, false, term, nil, 1, true},
		{"paused past the lease, deposed", 600 * time.Millisecond, false, term, errors.New("node is not the leader"), 1, false},
		{"still deposed", 0, false, term, errors.New("node is not the leader"), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q.set(tc.fail, nil)
			time.Sleep(tc.pause)
			before := q.rounds.Load()
			err := g.confirm(ctx, tc.term, tc.consistent)
			if got := q.rounds.Load() - before; got != tc.rounds {
				t.Errorf("rounds = %d, want %d", got, tc.rounds)
			}
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, structs.ErrNoLeader) {
				t.Fatalf("err = %v, want it to wrap ErrNoLeader", err)
			}
		})
	}
}

// TestReadGateSharesRounds: reads that arrive while a round is in flight
// share the next round rather than running one each, and none is answered
// by a round that began before it arrived.
func TestReadGateSharesRounds(t *testing.T) {
	q := &fakeQuorum{}
	g := newReadGate(q.verify, func() uint64 { return 1 }, time.Hour, systemClock{base: time.Now()})
	first := make(chan struct{})
	q.set(nil, first)
	var wg sync.WaitGroup
	errs := make(chan error, 11)
	wg.Add(1)
	go func() { defer wg.Done(); errs <- g.confirm(context.Background(), 1, true) }()
	for q.rounds.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Ten consistent reads arrive during the first round.
	second := make(chan struct{})
	for range 10 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- g.confirm(context.Background(), 1, true) }()
	}
	time.Sleep(20 * time.Millisecond)
	q.set(nil, second)
	close(first)
	for q.rounds.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	close(second)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := q.rounds.Load(); got != 2 {
		t.Fatalf("rounds = %d, want 2: the first, and one shared by the ten reads that arrived during it", got)
	}
}

// TestReadGateRenewsWhileUsed: while default reads use the lease, the
// renewer keeps it from lapsing, so reads never wait for a round; once
// nobody reads, it lets the lease lapse instead of asking the quorum.
func TestReadGateRenewsWhileUsed(t *testing.T) {
	q := &fakeQuorum{}
	g := newReadGate(q.verify, func() uint64 { return 3 }, 4*time.Second, systemClock{base: time.Now()}) // a 2s lease, looked at every 500ms
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); g.renewWhileUsed(ctx, 3) }()
	defer func() { cancel(); wg.Wait() }()

	if err := g.confirm(context.Background(), 3, false); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !g.leaseHolds(3) {
			t.Fatal("the lease lapsed while reads were using it")
		}
		if err := g.confirm(context.Background(), 3, false); err != nil {
			t.Fatal(err)
		}
	}
	if q.rounds.Load() < 2 {
		t.Fatalf("rounds = %d: the lease was never renewed", q.rounds.Load())
	}
	idle := q.rounds.Load()
	time.Sleep(3 * time.Second)
	if q.rounds.Load() > idle+1 {
		t.Fatalf("rounds went from %d to %d with nobody reading", idle, q.rounds.Load())
	}
}

// fakeClock is a leaseClock a test moves by hand, each reading on its own.
type fakeClock struct {
	mu   sync.Mutex
	mono time.Duration // guarded by mu
	wall int64         // guarded by mu
}

func (c *fakeClock) now() (time.Duration, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono, c.wall
}

func (c *fakeClock) move(mono, wall time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono += mono
	c.wall += int64(wall)
}

// TestReadGateClockJumps: the lease holds only while both the monotonic
// and the wall clock say it is fresh. A wall clock set forward or back,
// or a suspension of the machine (the monotonic clock stands still while
// time goes on for the other servers), ends the lease: the next default
// read asks the quorum, and the round starts a new lease.
func TestReadGateClockJumps(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mono, wall time.Duration // how each clock moves after the lease is taken
		holds      bool
	}{
		{"both steady, within the lease", 100 * time.Millisecond, 100 * time.Millisecond, true},
		{"both steady, past the lease", 600 * time.Millisecond, 600 * time.Millisecond, false},
		{"wall set forward", 10 * time.Millisecond, time.Hour, false},
		{"wall set back", 10 * time.Millisecond, -time.Hour, false},
		{"wall set back a little", 10 * time.Millisecond, -time.Millisecond, false},
		{"machine suspended", 0, 10 * time.Second, false},
		{"monotonic runs ahead of wall", 600 * time.Millisecond, 10 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &fakeQuorum{}
			clock := &fakeClock{wall: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano()}
			g := newReadGate(q.verify, func() uint64 { return 1 }, time.Second, clock) // a 500ms lease
			if err := g.confirm(context.Background(), 1, false); err != nil {
				t.Fatal(err)
			}
			clock.move(tc.mono, tc.wall)
			before := q.rounds.Load()
			if err := g.confirm(context.Background(), 1, false); err != nil {
				t.Fatal(err)
			}
			if asked := q.rounds.Load() > before; asked == tc.holds {
				t.Fatalf("quorum asked = %v, want %v", asked, !tc.holds)
			}
			// Whatever happened, a fresh round gives a lease that holds
			// from the clocks' new readings.
			if !g.leaseHolds(1) {
				t.Fatal("no lease after a successful round")
			}
		})
	}
}

// TestReadGateRelinquish: once a leader gives up its lease for a
// leadership transfer, every default read of that term takes a quorum
// round, and no round grants a lease in that term again; the next term
// leases as before.
func TestReadGateRelinquish(t *testing.T) {
	term := atomic.Uint64{}
	term.Store(3)
	q := &fakeQuorum{}
	g := newReadGate(q.verify, term.Load, time.Second, systemClock{base: time.Now()})
	ctx := context.Background()
	steps := []struct {
		name       string
		relinquish bool
		term       uint64
		rounds     int32
	}{
		{"first read takes the lease", false, 3, 1},
		{"the lease answers", false, 3, 0},
		{"after relinquishing: a round", true, 3, 1},
		{"and again: the round granted no lease", false, 3, 1},
		{"a later term leases again", false, 4, 1},
		{"its lease answers", false, 4, 0},
	}
	for _, st := range steps {
		term.Store(st.term)
		if st.relinquish {
			g.relinquish(st.term)
		}
		before := q.rounds.Load()
		if err := g.confirm(ctx, st.term, false); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := q.rounds.Load() - before; got != st.rounds {
			t.Fatalf("%s: %d rounds, want %d", st.name, got, st.rounds)
		}
	}
	// renewWhileUsed cannot bring the lease of a relinquished term back.
	g.relinquish(4)
	g.used.Store(true)
	r := g.newRound()
	g.mu.Lock()
	g.round = r
	g.mu.Unlock()
	g.run(r, 4, time.Second)
	if r.err != nil || g.leaseHolds(4) {
		t.Fatalf("a round after relinquishing granted a lease (err %v)", r.err)
	}
}
