// Package fanout is the engine shared by the data-source implementations
// of proxycfg/datasources: one goroutine per distinct question (the
// "query"), whose results are handed, read-only and shared, to every
// subscriber asking that question.
//
// A data source's Notify becomes Group.Subscribe(ctx, key, ...): the
// first subscriber of a key starts the query's runner (a blocking RPC
// loop, a memdb WatchSet loop, ...); later subscribers of the same key
// join it and get its current result at once; the runner stops when the
// last subscriber's ctx ends. A subscription costs a small struct and a
// context.AfterFunc registration, never a goroutine of its own, so that
// thousands of proxies watching the same upstream cost one query.
//
// Results equal to the previous one (ignoring an embedded
// structs.QueryMeta: index and freshness) are not sent again: a write that
// moves an index without changing a proxy's data must not make that proxy
// build a new snapshot.
package fanout

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/trellis-mesh/trellis/proxycfg"
)

// ErrClosed is returned by Subscribe after Close.
var ErrClosed = errors.New("proxycfg data source: closed")

// Sink receives what a runner fetched. Both methods may block while
// subscribers are slow to receive; both return promptly once the runner's
// ctx is done.
type Sink interface {
	// Result publishes a successful fetch. The value is shared with every
	// subscriber: the runner must not modify it afterwards.
	Result(v any)
	// Error publishes a failed fetch: it is logged (once per change of
	// the error, not per subscriber) and sent to the subscribers, who
	// keep their last good value.
	Error(err error)
}

// Runner fetches the answer to one question until ctx is done, reporting
// every result and failure to out. It owns its retry policy (see Backoff).
// A runner may instead hand out to a callback that another component
// owns and calls until ctx ends, and return at once: the query lives as
// long as its subscribers, not as long as its runner, and holds no
// goroutine while it waits.
type Runner func(ctx context.Context, out Sink)

// Config holds what a Group needs.
type Config struct {
	// Name tells the group's data sources apart in logs ("remote",
	// "serverstate", ...).
	Name   string
	Logger *slog.Logger
}

// Stats are counters for tests and metrics.
type Stats struct {
	// Queries is the number of running queries (distinct questions);
	// Subscribers the number of subscriptions across them.
	Queries     int
	Subscribers int
	// QueriesStarted counts every query (runner) ever started.
	QueriesStarted uint64
}

// Group runs deduplicated queries. It is safe for concurrent use. Close
// stops every runner and waits for every goroutine of the group.
type Group struct {
	name   string
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	// wg tracks runners and catch-up deliveries.
	wg sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	queries map[string]*query

	started atomic.Uint64
}

// NewGroup returns an empty group.
func NewGroup(cfg Config) *Group {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Group{
		name:    cfg.Name,
		logger:  cfg.Logger,
		ctx:     ctx,
		cancel:  cancel,
		queries: make(map[string]*query),
	}
}

// query is one distinct question and its subscribers.
type query struct {
	g      *Group
	key    string
	what   string // for logs: the question without its key's details
	cancel context.CancelFunc

	mu   sync.Mutex
	subs map[*sub]struct{}
	// version numbers the events published; a subscriber never receives
	// an older version after a newer one.
	version  uint64
	value    any
	hasValue bool
	err      error // the last failure, cleared by a result
	errSent  bool  // err was published (and logged)
}

// sub is one Notify call.
type sub struct {
	ctx  context.Context
	corr string
	ch   chan<- proxycfg.UpdateEvent

	// mu serialises the sends to this subscriber (the runner and a
	// catch-up delivery may race); sent is the version last delivered.
	mu   sync.Mutex
	sent uint64
}

// Subscribe adds a subscriber to the query named key, starting the query
// with newRunner when it is the first. what names the question in logs
// (it must not contain a token). Events go to ch tagged with corr until
// ctx is done. Subscribe never sends on ch itself.
func (g *Group) Subscribe(ctx context.Context, key, what, corr string, ch chan<- proxycfg.UpdateEvent, newRunner func() Runner) error {
	s := &sub{ctx: ctx, corr: corr, ch: ch}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	q := g.queries[key]
	if q == nil {
		qctx, cancel := context.WithCancel(g.ctx)
		q = &query{g: g, key: key, what: what, cancel: cancel, subs: make(map[*sub]struct{})}
		g.queries[key] = q
		g.started.Add(1)
		run := newRunner()
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			run(qctx, q)
		}()
	}
	q.mu.Lock()
	q.subs[s] = struct{}{}
	ev, version, catchUp := q.currentLocked(s)
	q.mu.Unlock()
	if catchUp {
		// The runner may be blocked in a long fetch: hand the current
		// value over without waiting for it. This goroutine lives only
		// until the send completes or the subscriber goes away.
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			g.deliver(s, version, ev)
		}()
	}
	g.mu.Unlock()
	context.AfterFunc(ctx, func() { g.unsubscribe(q, s) })
	return nil
}

// currentLocked is the event a new subscriber gets at once: the last
// good value, else the last published failure.
func (q *query) currentLocked(s *sub) (proxycfg.UpdateEvent, uint64, bool) {
	switch {
	case q.hasValue:
		return proxycfg.UpdateEvent{CorrelationID: s.corr, Result: q.value}, q.version, true
	case q.errSent:
		return proxycfg.UpdateEvent{CorrelationID: s.corr, Err: q.err}, q.version, true
	}
	return proxycfg.UpdateEvent{}, 0, false
}

// unsubscribe removes s; the last subscriber to leave stops the query.
func (g *Group) unsubscribe(q *query, s *sub) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q.mu.Lock()
	delete(q.subs, s)
	empty := len(q.subs) == 0
	q.mu.Unlock()
	if empty {
		if g.queries[q.key] == q {
			delete(g.queries, q.key)
		}
		q.cancel()
	}
}

// Result implements Sink.
func (q *query) Result(v any) {
	q.mu.Lock()
	if q.hasValue && q.err == nil && SameResult(q.value, v) {
		q.mu.Unlock()
		return
	}
	if q.err != nil && q.errSent {
		q.g.logger.Info("proxycfg data source recovered", "source", q.g.name, "query", q.what)
	}
	q.value, q.hasValue, q.err, q.errSent = v, true, nil, false
	q.publishLocked(proxycfg.UpdateEvent{Result: v})
}

// Error implements Sink. Repeats of the same failure are neither logged
// nor sent again.
func (q *query) Error(err error) {
	q.mu.Lock()
	if q.err != nil && q.errSent && q.err.Error() == err.Error() {
		q.mu.Unlock()
		return
	}
	q.g.logger.Warn("proxycfg data source failed; retrying", "source", q.g.name, "query", q.what, "error", err)
	q.err, q.errSent = err, true
	q.publishLocked(proxycfg.UpdateEvent{Err: err})
}

// publishLocked numbers ev and sends it to every subscriber. It is called
// with q.mu held and releases it: sends happen without any group lock, so
// that a subscriber busy calling Notify (which takes those locks) never
// deadlocks with the runner feeding it.
func (q *query) publishLocked(ev proxycfg.UpdateEvent) {
	q.version++
	version := q.version
	subs := make([]*sub, 0, len(q.subs))
	for s := range q.subs {
		subs = append(subs, s)
	}
	q.mu.Unlock()
	for _, s := range subs {
		e := ev
		e.CorrelationID = s.corr
		q.g.deliver(s, version, e)
	}
}

// deliver sends one event to s unless s already has a newer one, giving
// up when s or the group ends.
func (g *Group) deliver(s *sub, version uint64, ev proxycfg.UpdateEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent >= version || s.ctx.Err() != nil {
		return
	}
	// A subscriber's channel usually has room: try that first, which
	// costs one channel's lock instead of the select's three (at 1,000
	// subscribers of one query, a change is a thousand sends).
	select {
	case s.ch <- ev:
		s.sent = version
		return
	default:
	}
	select {
	case s.ch <- ev:
		s.sent = version
	case <-s.ctx.Done():
	case <-g.ctx.Done():
	}
}

// Stats returns the group's counters.
func (g *Group) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := Stats{Queries: len(g.queries), QueriesStarted: g.started.Load()}
	for _, q := range g.queries {
		q.mu.Lock()
		st.Subscribers += len(q.subs)
		q.mu.Unlock()
	}
	return st
}

// Close stops every query and waits for every goroutine of the group.
// Subscribe fails afterwards. Calling it again is harmless.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}
