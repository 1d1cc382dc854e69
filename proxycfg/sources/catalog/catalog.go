// Package catalog is the server's catalog config source (steps 3 to 7 of
// the flow in ARCHITECTURE.md): it serves proxies registered anywhere in
// the datacenter, not only to this agent, so that an Envoy may connect to
// a server rather than to its own agent.
//
// On Watch(proxy service ID, node, token):
//
//   - a proxy registered to this very agent is handed to the local config
//     source, which keeps it registered with the manager (and whose
//     snapshots are already pre-fetched);
//   - otherwise the source reads the proxy's registration from the state
//     store and keeps following it with a memdb WatchSet: it registers the
//     proxy with the manager (SourceCatalog, never overwriting a local
//     registration), re-registers it when the registration changes,
//     deregisters it when it disappears, and registers it again if it comes
//     back. A proxy that is not registered anywhere yet is waited for: its
//     Envoy often connects before the registration reaches the servers.
//
// Watchers of one ProxyID share one registration, reference-counted: when
// the last one cancels, the proxy is deregistered at once (its state
// machine and data watches stop).
package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New for a Config missing a required
	// field.
	ErrInvalidConfig = errors.New("catalog config source: invalid config")
	// ErrMissingServiceID is returned by Watch without a proxy service ID.
	ErrMissingServiceID = errors.New("catalog config source: proxy service ID is required")
	// ErrClosed is returned by Watch after Close.
	ErrClosed = errors.New("catalog config source: closed")
)

// Default retry bounds after a failed read of the store.
const (
	defaultRetryMin = 500 * time.Millisecond
	defaultRetryMax = 30 * time.Second
)

// LocalState is the part of the agent's local state the source checks.
type LocalState interface {
	ServiceExists(id string) bool
}

// LocalSource is the local config source a local proxy is handed to
// (*proxycfg/sources/local.Source).
type LocalSource interface {
	Watch(ctx context.Context, id proxycfg.ProxyID) (<-chan *proxycfg.ConfigSnapshot, error)
}

// Manager is the part of *proxycfg.Manager the source uses.
type Manager interface {
	Register(id proxycfg.ProxyID, svc *structs.NodeService, source proxycfg.ProxySource, token string, overwrite bool) error
	Deregister(id proxycfg.ProxyID, source proxycfg.ProxySource)
	Watch(id proxycfg.ProxyID) (<-chan *proxycfg.ConfigSnapshot, proxycfg.CancelFunc)
}

// Config holds what the source needs; every field but Logger and the
// retry bounds is required.
type Config struct {
	Logger *slog.Logger
	// NodeName is this agent's node.
	NodeName    string
	LocalState  LocalState
	LocalSource LocalSource
	Manager     Manager
	// Store returns the server's current state store (it is replaced by
	// a snapshot restore, so it is called for every read).
	Store func() *state.Store
	// RetryMin and RetryMax bound the backoff after a failed read.
	RetryMin, RetryMax time.Duration
}

// Source is the catalog config source. Close it before the manager.
type Source struct {
	cfg    Config
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	// sessions are the proxies being watched; last is the latest session
	// of each ProxyID (possibly stopping), whose end a new session waits
	// for, so that an old session's deregistration never undoes a new
	// one's registration.
	sessions map[proxycfg.ProxyID]*session
	last     map[proxycfg.ProxyID]*session
}

// session is one watched remote proxy: its watchers and the goroutine
// that keeps its registration in the manager.
type session struct {
	id     proxycfg.ProxyID
	count  int // guarded by Source.mu
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed once the goroutine deregistered and ended
}

// New checks the configuration.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.NodeName == "":
		return nil, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig)
	case cfg.LocalState == nil || cfg.LocalSource == nil:
		return nil, fmt.Errorf("%w: LocalState and LocalSource are required", ErrInvalidConfig)
	case cfg.Manager == nil:
		return nil, fmt.Errorf("%w: Manager is required", ErrInvalidConfig)
	case cfg.Store == nil:
		return nil, fmt.Errorf("%w: Store is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = defaultRetryMin
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(defaultRetryMax, cfg.RetryMin)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Source{
		cfg: cfg, logger: cfg.Logger, ctx: ctx, cancel: cancel,
		sessions: make(map[proxycfg.ProxyID]*session),
		last:     make(map[proxycfg.ProxyID]*session),
	}, nil
}

// Watch returns the snapshots of the proxy id (on this agent's node when
// id.Node is empty, fetched with id.Token) until ctx ends, when the
// channel is closed (as it is by the manager's Close). It returns at once;
// the channel delivers once the proxy is registered and its first snapshot
// is valid.
func (s *Source) Watch(ctx context.Context, id proxycfg.ProxyID) (<-chan *proxycfg.ConfigSnapshot, error) {
	if id.ServiceID == "" {
		return nil, ErrMissingServiceID
	}
	if id.Node == "" {
		id.Node = s.cfg.NodeName
	}
	if id.Node == s.cfg.NodeName && s.cfg.LocalState.ServiceExists(id.ServiceID) {
		return s.cfg.LocalSource.Watch(ctx, id)
	}
	sess, err := s.acquire(id)
	if err != nil {
		return nil, err
	}
	ch, cancelWatch := s.cfg.Manager.Watch(id)
	context.AfterFunc(ctx, func() {
		cancelWatch()
		s.release(sess)
	})
	return ch, nil
}

// acquire joins the session of id, starting it for the first watcher.
func (s *Source) acquire(id proxycfg.ProxyID) (*session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	sess := s.sessions[id]
	if sess == nil {
		var prev <-chan struct{}
		if p := s.last[id]; p != nil {
			prev = p.done
		}
		ctx, cancel := context.WithCancel(s.ctx)
		sess = &session{id: id, ctx: ctx, cancel: cancel, done: make(chan struct{})}
		s.sessions[id] = sess
		s.last[id] = sess
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.follow(sess, prev)
		}()
	}
	sess.count++
	return sess, nil
}

// release leaves a session; the last watcher stops it, which deregisters
// the proxy.
func (s *Source) release(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.count--
	if sess.count > 0 {
		return
	}
	if s.sessions[sess.id] == sess {
		delete(s.sessions, sess.id)
	}
	sess.cancel()
}

// follow keeps the manager's registration of one proxy equal to the
// catalog's until the session ends, then deregisters it.
func (s *Source) follow(sess *session, prev <-chan struct{}) {
	defer close(sess.done)
	defer func() {
		s.mu.Lock()
		if s.last[sess.id] == sess {
			delete(s.last, sess.id)
		}
		s.mu.Unlock()
	}()
	if prev != nil {
		select {
		case <-prev:
		case <-sess.ctx.Done():
			return
		}
	}
	id := sess.id
	registered := false
	defer func() {
		if registered {
			s.cfg.Manager.Deregister(id, proxycfg.SourceCatalog)
		}
	}()
	backoff := time.Duration(0)
	lastErr := ""
	for sess.ctx.Err() == nil {
		st := s.cfg.Store()
		ws := memdb.NewWatchSet()
		ws.Add(st.AbandonCh())
		svc, err := lookup(ws, st, id.Node, id.ServiceID)
		if err == nil {
			backoff = 0
			switch {
			case svc == nil && registered:
				s.cfg.Manager.Deregister(id, proxycfg.SourceCatalog)
				registered = false
			case svc != nil:
				err = s.cfg.Manager.Register(id, svc, proxycfg.SourceCatalog, id.Token, false)
				registered = registered || err == nil
			}
		}
		if err != nil {
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				s.logger.Warn("cannot serve proxy from the catalog", "proxy", id.String(), "error", err)
			}
			if errors.Is(err, proxycfg.ErrUnsupportedKind) || errors.Is(err, proxycfg.ErrInvalidProxy) {
				// Only a new registration can fix these: wait for it.
				err = nil
			}
		} else {
			lastErr = ""
		}
		if err != nil {
			backoff = min(max(2*backoff, s.cfg.RetryMin), s.cfg.RetryMax)
			t := time.NewTimer(backoff)
			select {
			case <-sess.ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		if ws.WatchCtx(sess.ctx) != nil {
			return
		}
	}
}

// lookup reads the proxy's registration (nil when absent), watching that
// registration only: watching the node's whole service list woke every
// proxy of a node on every registration there, each reading (and copying)
// all of them, O(N^2) in a burst of N sidecars.
func lookup(ws memdb.WatchSet, st *state.Store, node, serviceID string) (*structs.NodeService, error) {
	return st.NodeService(ws, node, serviceID)
}

// Close stops following every proxy (deregistering them) and waits for
// the goroutines. Watch fails afterwards; cancel functions handed out
// stay safe to call.
func (s *Source) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}
