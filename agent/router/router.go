// Package router picks the server a client agent sends each RPC to. It
// learns the servers from Serf, sticks to one while it answers, and fails
// over to another when a call cannot reach it, retrying within a hold time
// so that a call made during an election or a server's death succeeds once
// the cluster is back.
package router

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

// Caller sends one RPC to one server address. The server package's
// ConnPool implements it.
type Caller interface {
	Call(ctx context.Context, addr, method string, args, reply any) error
}

// Config holds the router's dependencies.
type Config struct {
	Logger     *slog.Logger
	Datacenter string
	Caller     Caller
	// Retryable says whether a failed read means "try another server"
	// (transport failures, no leader yet).
	Retryable func(error) bool
	// RetryWrite says whether a failed write may be sent again: only when
	// it certainly changed nothing (rejected before a leader proposed it,
	// or never sent). Nil means never.
	RetryWrite func(error) bool
	// OutcomeUnknown says whether a failed write may have been applied
	// (sent, and no answer came back); the caller is then told so, never
	// "no leader". Nil means the error says so itself.
	OutcomeUnknown func(error) bool
	// HoldTimeout bounds how long one call keeps retrying (default 7s, as
	// Consul's rpc_hold_timeout).
	HoldTimeout time.Duration
}

// Router is safe for concurrent use.
type Router struct {
	cfg Config

	mu sync.Mutex
	// servers and current are guarded by mu. servers holds the alive
	// servers of our datacenter by address; current is the preferred one.
	servers map[string]string
	current string
}

// New returns a router that knows no servers yet.
func New(cfg Config) *Router {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HoldTimeout <= 0 {
		cfg.HoldTimeout = 7 * time.Second
	}
	if cfg.Retryable == nil {
		cfg.Retryable = func(error) bool { return false }
	}
	if cfg.RetryWrite == nil {
		cfg.RetryWrite = func(error) bool { return false }
	}
	if cfg.OutcomeUnknown == nil {
		cfg.OutcomeUnknown = func(error) bool { return false }
	}
	return &Router{cfg: cfg, servers: make(map[string]string)}
}

// Update replaces the server list from Serf's member list.
func (r *Router) Update(members []serf.Member) {
	servers := make(map[string]string)
	for _, m := range members {
		meta, ok := gossip.ParseServer(m)
		if !ok || m.Status != serf.StatusAlive || (r.cfg.Datacenter != "" && meta.Datacenter != r.cfg.Datacenter) {
			continue
		}
		servers[meta.Addr] = meta.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.servers = servers
	if _, ok := servers[r.current]; !ok {
		r.current = ""
	}
}

// Servers lists the known server addresses, sorted.
func (r *Router) Servers() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.servers))
	for a := range r.servers {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// pick returns the preferred server, choosing one at random when there is
// none (spreading client agents over the servers).
func (r *Router) pick() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current != "" {
		return r.current
	}
	if len(r.servers) == 0 {
		return ""
	}
	addrs := make([]string, 0, len(r.servers))
	for a := range r.servers {
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	r.current = addrs[rand.IntN(len(addrs))] //nolint:gosec // spreading agents over servers needs no unpredictability
	return r.current
}

// failed moves away from addr after a failed call, to a different server
// when there is one.
func (r *Router) failed(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.current != addr {
		return
	}
	var others []string
	for a := range r.servers {
		if a != addr {
			others = append(others, a)
		}
	}
	if len(others) == 0 {
		r.current = ""
		return
	}
	sort.Strings(others)
	r.current = others[rand.IntN(len(others))] //nolint:gosec // spreading agents over servers needs no unpredictability
}

// RPC sends the call to a server, failing over and retrying within the
// hold timeout while the error is retryable. A write gets its request ID
// before the first attempt and is sent again only while it certainly
// changed nothing; once it may have reached a server, the caller learns
// that its outcome is unknown (the server it reached retries where that
// is safe).
func (r *Router) RPC(ctx context.Context, method string, args, reply any) error {
	hold := time.NewTimer(r.cfg.HoldTimeout)
	defer hold.Stop()
	backoff := 20 * time.Millisecond
	write := structs.EnsureRequestID(args) != ""
	var lastErr error
	for {
		addr := r.pick()
		if addr != "" {
			err := r.cfg.Caller.Call(ctx, addr, method, args, reply)
			if err == nil {
				return nil
			}
			if write && !r.cfg.RetryWrite(err) {
				if r.cfg.OutcomeUnknown(err) && !structs.MaybeApplied(err) {
					return fmt.Errorf("%w: %v", structs.ErrOutcomeUnknown, err) //nolint:errorlint // the cause stays text: an unknown outcome must not also match "no leader"
				}
				return err
			}
			if !write && !r.cfg.Retryable(err) {
				return err
			}
			lastErr = err
			r.cfg.Logger.Debug("rpc failed, trying another server", "server", addr, "method", method, "error", err)
			r.failed(addr)
		} else {
			lastErr = structs.ErrNoServers
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-hold.C:
			return lastErr
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}
