// Package logmonitor copies an agent's log records to live subscribers, for
// /v1/agent/monitor: a slog.Handler wrapper hands every record to the
// agent's own handler and, formatted at each subscriber's level and format,
// to every subscriber.
package logmonitor

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by Subscribe once the hub is closed (the agent is
// stopping).
var ErrClosed = errors.New("logmonitor: closed")

// Config configures a Hub.
type Config struct {
	// Buffer is how many lines a subscriber may fall behind before lines
	// are dropped for it; logging never waits for a subscriber. Zero
	// means 512, Consul's monitor buffer.
	Buffer int
	// ReplaceAttr is passed to each subscriber's formatter (for example to
	// name levels below debug "TRACE").
	ReplaceAttr func(groups []string, a slog.Attr) slog.Attr
}

// Hub fans records out to subscribers. Close ends every subscription.
type Hub struct {
	cfg Config
	// minLevel is the lowest level any subscriber asked for, so that
	// Enabled stays cheap; math.MaxInt64 with no subscriber.
	minLevel atomic.Int64

	mu sync.Mutex
	// subs and closed are guarded by mu.
	subs   map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	level slog.Level
	json  bool
	lines chan []byte
}

// New returns a hub with no subscriber.
func New(cfg Config) *Hub {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 512
	}
	h := &Hub{cfg: cfg, subs: map[*subscriber]struct{}{}}
	h.minLevel.Store(math.MaxInt64)
	return h
}

// Subscribe starts a subscription to the records at level and above,
// formatted as Consul's text lines (hclog's format, hclog.go) or as slog's
// JSON lines. The channel is closed when cancel
// is called or the hub is closed; cancel may be called more than once.
func (h *Hub) Subscribe(level slog.Level, json bool) (<-chan []byte, func(), error) {
	s := &subscriber{level: level, json: json, lines: make(chan []byte, h.cfg.Buffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, ErrClosed
	}
	h.subs[s] = struct{}{}
	h.updateMinLocked()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, ok := h.subs[s]; ok {
				delete(h.subs, s)
				close(s.lines)
				h.updateMinLocked()
			}
		})
	}
	return s.lines, cancel, nil
}

// Close ends every subscription and refuses new ones.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		delete(h.subs, s)
		close(s.lines)
	}
	h.updateMinLocked()
}

func (h *Hub) updateMinLocked() {
	lowest := int64(math.MaxInt64)
	for s := range h.subs {
		lowest = min(lowest, int64(s.level))
	}
	h.minLevel.Store(lowest)
}

// Handler wraps next: records go to next as before, and to the hub's
// subscribers.
func (h *Hub) Handler(next slog.Handler) slog.Handler {
	return &handler{hub: h, next: next}
}

// handler remembers the WithAttrs and WithGroup calls made on it, to replay
// them on each subscriber's formatter.
type handler struct {
	hub  *Hub
	next slog.Handler
	ops  []func(slog.Handler) slog.Handler
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l) || int64(l) >= h.hub.minLevel.Load()
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.next.Enabled(ctx, r.Level) {
		err = h.next.Handle(ctx, r)
	}
	if int64(r.Level) < h.hub.minLevel.Load() {
		return err
	}
	h.hub.mu.Lock()
	defer h.hub.mu.Unlock()
	for s := range h.hub.subs {
		if r.Level < s.level {
			continue
		}
		var buf bytes.Buffer
		opts := &slog.HandlerOptions{Level: s.level, ReplaceAttr: h.hub.cfg.ReplaceAttr}
		var f slog.Handler = newHCLogHandler(&buf, opts)
		if s.json {
			f = slog.NewJSONHandler(&buf, opts)
		}
		for _, op := range h.ops {
			f = op(f)
		}
		if f.Handle(ctx, r.Clone()) != nil {
			continue
		}
		select {
		case s.lines <- buf.Bytes():
		default: // the subscriber is behind: drop rather than block logging
		}
	}
	return err
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(h.next.WithAttrs(attrs), func(f slog.Handler) slog.Handler { return f.WithAttrs(attrs) })
}

func (h *handler) WithGroup(name string) slog.Handler {
	return h.with(h.next.WithGroup(name), func(f slog.Handler) slog.Handler { return f.WithGroup(name) })
}

func (h *handler) with(next slog.Handler, op func(slog.Handler) slog.Handler) slog.Handler {
	ops := append(append([]func(slog.Handler) slog.Handler(nil), h.ops...), op)
	return &handler{hub: h.hub, next: next, ops: ops}
}
