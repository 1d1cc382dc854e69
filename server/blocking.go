package server

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Blocking query limits, as Consul's.
const (
	defaultQueryTime = 5 * time.Minute
	maxQueryTime     = 10 * time.Minute
	// jitterFraction spreads the wake-up of many clients that started
	// waiting together.
	jitterFraction = 16
)

// queryFn runs one read against the store, registering the channels that
// signal a change of its result in ws, and fills the reply (including the
// index in meta).
type queryFn func(ws memdb.WatchSet, st *state.Store) error

// blockingQuery runs fn once, or, when the caller asked for a minimum index,
// re-runs it each time its watched data changes until the result's index
// passes that index or the wait time elapses. A snapshot restore abandons
// the store, which wakes the watch so the query re-runs on the new store.
func (s *Server) blockingQuery(ctx context.Context, opts *structs.QueryOptions, meta *structs.QueryMeta, fn queryFn) error {
	var deadline time.Time
	if opts.MinQueryIndex > 0 {
		wait := opts.MaxQueryTime
		if wait <= 0 {
			wait = defaultQueryTime
		}
		if wait > maxQueryTime {
			wait = maxQueryTime
		}
		deadline = time.Now().Add(wait + rand.N(wait/jitterFraction+1)) //nolint:gosec // jitter to spread timers, not a secret
	}
	for woken := false; ; woken = true {
		if woken {
			if err := recheckACL(ctx); err != nil {
				return err
			}
		}
		st := s.fsm.State()
		ws := memdb.NewWatchSet()
		ws.Add(st.AbandonCh())
		// Shutdown wakes every waiter so that it answers and lets go.
		ws.Add(s.ctx.Done())
		if opts.MinQueryIndex > 0 {
			s.watchToken(ws, st, opts.Token)
		}
		err := fn(ws, st)
		s.setQueryMeta(meta)
		if meta.Index < 1 {
			meta.Index = 1
		}
		if err != nil || opts.MinQueryIndex == 0 || s.ctx.Err() != nil {
			return err
		}
		// Past the client's index, or behind it (the store was restored from
		// an older snapshot): answer now so the client resets.
		if meta.Index != opts.MinQueryIndex {
			return nil
		}
		wctx, cancel := context.WithDeadline(ctx, deadline)
		werr := ws.WatchCtx(wctx)
		cancel()
		if werr != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			// The wait elapsed: the current result stands.
			return nil
		}
	}
}

// setQueryMeta records how fresh this server's view is.
func (s *Server) setQueryMeta(m *structs.QueryMeta) {
	if s.IsLeader() {
		m.LastContact = 0
		m.KnownLeader = true
		return
	}
	m.LastContact = time.Since(s.raft.LastContact())
	m.KnownLeader = s.LeaderAddr() != ""
}
