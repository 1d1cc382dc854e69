package proxycfg

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// DefaultCoalesce is the default coalescing window: a proxy gets at most
// one snapshot per window, plus the first change after a quiet window at
// once. A change within the window of the last snapshot waits for the
// window's end, together with everything else that arrives meanwhile.
// Consul holds every change for 200ms.
const DefaultCoalesce = 50 * time.Millisecond

// ProxyID identifies a proxy the manager serves: the node it is registered
// on, its service ID there, and the ACL token its xDS stream presents (so
// that two streams with different tokens never share ACL-filtered data).
type ProxyID struct {
	Node      string
	ServiceID string
	Token     string
}

// String names the proxy for logs. It leaves the token out on purpose.
func (id ProxyID) String() string { return id.Node + "/" + id.ServiceID }

// ProxySource says which config source registered a proxy. Sources are
// ordered by the overwrite flag of Register, not by value: the local
// source registers with overwrite, the catalog source without.
type ProxySource string

// The config sources of ARCHITECTURE.md.
const (
	// SourceLocal is proxycfg/sources/local: proxies registered to this
	// agent.
	SourceLocal ProxySource = "local"
	// SourceCatalog is proxycfg/sources/catalog: proxies registered
	// elsewhere, served by a server on behalf of their agent.
	SourceCatalog ProxySource = "catalog"
)

// CancelFunc ends a Watch: the channel is closed and no further snapshot
// is sent. Calling it more than once is harmless.
type CancelFunc func()

// RateLimit is a token bucket over snapshot deliveries, shared by every
// proxy of a manager: it bounds the rate at which xDS streams receive new
// configuration (and so the CPU spent generating it) during storms such as
// a CA rotation. A proxy never skips a change because of it: it receives
// its latest snapshot as soon as a token is available.
type RateLimit struct {
	// PerSecond is the sustained rate; zero (or negative) disables the
	// limit.
	PerSecond float64
	// Burst is the bucket size; zero means max(1, PerSecond).
	Burst int
}

// Config holds what a Manager needs. DataSources and Datacenter are
// required.
type Config struct {
	Logger      *slog.Logger
	DataSources DataSources
	// Datacenter is this agent's datacenter: every request is made in it,
	// and upstreams without an explicit datacenter resolve in it.
	Datacenter string
	// DefaultIntentionPolicy ("allow" or "deny"; empty means allow)
	// decides connections no intention matches. Snapshots carry it as
	// IntentionDefaultAllow.
	DefaultIntentionPolicy string
	// Coalesce is the coalescing window (see DefaultCoalesce, used when
	// zero). Negative disables coalescing: a change is delivered as soon
	// as the events already queued have been handled.
	Coalesce time.Duration
	// RateLimit limits snapshot deliveries across all proxies; the zero
	// value is off (the -dev default).
	RateLimit RateLimit
}

// Manager runs one state machine per registered proxy and hands the
// snapshots they build to watchers. It is safe for concurrent use.
//
// Register and Deregister are for config sources; Watch is for the xDS
// server. A proxy may be watched before it is registered (an Envoy often
// connects before its registration reaches the server it talks to): the
// watch waits and receives snapshots once the proxy registers.
type Manager struct {
	cfg          Config
	logger       *slog.Logger
	ds           *DataSources
	defaultAllow bool
	limiter      *tokenBucket
	// endpoints are the endpoint maps the state machines share; a
	// separate object, so that the cleanups of results (which refer to
	// it) do not keep a closed Manager alive.
	endpoints *endpointMaps

	mu     sync.Mutex
	closed bool
	slots  map[ProxyID]*slot

	// wg tracks every state machine goroutine.
	wg sync.WaitGroup

	eventsHandled      atomic.Uint64
	snapshotsDelivered atomic.Uint64
}

// New returns a Manager. Call Close to stop every state machine.
func New(cfg Config) (*Manager, error) {
	if err := cfg.DataSources.validate(); err != nil {
		return nil, err
	}
	if cfg.Datacenter == "" {
		return nil, fmt.Errorf("%w: Datacenter is required", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Coalesce == 0 {
		cfg.Coalesce = DefaultCoalesce
	}
	m := &Manager{
		cfg:          cfg,
		logger:       cfg.Logger,
		defaultAllow: !strings.EqualFold(cfg.DefaultIntentionPolicy, "deny"),
		slots:        make(map[ProxyID]*slot),
		endpoints:    new(endpointMaps),
	}
	m.ds = &m.cfg.DataSources
	if cfg.RateLimit.PerSecond > 0 {
		m.limiter = newTokenBucket(cfg.RateLimit.PerSecond, cfg.RateLimit.Burst, time.Now)
	}
	return m, nil
}

// Register starts (or keeps) the state machine of a proxy or gateway
// service. svc is copied; the caller may reuse it. token is the ACL token
// the proxy's data is fetched with.
//
//   - A proxy registered by another source stays as it is unless
//     overwrite is set (the local source overwrites the catalog source,
//     never the reverse); Register returns nil either way, because the
//     proxy is served.
//   - Re-registering an unchanged definition (ignoring Raft indexes) with
//     the same token changes nothing: no watch restarts, no new snapshot.
//   - A changed definition or token restarts the proxy's state machine:
//     the old one's watches are cancelled and a new state starts from
//     scratch; watchers stay attached and receive the new state's first
//     valid snapshot.
//
// It fails with ErrUnsupportedKind, ErrInvalidProxy, ErrClosed, or the
// error of a data source refusing one of the initial watches.
func (m *Manager) Register(id ProxyID, svc *structs.NodeService, source ProxySource, token string, overwrite bool) error {
	if err := validateProxy(id, svc); err != nil {
		return err
	}
	svc = svc.Clone()

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	sl := m.slots[id]
	var old *state
	if sl != nil && sl.state != nil {
		old = sl.state
		if sl.source != source && !overwrite {
			m.mu.Unlock()
			return nil
		}
		if old.token == token && sameService(old.svc, svc) {
			sl.source = source
			m.mu.Unlock()
			return nil
		}
	}
	if sl == nil {
		sl = &slot{watchers: make(map[*watcher]struct{})}
	}
	st := newState(m, id, svc, token, sl)
	if err := st.start(); err != nil {
		st.cancel()
		m.mu.Unlock()
		return fmt.Errorf("proxycfg: register %s: %w", id, err)
	}
	m.slots[id] = sl
	sl.source = source
	sl.mu.Lock()
	sl.state = st
	sl.snap = nil // the old state's snapshot describes the old definition
	sl.mu.Unlock()
	m.wg.Add(1)
	go st.run()
	m.mu.Unlock()

	if old != nil {
		old.stop()
	}
	return nil
}

// Deregister stops the state machine of a proxy registered by source
// (another source's registration is left alone) and waits for it: when
// Deregister returns, every data-source watch of the proxy is cancelled.
//
// Watchers are deliberately left attached, without a snapshot: the proxy
// may be registered again (a source handing over to another, a quick
// re-registration), and closing their channels would look like an error
// to the xDS server. They receive snapshots again if it registers; they
// end when they cancel or the manager closes.
func (m *Manager) Deregister(id ProxyID, source ProxySource) {
	m.mu.Lock()
	sl := m.slots[id]
	if sl == nil || sl.state == nil || sl.source != source {
		m.mu.Unlock()
		return
	}
	old := sl.state
	sl.mu.Lock()
	sl.state = nil
	sl.snap = nil
	empty := len(sl.watchers) == 0
	sl.mu.Unlock()
	sl.source = ""
	if empty {
		delete(m.slots, id)
	}
	m.mu.Unlock()
	old.stop()
}

// Watch returns a channel of the proxy's snapshots and the function that
// ends the watch. The channel holds one snapshot: the current valid one at
// once if there is one, then always the latest (a watcher that falls
// behind skips intermediate snapshots; it never slows a state machine).
// The channel is closed by cancel and by Close.
func (m *Manager) Watch(id ProxyID) (<-chan *ConfigSnapshot, CancelFunc) {
	w := &watcher{ch: make(chan *ConfigSnapshot, 1)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		close(w.ch)
		return w.ch, func() {}
	}
	sl := m.slots[id]
	if sl == nil {
		sl = &slot{watchers: make(map[*watcher]struct{})}
		m.slots[id] = sl
	}
	sl.mu.Lock()
	sl.watchers[w] = struct{}{}
	if sl.snap != nil {
		w.ch <- sl.snap
	}
	sl.mu.Unlock()

	var once sync.Once
	return w.ch, func() { once.Do(func() { m.cancelWatch(id, sl, w) }) }
}

func (m *Manager) cancelWatch(id ProxyID, sl *slot, w *watcher) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sl.mu.Lock()
	if _, ok := sl.watchers[w]; ok {
		delete(sl.watchers, w)
		close(w.ch)
	}
	empty := sl.state == nil && len(sl.watchers) == 0
	sl.mu.Unlock()
	if empty && m.slots[id] == sl {
		delete(m.slots, id)
	}
}

// Close stops every state machine, waits for their goroutines and closes
// every watcher's channel. Register fails and Watch returns a closed
// channel afterwards. Calling it again is harmless.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return
	}
	m.closed = true
	var states []*state
	for _, sl := range m.slots {
		sl.mu.Lock()
		if sl.state != nil {
			states = append(states, sl.state)
			sl.state = nil
		}
		sl.snap = nil
		for w := range sl.watchers {
			close(w.ch)
		}
		sl.watchers = nil
		sl.mu.Unlock()
	}
	m.slots = nil
	m.mu.Unlock()
	for _, st := range states {
		st.cancel()
	}
	m.wg.Wait()
}

// Stats are counters for tests, benchmarks and metrics.
type Stats struct {
	// Proxies is the number of registered proxies (running state
	// machines); Watchers the number of open watches.
	Proxies  int
	Watchers int
	// EventsHandled counts data-source results applied to a state
	// (errors and events of cancelled watches excluded).
	EventsHandled uint64
	// SnapshotsDelivered counts snapshots built and handed to watchers.
	SnapshotsDelivered uint64
}

// Stats returns the manager's counters.
func (m *Manager) Stats() Stats {
	s := Stats{
		EventsHandled:      m.eventsHandled.Load(),
		SnapshotsDelivered: m.snapshotsDelivered.Load(),
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, sl := range m.slots {
		sl.mu.Lock()
		if sl.state != nil {
			s.Proxies++
		}
		s.Watchers += len(sl.watchers)
		sl.mu.Unlock()
	}
	return s
}

// validateProxy checks what every state machine relies on.
func validateProxy(id ProxyID, svc *structs.NodeService) error {
	if svc == nil {
		return fmt.Errorf("%w: no service", ErrInvalidProxy)
	}
	switch svc.Kind {
	case structs.ServiceKindConnectProxy, structs.ServiceKindMeshGateway,
		structs.ServiceKindIngressGateway, structs.ServiceKindTerminatingGateway:
	default:
		return fmt.Errorf("%w: %q (service %q)", ErrUnsupportedKind, svc.Kind, svc.ID)
	}
	switch {
	case svc.Service == "":
		return fmt.Errorf("%w: service %q has no name", ErrInvalidProxy, svc.ID)
	case id.ServiceID == "" || id.ServiceID != svc.ID:
		return fmt.Errorf("%w: proxy ID %q does not match service ID %q", ErrInvalidProxy, id.ServiceID, svc.ID)
	case svc.Kind == structs.ServiceKindConnectProxy && svc.Proxy.DestinationServiceName == "":
		return fmt.Errorf("%w: connect-proxy %q has no Proxy.DestinationServiceName", ErrInvalidProxy, svc.ID)
	}
	return nil
}
