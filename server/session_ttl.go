package server

import (
	"github.com/trellis-mesh/trellis/structs"
	"sync"
	"time"
)

// sessionTimers are the leader's TTL timers, one per session with a TTL.
// A session is destroyed when its timer fires: TTL times
// structs.SessionTTLMultiplier after its last renewal, as in Consul.
type sessionTimers struct {
	mu sync.Mutex
	// timers is guarded by mu.
	timers map[string]*time.Timer
}

func newSessionTimers() *sessionTimers {
	return &sessionTimers{timers: make(map[string]*time.Timer)}
}

// reset (re)arms the session's timer; a zero TTL means the session never
// expires and has no timer.
func (t *sessionTimers) reset(id string, ttl time.Duration, expire func(string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.timers[id]; ok {
		old.Stop()
		delete(t.timers, id)
	}
	if ttl <= 0 {
		return
	}
	t.timers[id] = time.AfterFunc(ttl*structs.SessionTTLMultiplier, func() {
		t.mu.Lock()
		delete(t.timers, id)
		t.mu.Unlock()
		expire(id)
	})
}

func (t *sessionTimers) stop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.timers[id]; ok {
		old.Stop()
		delete(t.timers, id)
	}
}

// stopAll drops every timer (leadership lost, or shutdown).
func (t *sessionTimers) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, tm := range t.timers {
		tm.Stop()
		delete(t.timers, id)
	}
}
