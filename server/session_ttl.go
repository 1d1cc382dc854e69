package server

import (
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// sessionTimers are the leader's TTL timers, one per session with a TTL.
// A session is destroyed when its timer fires: TTL times
// structs.SessionTTLMultiplier after its last renewal, as in Consul.
type sessionTimers struct {
	mu sync.Mutex
	// timers is guarded by mu.
	timers map[string]*time.Timer
	// closed, guarded by mu, is set by close: from then on no timer is
	// armed and no callback that has not yet begun expiring runs.
	closed bool
	// running counts the callbacks expiring a session. It is only added to
	// under mu with closed false, so that once close has set closed its
	// Wait sees every callback that will ever run.
	running sync.WaitGroup
}

func newSessionTimers() *sessionTimers {
	return &sessionTimers{timers: make(map[string]*time.Timer)}
}

// reset (re)arms the session's timer; a zero TTL means the session never
// expires and has no timer. After close it arms nothing.
func (t *sessionTimers) reset(id string, ttl time.Duration, expire func(string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.timers[id]; ok {
		old.Stop()
		delete(t.timers, id)
	}
	if ttl <= 0 || t.closed {
		return
	}
	var tm *time.Timer
	tm = time.AfterFunc(ttl*structs.SessionTTLMultiplier, func() {
		t.mu.Lock()
		// Stop cannot recall a callback that has already fired: one that
		// lost the race for mu to stop, stopAll, a reset (a renewal) or
		// close finds its timer no longer the session's and does nothing.
		if t.closed || t.timers[id] != tm {
			t.mu.Unlock()
			return
		}
		delete(t.timers, id)
		t.running.Add(1)
		t.mu.Unlock()
		defer t.running.Done()
		expire(id)
	})
	t.timers[id] = tm
}

func (t *sessionTimers) stop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.timers[id]; ok {
		old.Stop()
		delete(t.timers, id)
	}
}

// stopAll drops every timer (leadership lost); a later reset arms again.
func (t *sessionTimers) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopAllLocked()
}

func (t *sessionTimers) stopAllLocked() {
	for id, tm := range t.timers {
		tm.Stop()
		delete(t.timers, id)
	}
}

// close stops every timer for good (shutdown) and waits for the callbacks
// already expiring a session, so that none runs once close returns.
func (t *sessionTimers) close() {
	t.mu.Lock()
	t.closed = true
	t.stopAllLocked()
	t.mu.Unlock()
	t.running.Wait()
}

func (t *sessionTimers) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.timers)
}
