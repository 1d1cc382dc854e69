package leafcert

import (
	"context"
	"sync"

	"github.com/trellis-mesh/trellis/structs"
)

// watcher is one Watch call. Its mutex orders the deliveries, which may
// come from the Watch call itself and from the entry's fetches at once.
type watcher struct {
	fn func(*structs.IssuedCert, error)

	mu sync.Mutex
	// Guarded by mu:
	sent  uint64 // ModifyIndex of the last certificate delivered
	got   bool   // a certificate was delivered
	ended bool
}

// Watch follows a service's leaf signed with token (as Get keys it)
// without a goroutine per caller: fn is
// called with a copy of each new certificate the manager holds (the
// current one first, if any), and, while the service has none yet, with
// the failure of each attempt to get it (a refused signing, say), until
// ctx ends. A failed renewal of a held certificate is not reported: the
// held one stays valid and is retried. Calls for one Watch never overlap
// and never deliver an older certificate after a newer one; fn runs in
// the manager's goroutines (or in the Watch call), so it must not call
// the manager back and should return promptly once ctx is done. The
// service is kept (not dropped as idle) while watched.
func (m *Manager) Watch(ctx context.Context, service, token string, fn func(*structs.IssuedCert, error)) error {
	if service == "" {
		return ErrMissingService
	}
	e, err := m.entry(leafKey{service: service, token: token})
	if err != nil {
		return err
	}
	w := &watcher{fn: fn}
	m.mu.Lock()
	if e.watchers == nil {
		e.watchers = make(map[*watcher]struct{})
	}
	e.watchers[w] = struct{}{}
	cert, ferr := e.cert, e.err
	m.mu.Unlock()
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		delete(e.watchers, w)
		e.lastUsed = m.cfg.Now()
		m.mu.Unlock()
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	})
	w.deliver(cert, ferr)
	return nil
}

// publish hands the entry's current certificate (or, without one, its
// failure) to its watchers. It runs after each fetch's outcome is stored,
// without the manager's lock.
func (m *Manager) publish(e *entry) {
	m.mu.Lock()
	if m.stopped || len(e.watchers) == 0 {
		m.mu.Unlock()
		return
	}
	cert, err := e.cert, e.err
	ws := make([]*watcher, 0, len(e.watchers))
	for w := range e.watchers {
		ws = append(ws, w)
	}
	m.mu.Unlock()
	for _, w := range ws {
		w.deliver(cert, err)
	}
}

func (w *watcher) deliver(cert *structs.IssuedCert, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.ended:
	case cert != nil:
		if !w.got || cert.ModifyIndex > w.sent {
			w.sent, w.got = cert.ModifyIndex, true
			c := *cert
			w.fn(&c, nil)
		}
	case err != nil && !w.got:
		w.fn(nil, err)
	}
}
