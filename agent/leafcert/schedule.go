package leafcert

import (
	"errors"
	"time"

	"github.com/trellis-mesh/trellis/internal/wait"
	"github.com/trellis-mesh/trellis/structs"
)

// scheduleLocked sets when the entry's next signing runs. While a fetch
// is under way it only records the wish: the fetch's end schedules from
// it.
func (m *Manager) scheduleLocked(e *entry, at time.Time) {
	if e.fetching {
		if e.wantAt.IsZero() || at.Before(e.wantAt) {
			e.wantAt = at
		}
		return
	}
	e.next = at
	if m.stopped || e.removed {
		return
	}
	wake := e.next
	if idle := e.lastUsed.Add(m.cfg.IdleTTL); idle.Before(wake) {
		wake = idle
	}
	m.disarmLocked(e)
	e.gen++
	gen := e.gen
	// The count is released by the callback, or by disarmLocked when the
	// timer is stopped before it fires.
	m.wg.Add(1)
	e.timer = time.AfterFunc(max(wake.Sub(m.cfg.Now()), 0), func() { m.wake(e, gen) })
}

// disarmLocked stops the entry's timer; a callback already started finds
// its gen replaced or the manager stopped and only releases its count.
func (m *Manager) disarmLocked(e *entry) {
	if e.timer != nil && e.timer.Stop() {
		m.wg.Done()
	}
	e.timer = nil
}

// wake is the entry's timer callback: drop the entry if it went idle,
// else fetch when due and schedule the next signing from the outcome.
func (m *Manager) wake(e *entry, gen uint64) {
	defer m.wg.Done()
	m.mu.Lock()
	if gen != e.gen || m.stopped || e.removed || e.fetching {
		m.mu.Unlock()
		return
	}
	e.timer = nil
	now := m.cfg.Now()
	if len(e.watchers) == 0 && !now.Before(e.lastUsed.Add(m.cfg.IdleTTL)) {
		m.dropLocked(e)
		m.mu.Unlock()
		return
	}
	if now.Before(e.next) {
		// Woken for the idle check of an entry still in use.
		m.scheduleLocked(e, e.next)
		m.mu.Unlock()
		return
	}
	e.fetching, e.wantAt = true, time.Time{}
	m.mu.Unlock()

	err := m.fetch(e)
	m.mu.Lock()
	defer m.mu.Unlock()
	e.fetching = false
	now = m.cfg.Now()
	var next time.Time
	if err != nil && len(e.watchers) == 0 && errors.Is(err, structs.ErrACLNotFound) {
		// The token is gone (deleted or expired): no signing with it can
		// succeed again, and kept, the entry would be retried until it
		// went idle. A later request with the token makes a new entry,
		// and gets the servers' answer again.
		m.dropLocked(e)
		return
	}
	if err != nil {
		if errors.Is(err, structs.ErrRateLimited) {
			e.refused++
		} else {
			e.refused = 0
		}
		next = now.Add(m.retryDelay(err, e.backoff, e.refused, e.cert != nil))
		e.backoff = nextBackoff(e.backoff, m.cfg.RetryMin, m.cfg.RetryMax)
		m.logger.Debug("leaf certificate request failed", "service", e.service, "error", err, "retry_at", next)
	} else {
		e.backoff, e.refused = 0, 0
		next = m.renewAtLocked(e, now)
	}
	// A root change during the fetch matters only if the fetch failed or
	// signed under the root that is no longer active.
	if !e.wantAt.IsZero() && e.wantAt.Before(next) && (err != nil || m.staleSignerLocked(e)) {
		next = e.wantAt
	}
	e.wantAt = time.Time{}
	m.scheduleLocked(e, next)
}

// dropLocked removes the entry; a request blocked on it looks again.
func (m *Manager) dropLocked(e *entry) {
	delete(m.entries, leafKey{service: e.service, token: e.token})
	e.removed = true
	close(e.changed)
	e.changed = make(chan struct{})
}

// rootsChangedLocked reschedules the entries after the active root (or
// trust domain) changed: one waiting for the CA to exist signs now, one
// whose certificate another key signed is re-issued within
// RootChangeJitter, so that a rotation does not send every CSR at once.
func (m *Manager) rootsChangedLocked() {
	now := m.cfg.Now()
	for _, e := range m.entries {
		switch {
		case e.cert == nil:
			m.scheduleLocked(e, now)
		case m.staleSignerLocked(e):
			if at := now.Add(wait.Jitter(m.cfg.RootChangeJitter)); at.Before(e.next) || e.fetching {
				m.scheduleLocked(e, at)
			}
		}
	}
}
