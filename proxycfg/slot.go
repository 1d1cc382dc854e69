package proxycfg

import "sync"

// slot is everything the manager keeps for one ProxyID: the running state
// machine (if registered), the latest valid snapshot and the watchers. A
// slot outlives state restarts, and exists without a state while someone
// watches a proxy that is not registered (yet). It is removed once it has
// neither.
//
// Lock order: Manager.mu, then slot.mu. A state machine's goroutine only
// ever takes slot.mu (to publish), so the manager may wait for it while
// holding neither.
type slot struct {
	// source is the registering source; guarded by Manager.mu.
	source ProxySource
	// dynamic are the run-time upstreams (SetUpstreams), handed to every
	// state the slot gets; guarded by Manager.mu.
	dynamic []string

	mu sync.Mutex
	// state is the owner of the slot: only it may publish. Written under
	// both Manager.mu and mu, so either lock suffices to read it.
	state *state
	// snap is the latest snapshot the current state published, nil until
	// it is valid.
	snap *ConfigSnapshot
	// version numbers the snapshots published through this slot.
	version  uint64
	watchers map[*watcher]struct{}
}

// watcher is one Watch call: a 1-slot channel that always holds the
// latest snapshot not yet received.
type watcher struct {
	ch chan *ConfigSnapshot
}

// offer replaces whatever the watcher has not received yet by snap. It
// never blocks: callers hold slot.mu, so they are the only sender, and
// after the drain the buffer is free (the receiver can only take).
func (w *watcher) offer(snap *ConfigSnapshot) {
	select {
	case <-w.ch:
	default:
	}
	select {
	case w.ch <- snap:
	default:
	}
}

// publish makes snap the slot's current snapshot and offers it to every
// watcher, if from still owns the slot (a state that was replaced or
// deregistered while building must not publish). snap is not shared
// before this call, so numbering it here is safe.
func (sl *slot) publish(from *state, snap *ConfigSnapshot) bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.state != from {
		return false
	}
	sl.version++
	snap.Version = sl.version
	sl.snap = snap
	for w := range sl.watchers {
		w.offer(snap)
	}
	return true
}
