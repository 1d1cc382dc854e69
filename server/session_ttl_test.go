package server

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestSessionTimersClose checks the timers' life cycle around close
// without a server: deterministic, where TestShutdownJoinsSessionTimers
// races real expiries against a real Shutdown.
func TestSessionTimersClose(t *testing.T) {
	const ttl = time.Millisecond // fires after ttl*SessionTTLMultiplier
	tests := []struct {
		name string
		run  func(t *testing.T, st *sessionTimers)
	}{
		{
			name: "close waits for a callback that is expiring a session",
			run: func(t *testing.T, st *sessionTimers) {
				started, release := make(chan struct{}), make(chan struct{})
				st.reset("s", ttl, func(string) { close(started); <-release })
				<-started
				closed := make(chan struct{})
				go func() { st.close(); close(closed) }()
				select {
				case <-closed:
					t.Fatal("close returned while the callback was still running")
				case <-time.After(50 * time.Millisecond):
				}
				close(release)
				<-closed
			},
		},
		{
			name: "no callback starts after close",
			run: func(t *testing.T, st *sessionTimers) {
				var closed atomic.Bool
				var late atomic.Int32
				for i := range 200 {
					// Staggered over 0-4 ms, so that close lands among them.
					st.reset(strconv.Itoa(i), time.Duration(i)*20*time.Microsecond, func(string) {
						if closed.Load() {
							late.Add(1)
						}
					})
				}
				time.Sleep(2 * time.Millisecond)
				st.close()
				closed.Store(true)
				time.Sleep(20 * time.Millisecond)
				if n := late.Load(); n > 0 {
					t.Errorf("%d callbacks ran after close returned", n)
				}
			},
		},
		{
			name: "reset after close arms nothing",
			run: func(t *testing.T, st *sessionTimers) {
				st.close()
				var ran atomic.Bool
				st.reset("s", ttl, func(string) { ran.Store(true) })
				if n := st.len(); n != 0 {
					t.Errorf("%d timers armed after close", n)
				}
				time.Sleep(20 * time.Millisecond)
				if ran.Load() {
					t.Error("a timer armed after close fired")
				}
			},
		},
		{
			// Leadership lost and regained: stopAll is not close.
			name: "reset after stopAll arms again",
			run: func(t *testing.T, st *sessionTimers) {
				st.stopAll()
				fired := make(chan struct{})
				st.reset("s", ttl, func(string) { close(fired) })
				select {
				case <-fired:
				case <-time.After(5 * time.Second):
					t.Fatal("a timer armed after stopAll never fired")
				}
				st.close()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, newSessionTimers())
		})
	}
}

// TestShutdownJoinsSessionTimers shuts a leader down while many short
// session TTLs are expiring: once Shutdown returns, no expiry may still be
// running or start later (it would apply to a closed Raft and log from a
// stopped server, and goleak would count its goroutine).
func TestShutdownJoinsSessionTimers(t *testing.T) {
	ts := startTestCluster(t, 1, false)[0]
	s := ts.srv
	waitForSerfHealth(t, s, ts.name)
	const sessions = 100
	var (
		returned atomic.Bool
		running  atomic.Int32
		late     atomic.Int32
		expired  atomic.Int32
	)
	expire := func(id string) {
		if returned.Load() {
			late.Add(1)
		}
		running.Add(1)
		defer running.Add(-1)
		expired.Add(1)
		// As long as a slow Raft apply would take: an expiry under way
		// when the timers are stopped is still running well after.
		time.Sleep(20 * time.Millisecond)
		s.expireSession(id)
	}
	ids := make([]string, sessions)
	for i := range ids {
		rpc(t, s, structs.MethodSessionApply, &structs.SessionRequest{Op: structs.SessionCreate,
			Session: structs.Session{Node: ts.name, TTL: "1s", NodeChecks: []string{structs.SerfCheckID}}}, &ids[i])
	}
	// Re-arm with TTLs far below the allowed minimum, staggered so that
	// the timers fire over 100 ms and Shutdown lands among the expiries.
	for i, id := range ids {
		s.sessionTimers.reset(id, time.Duration(i)*500*time.Microsecond, expire)
	}
	time.Sleep(40 * time.Millisecond)
	if err := s.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	returned.Store(true)
	if n := running.Load(); n > 0 {
		t.Errorf("%d session expiries still running after Shutdown returned", n)
	}
	time.Sleep(150 * time.Millisecond)
	if n := late.Load(); n > 0 {
		t.Errorf("%d session expiries started after Shutdown returned", n)
	}
	if expired.Load() == 0 {
		t.Error("no session expired before Shutdown: the test did not race them")
	}
}
