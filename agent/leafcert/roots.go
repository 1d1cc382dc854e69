package leafcert

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-mesh/trellis/internal/wait"
	"github.com/trellis-mesh/trellis/structs"
)

// watchRoots follows the CA roots with a blocking query until the manager
// stops, publishing each new active root to the entries.
func (m *Manager) watchRoots() {
	var (
		index   uint64
		backoff time.Duration
	)
	for {
		var reply structs.IndexedCARoots
		ctx, cancel := context.WithTimeout(m.ctx, m.cfg.RootsWait+rpcTimeout)
		err := structs.MethodConnectCARoots.Call(ctx, m.cfg.RPC, &structs.DCSpecificRequest{
			QueryOptions: structs.QueryOptions{Datacenter: m.cfg.Datacenter, MinQueryIndex: index, MaxQueryTime: m.cfg.RootsWait},
		}, &reply)
		cancel()
		if m.ctx.Err() != nil {
			return
		}
		if err != nil {
			backoff = nextBackoff(backoff, m.cfg.RetryMin, m.cfg.RetryMax)
			m.logger.Debug("CA roots watch failed", "error", err, "retry_in", backoff)
			if !m.sleep(backoff/2 + wait.Jitter(backoff/2)) {
				return
			}
			continue
		}
		backoff = 0
		// An index that went backwards (a restored snapshot) restarts the
		// watch from scratch rather than waiting for it to catch up.
		if reply.Index < index {
			index = 0
		} else {
			index = reply.Index
		}
		m.setRoots(&reply)
		if reply.ActiveRootID == "" {
			// Before the leader has created the CA the roots index may
			// not move for it; poll until it exists.
			if !m.sleep(m.cfg.RetryMin) {
				return
			}
			index = 0
		}
	}
}

// setRoots stores the roots and wakes the entries when the active root or
// trust domain changed.
func (m *Manager) setRoots(r *structs.IndexedCARoots) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setRootsLocked(r)
}

func (m *Manager) setRootsLocked(r *structs.IndexedCARoots) {
	prev := m.roots
	m.roots = r
	if prev == nil || prev.Index != r.Index {
		close(m.rootsUpdated)
		m.rootsUpdated = make(chan struct{})
	}
	if prev == nil || prev.ActiveRootID != r.ActiveRootID || prev.TrustDomain != r.TrustDomain {
		if prev != nil && prev.ActiveRootID != "" && prev.ActiveRootID != r.ActiveRootID {
			m.logger.Info("CA root changed, leaf certificates will be re-issued", "old", prev.ActiveRootID, "new", r.ActiveRootID)
		}
		m.rootsChangedLocked()
	}
}

// activeRoots returns the roots with an active root to sign under. When
// the watch has not seen one yet (it polls while the CA is being
// created, and its first answer may still be on its way), it asks the
// servers once, as the HTTP API does, so that no signing fails for want
// of roots the servers already serve.
func (m *Manager) activeRoots() (*structs.IndexedCARoots, error) {
	m.mu.Lock()
	roots := m.roots
	m.mu.Unlock()
	if hasActiveRoot(roots) {
		return roots, nil
	}
	var reply structs.IndexedCARoots
	ctx, cancel := context.WithTimeout(m.ctx, rpcTimeout)
	defer cancel()
	err := structs.MethodConnectCARoots.Call(ctx, m.cfg.RPC, &structs.DCSpecificRequest{
		QueryOptions: structs.QueryOptions{Datacenter: m.cfg.Datacenter},
	}, &reply)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoRoots, err)
	}
	if !hasActiveRoot(&reply) {
		return nil, errNoRoots
	}
	m.setRootsIfNewer(&reply)
	return &reply, nil
}

func hasActiveRoot(r *structs.IndexedCARoots) bool {
	return r != nil && r.TrustDomain != "" && r.ActiveRootID != ""
}

// setRootsIfNewer is setRoots for an answer that may race the watch's:
// it never replaces roots the watch saw at a later index.
func (m *Manager) setRootsIfNewer(r *structs.IndexedCARoots) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !hasActiveRoot(m.roots) || m.roots.Index < r.Index {
		m.setRootsLocked(r)
	}
}

// Roots returns the roots the manager last saw (nil before the first
// answer). The caller must not modify them.
func (m *Manager) Roots() *structs.IndexedCARoots {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.roots
}

// WatchRoots returns the roots the manager last saw (nil before the
// first answer; the caller must not modify them) and a channel closed when
// they next change, so that a consumer keeping files of the roots current
// follows the manager's one watch instead of opening its own.
func (m *Manager) WatchRoots() (*structs.IndexedCARoots, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.roots, m.rootsUpdated
}

// sleep waits d, reporting false when the manager stops first.
func (m *Manager) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-m.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
