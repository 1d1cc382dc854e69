package proxycfg

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// eventBuffer is the capacity of a state's event channel: enough to absorb
// the burst of first results of its initial watches without making the
// sources wait, small enough to cost little per proxy.
const eventBuffer = 8

// maxDrain bounds how many queued events a state handles before it
// re-checks its timer and cancellation, so that a chatty source cannot
// starve them.
const maxDrain = 64

// kindHandler is the kind-specific part of a state machine. Its methods
// run on the state's goroutine only (start: before it starts).
type kindHandler interface {
	// start begins the kind's initial watches.
	start(s *state) error
	// handle applies a result of a watch the kind started and reports
	// whether the snapshot changed.
	handle(s *state, w *watch, ev UpdateEvent) bool
	// valid reports whether the kind's data is complete enough to deliver
	// a snapshot.
	valid() bool
	// newSnapshot returns a new snapshot: common (the parts every kind
	// has) with the kind's part set. It must not hand out anything the
	// handler will modify later: maps are copied, values it points to
	// are replaced, never mutated. Taking common by value lets a kind
	// allocate the snapshot together with its part.
	newSnapshot(common ConfigSnapshot) *ConfigSnapshot
}

// state is the state machine of one registered proxy. Everything below
// the "owned" line belongs to its goroutine (run), and to newState/start
// before that goroutine starts.
type state struct {
	m     *Manager
	id    ProxyID
	svc   *structs.NodeService
	token string
	sl    *slot

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	events chan UpdateEvent
	// dynamic carries run-time upstream sets (see offerDynamic).
	dynamic chan []string

	// --- owned by the state's goroutine ---
	reg      registry
	kind     kindHandler
	roots    *structs.IndexedCARoots
	mesh     *structs.MeshConfigEntry
	meshSet  bool
	dirty    bool // changed since the last delivered snapshot
	timer    *time.Timer
	armed    bool // timer running
	reserved bool // a rate-limit token is reserved
	// delivered is when the last snapshot was published (zero: never);
	// the coalescing window runs from it.
	delivered time.Time
}

func newState(m *Manager, id ProxyID, svc *structs.NodeService, token string, sl *slot) *state {
	ctx, cancel := context.WithCancel(context.Background())
	s := &state{
		m: m, id: id, svc: svc, token: token, sl: sl,
		ctx: ctx, cancel: cancel,
		done:    make(chan struct{}),
		events:  make(chan UpdateEvent, eventBuffer),
		dynamic: make(chan []string, 1),
		reg:     newRegistry(),
	}
	switch svc.Kind {
	case structs.ServiceKindConnectProxy:
		// Callers hold Manager.mu, which guards sl.dynamic; the slice is
		// never modified once stored.
		s.kind = &connectProxy{dynamic: sl.dynamic}
	case structs.ServiceKindIngressGateway:
		s.kind = &ingressGateway{}
	case structs.ServiceKindTerminatingGateway:
		s.kind = &terminatingGateway{}
	case structs.ServiceKindMeshGateway:
		s.kind = &meshGateway{}
	}
	return s
}

// start begins the watches every kind needs (roots, mesh entry), then the
// kind's own.
func (s *state) start() error {
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchRoots}, nil, func(ctx context.Context, corr string) error {
		return s.m.ds.CARoots.Notify(ctx, &structs.DCSpecificRequest{QueryOptions: s.query()}, corr, s.events)
	}); err != nil {
		return fmt.Errorf("roots watch: %w", err)
	}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchMesh}, nil, func(ctx context.Context, corr string) error {
		req := &structs.ConfigEntryQuery{Kind: structs.MeshConfig, Name: structs.MeshConfigMesh, QueryOptions: s.query()}
		return s.m.ds.ConfigEntry.Notify(ctx, req, corr, s.events)
	}); err != nil {
		return fmt.Errorf("mesh watch: %w", err)
	}
	return s.kind.start(s)
}

// stop cancels every watch and waits for the goroutine to end.
func (s *state) stop() {
	s.cancel()
	<-s.done
}

// query is the QueryOptions of the proxy's requests in the local
// datacenter.
func (s *state) query() structs.QueryOptions {
	return structs.QueryOptions{Datacenter: s.m.cfg.Datacenter, Token: s.token}
}

// log returns the manager's logger with the proxy's identity. Built on
// demand (it allocates) so that idle proxies cost nothing for logging.
func (s *state) log() *slog.Logger {
	return s.m.logger.With("proxy", s.id.String(), "kind", string(s.svc.Kind))
}

// run is the state's goroutine: it applies events, and delivers a
// snapshot once the coalescing window (and the rate limit) allow.
func (s *state) run() {
	defer s.m.wg.Done()
	defer close(s.done)
	defer s.shutdown()
	for {
		var timerC <-chan time.Time
		if s.armed {
			timerC = s.timer.C
		}
		select {
		case <-s.ctx.Done():
			return
		case ev := <-s.events:
			s.handleEvent(ev)
			s.drain()
			s.schedule()
		case names := <-s.dynamic:
			s.applyDynamic(names)
			s.schedule()
		case <-timerC:
			s.armed = false
			s.deliver()
		}
	}
}

// shutdown releases what the goroutine holds. The watches' contexts are
// children of s.ctx, already cancelled.
func (s *state) shutdown() {
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.reserved && s.m.limiter != nil {
		s.m.limiter.unreserve()
	}
}

// drain applies the events already queued, so that a burst that arrived
// together is one change.
func (s *state) drain() {
	for range maxDrain {
		select {
		case ev := <-s.events:
			s.handleEvent(ev)
		default:
			return
		}
	}
}

// handleEvent applies one event. Events of watches no longer running
// (cancelled while their result was in flight) are dropped.
func (s *state) handleEvent(ev UpdateEvent) {
	w := s.reg.byCorr[ev.CorrelationID]
	if w == nil {
		return
	}
	if ev.Err != nil {
		// Debug only: the source logs its own failure once per query,
		// and a failing query shared by 500 proxies must not log 500
		// times.
		s.log().Debug("proxycfg: watch failed; keeping the last result", "watch", ev.CorrelationID, "error", ev.Err)
		return
	}
	s.m.eventsHandled.Add(1)
	changed := false
	switch w.kind {
	case watchRoots:
		if r, ok := resultAs[structs.IndexedCARoots](s, ev); ok {
			s.roots, changed = r, true
		}
	case watchMesh:
		if r, ok := resultAs[structs.ConfigEntryResponse](s, ev); ok {
			mesh, _ := r.Entry.(*structs.MeshConfigEntry)
			s.mesh, s.meshSet, changed = mesh, true, true
		}
	default:
		changed = s.kind.handle(s, w, ev)
	}
	if changed {
		s.dirty = true
	}
}

// store sets *dst to the event's result when it is a *T (see resultAs)
// and reports whether it was: the whole handling of a watch whose result
// is kept as it is.
func store[T any](s *state, ev UpdateEvent, dst **T) bool {
	r, ok := resultAs[T](s, ev)
	if ok {
		*dst = r
	}
	return ok
}

// resultAs returns the event's result as *T, logging a source that broke
// its contract (wrong type, or nil).
func resultAs[T any](s *state, ev UpdateEvent) (*T, bool) {
	r, ok := ev.Result.(*T)
	if !ok || r == nil {
		s.log().Error("proxycfg: unexpected result type", "watch", ev.CorrelationID,
			"type", fmt.Sprintf("%T", ev.Result), "want", fmt.Sprintf("%T", r))
		return nil, false
	}
	return r, true
}

// valid reports whether a snapshot may be delivered.
func (s *state) valid() bool {
	return s.roots != nil && s.meshSet && s.kind.valid()
}

// schedule delivers a change at once when the last snapshot went out a
// whole coalescing window ago (or coalescing is off), and otherwise arms
// the timer for the end of that window. So an isolated change costs no
// delay, and a burst costs at most two snapshots: its first event, then
// everything else that arrived within the window. Consul instead holds
// every change for its window (200 ms) before it builds anything.
func (s *state) schedule() {
	if !s.dirty || s.armed || !s.valid() {
		return
	}
	if s.m.cfg.Coalesce < 0 {
		s.deliver()
		return
	}
	if wait := s.m.cfg.Coalesce - time.Since(s.delivered); wait > 0 {
		s.arm(wait)
		return
	}
	s.deliver()
}

func (s *state) arm(d time.Duration) {
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	s.armed = true
}

// deliver builds and publishes a snapshot, first waiting for a
// rate-limit token if the manager has a limit.
func (s *state) deliver() {
	if !s.dirty || !s.valid() {
		return
	}
	if lim := s.m.limiter; lim != nil && !s.reserved {
		if d := lim.reserve(); d > 0 {
			s.reserved = true
			s.arm(d)
			return
		}
	}
	s.reserved = false
	s.dirty = false
	s.delivered = time.Now()
	if s.sl.publish(s, s.build()) {
		s.m.snapshotsDelivered.Add(1)
	}
}

// build returns a fresh snapshot of the current state.
func (s *state) build() *ConfigSnapshot {
	return s.kind.newSnapshot(ConfigSnapshot{
		ProxyID:               s.id,
		Kind:                  s.svc.Kind,
		Service:               s.svc,
		Datacenter:            s.m.cfg.Datacenter,
		Roots:                 s.roots,
		MeshConfig:            s.mesh,
		IntentionDefaultAllow: s.m.defaultAllow,
	})
}

// ensure starts (or keeps) a watch from the running state and reports
// whether a new one started. A refusal is logged: a data source only
// refuses a malformed request, which retrying would not fix.
func (s *state) ensure(k watchKey, req any, notify notifyFunc) bool {
	started, err := s.reg.ensure(s.ctx, k, req, notify)
	if err != nil {
		s.log().Error("proxycfg: data source refused a watch", "watch", k.kind.String(), "owner", k.owner, "key", k.key, "error", err)
	}
	return started
}

// watchOrLog is ensure when the caller does not care whether the watch
// is new.
func (s *state) watchOrLog(k watchKey, req any, notify notifyFunc) {
	s.ensure(k, req, notify)
}

// copyMap returns a copy of m with room for one more entry.
func copyMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
