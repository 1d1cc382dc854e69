package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trellis-mesh/trellis/internal/wait"
	"github.com/trellis-mesh/trellis/structs"
)

// Syncer defaults.
const (
	// DefaultAEInterval is Consul's anti-entropy interval for clusters of
	// up to aeScaleThreshold nodes.
	DefaultAEInterval = time.Minute
	// aeScaleThreshold is the cluster size above which the interval grows
	// (doubling with every doubling of the cluster).
	aeScaleThreshold = 128
	// DefaultRetryMin and DefaultRetryMax bound the backoff after a failed
	// sync round (servers unreachable, no leader during an election).
	DefaultRetryMin = 500 * time.Millisecond
	DefaultRetryMax = 15 * time.Second
	// DefaultServerUpStagger spreads the full syncs that TriggerFullSync
	// asks for (a server joined), as Consul does.
	DefaultServerUpStagger = 3 * time.Second
	// DefaultRPCTimeout bounds one RPC; a server holds a write for up to
	// 7s while it waits for a leader.
	DefaultRPCTimeout = 30 * time.Second
)

// SyncerConfig holds the syncer's dependencies. State and RPC are
// required, and the State's Config must give AdvertiseAddr (the node's
// catalog address).
type SyncerConfig struct {
	State *State
	// RPC reaches the servers: the agent's RPC client on a client agent,
	// the server itself on a server.
	RPC    structs.Caller
	Logger *slog.Logger
	// Interval is the base interval of full syncs (AEInterval); zero means
	// DefaultAEInterval.
	Interval time.Duration
	// ClusterSize returns the number of nodes in the cluster (Serf LAN
	// members); it scales the interval. Nil means 1.
	ClusterSize func() int
	// RetryMin..RetryMax bound the exponential backoff after a failed
	// round; zeros mean the defaults.
	RetryMin, RetryMax time.Duration
	// ServerUpStagger bounds the random delay of a TriggerFullSync.
	ServerUpStagger time.Duration
	// RPCTimeout bounds each RPC.
	RPCTimeout time.Duration
	// Tokens gives the ACL tokens of the syncer's requests, as Consul
	// sends them: the agent token for the node's own record and the reads
	// of a full sync, a service's or check's registration token for it,
	// the default token when that is empty. Nil sends none.
	Tokens Tokens
}

// Tokens are the agent's tokens the syncer sends (agent/token.Store).
type Tokens interface {
	AgentToken() string
	UserToken() string
}

// Syncer is the anti-entropy loop of one agent. It pushes every local
// change to the catalog at once, and every full-sync interval reads the
// catalog's view of the node and repairs drift in both directions. Create
// it with NewSyncer, Start it once the state is loaded, Stop it on
// shutdown. SyncFull and SyncChanges may also be called directly (they
// never run concurrently with the loop's own rounds).
type Syncer struct {
	cfg    SyncerConfig
	state  *State
	logger *slog.Logger

	// roundMu serialises sync rounds.
	roundMu sync.Mutex

	pauseMu  sync.Mutex
	paused   int
	resumeCh chan struct{}
	fullCh   chan struct{}

	startOnce sync.Once
	stopOnce  sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// NewSyncer checks the configuration; nothing runs until Start.
func NewSyncer(cfg SyncerConfig) (*Syncer, error) {
	if cfg.State == nil || cfg.RPC == nil {
		return nil, errors.New("local: SyncerConfig.State and RPC are required")
	}
	if cfg.State.cfg.AdvertiseAddr == "" {
		return nil, errors.New("local: the State's AdvertiseAddr is required to sync the node")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultAEInterval
	}
	if cfg.ClusterSize == nil {
		cfg.ClusterSize = func() int { return 1 }
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = DefaultRetryMin
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(DefaultRetryMax, cfg.RetryMin)
	}
	if cfg.ServerUpStagger <= 0 {
		cfg.ServerUpStagger = DefaultServerUpStagger
	}
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = DefaultRPCTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Syncer{
		cfg: cfg, state: cfg.State, logger: cfg.Logger,
		resumeCh: make(chan struct{}, 1),
		fullCh:   make(chan struct{}, 1),
		ctx:      ctx, cancel: cancel,
	}, nil
}

// Start runs the loop: a full sync first, then changes as they happen and
// full syncs every interval. A second Start does nothing.
func (sy *Syncer) Start() {
	sy.startOnce.Do(func() {
		sy.wg.Add(1)
		go func() {
			defer sy.wg.Done()
			sy.run()
		}()
	})
}

// Stop ends the loop (cancelling an RPC in flight) and waits for it.
func (sy *Syncer) Stop() {
	sy.stopOnce.Do(func() {
		sy.cancel()
		sy.wg.Wait()
	})
}

// Pause stops sync rounds until the matching Resume (pairs nest): the
// agent pauses while it loads or bulk-edits its state, so that the
// catalog never sees a half-loaded node.
func (sy *Syncer) Pause() {
	sy.pauseMu.Lock()
	defer sy.pauseMu.Unlock()
	sy.paused++
}

// Resume undoes one Pause; the last one lets the loop sync what changed
// meanwhile. An unbalanced Resume panics, as in Consul.
func (sy *Syncer) Resume() {
	sy.pauseMu.Lock()
	defer sy.pauseMu.Unlock()
	sy.paused--
	if sy.paused < 0 {
		panic("local: unbalanced Syncer.Resume")
	}
	if sy.paused == 0 {
		signal(sy.resumeCh)
	}
}

// Paused reports whether sync rounds are paused.
func (sy *Syncer) Paused() bool {
	sy.pauseMu.Lock()
	defer sy.pauseMu.Unlock()
	return sy.paused > 0
}

// TriggerFullSync asks for a full sync soon (within ServerUpStagger,
// randomly, so that a whole cluster reacting to the same event does not
// hit the servers at once): the agent calls it when a server joins.
func (sy *Syncer) TriggerFullSync() { signal(sy.fullCh) }

// AEScale is Consul's anti-entropy scaling: the interval as is up to 128
// nodes, then multiplied by ceil(log2(n) - log2(128)) + 1, so that it
// doubles with every doubling of the cluster.
func AEScale(interval time.Duration, nodes int) time.Duration {
	if nodes <= aeScaleThreshold {
		return interval
	}
	mult := math.Ceil(math.Log2(float64(nodes))-math.Log2(aeScaleThreshold)) + 1.0
	return time.Duration(mult) * interval
}

// fullSyncDelay is the wait before the next full sync: the scaled
// interval plus a random stagger of up to as much again (Consul's
// spreading of the load over the cluster).
func (sy *Syncer) fullSyncDelay() time.Duration {
	d := AEScale(sy.cfg.Interval, sy.cfg.ClusterSize())
	return d + wait.Jitter(d)
}

// run is the loop. Its state: when the next full sync is due, whether
// changes are pending, and when a failed round may be retried.
func (sy *Syncer) run() {
	ctx := sy.ctx
	now := sy.state.now
	fullDue := now() // start with a full sync
	changes := false
	var retryAt time.Time
	backoff := time.Duration(0)

	for {
		paused := sy.Paused()
		if !paused && (retryAt.IsZero() || !now().Before(retryAt)) {
			var err error
			ran := true
			switch {
			case !now().Before(fullDue):
				if err = sy.SyncFull(ctx); err == nil {
					fullDue = now().Add(sy.fullSyncDelay())
					changes = false
				}
			case changes:
				changes = false
				if err = sy.SyncChanges(ctx); err != nil {
					changes = true
				}
			default:
				ran = false
			}
			if ran {
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					backoff = min(max(2*backoff, sy.cfg.RetryMin), sy.cfg.RetryMax)
					wait := backoff/2 + wait.Jitter(backoff/2+1)
					retryAt = now().Add(wait)
					sy.logger.Warn("anti-entropy sync failed, retrying", "error", err, "retry_in", wait)
				} else {
					backoff, retryAt = 0, time.Time{}
				}
			}
		}

		// Sleep until the earliest of: the retry time (which gates
		// everything else), the next full sync, the next deferred output.
		// While paused only Resume (or Stop) matters.
		var timerC <-chan time.Time
		var timer *time.Timer
		if !paused {
			wake := retryAt
			if wake.IsZero() {
				wake = fullDue
				if due := sy.state.nextOutputDue(); !due.IsZero() && due.Before(wake) {
					wake = due
				}
			}
			timer = time.NewTimer(max(wake.Sub(now()), 0))
			timerC = timer.C
		}

		select {
		case <-ctx.Done():
			return
		case <-sy.state.syncCh:
			changes = true
		case <-sy.fullCh:
			if due := now().Add(wait.Jitter(sy.cfg.ServerUpStagger)); due.Before(fullDue) {
				fullDue = due
			}
			// A server just appeared: worth trying before the backoff
			// after earlier failures runs out.
			retryAt = time.Time{}
		case <-sy.resumeCh:
			changes = true
		case <-timerC:
			// A deferred output may be due: a changes round promotes it.
			changes = true
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// SyncFull reads the catalog's record of this node (services and checks),
// marks every difference from the local state, and pushes them: what the
// catalog lost or has differently is registered again, what only the
// catalog has is deregistered (but never serfHealth or the "consul"
// service).
func (sy *Syncer) SyncFull(ctx context.Context) error {
	sy.roundMu.Lock()
	defer sy.roundMu.Unlock()
	cfg := sy.state.cfg
	q := structs.QueryOptions{Datacenter: cfg.Datacenter, AllowStale: true, Token: sy.agentToken()}
	var services structs.IndexedNodeServices
	if err := syncCall(ctx, sy, structs.MethodCatalogNodeServices, &structs.NodeSpecificRequest{Node: cfg.NodeName, QueryOptions: q}, &services); err != nil {
		return fmt.Errorf("read catalog services of node: %w", err)
	}
	var checks structs.IndexedHealthChecks
	if err := syncCall(ctx, sy, structs.MethodHealthNodeChecks, &structs.NodeSpecificRequest{Node: cfg.NodeName, QueryOptions: q}, &checks); err != nil {
		return fmt.Errorf("read catalog checks of node: %w", err)
	}
	sy.state.markDrift(services.NodeServices, checks.HealthChecks)
	return sy.syncChanges(ctx)
}

// SyncChanges pushes what is out of sync (registrations and
// deregistrations) to the catalog, without reading it first.
func (sy *Syncer) SyncChanges(ctx context.Context) error {
	sy.roundMu.Lock()
	defer sy.roundMu.Unlock()
	return sy.syncChanges(ctx)
}

// syncCall makes one call of a sync round, within the RPC timeout.
func syncCall[A, R any](ctx context.Context, sy *Syncer, m structs.Method[A, R], args *A, reply *R) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sy.cfg.RPCTimeout)
	defer cancel()
	return m.Call(ctx, sy.cfg.RPC, args, reply)
}

// fatal reports errors that doom the rest of a round: no server or leader
// to talk to, or the round was cancelled. Other errors are about one item
// (which is retried with the next round) and the round goes on.
func fatal(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, structs.ErrNoLeader) || errors.Is(err, structs.ErrNoServers) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func (sy *Syncer) syncChanges(ctx context.Context) error {
	p := sy.state.syncPlan()
	if p.empty() {
		return nil
	}
	cfg := sy.state.cfg
	var errs []error
	// fail records err and says whether to stop the round.
	fail := func(what, id string, err error) bool {
		if errors.Is(err, structs.ErrPermissionDenied) {
			// As Consul: no point retrying until something changes.
			sy.logger.Warn("anti-entropy blocked by ACLs", "what", what, "id", id)
			return false
		}
		errs = append(errs, fmt.Errorf("%s %q: %w", what, id, err))
		return fatal(ctx, err)
	}
	dereg := func(d deregItem, svc bool) error {
		req := &structs.DeregisterRequest{Node: cfg.NodeName, WriteRequest: structs.WriteRequest{Datacenter: cfg.Datacenter, Token: sy.itemToken(d.token)}}
		if svc {
			req.ServiceID = d.id
		} else {
			req.CheckID = d.id
		}
		return syncCall(ctx, sy, structs.MethodCatalogDeregister, req, &struct{}{})
	}

	for _, d := range p.deregServices {
		err := dereg(d, true)
		if err == nil || errors.Is(err, structs.ErrPermissionDenied) {
			sy.state.serviceDeregistered(d)
			sy.logger.Info("deregistered service", "service", d.id)
		}
		if err != nil && fail("deregister service", d.id, err) {
			return errors.Join(errs...)
		}
	}
	var errMu sync.Mutex
	// failLocked is fail for the concurrent loops below.
	failLocked := func(what, id string, err error) bool {
		errMu.Lock()
		defer errMu.Unlock()
		return fail(what, id, err)
	}
	// Registrations are independent of each other: send several at once,
	// so that the leader batches them into shared Raft appends instead of
	// paying one round trip per service.
	if forEachConcurrently(ctx, p.regServices, func(item serviceItem) bool {
		req := sy.registerRequest(p.nodeInSync, sy.itemToken(item.token))
		req.Service = item.svc
		for _, c := range item.checks {
			req.Checks = append(req.Checks, c.check)
		}
		err := syncCall(ctx, sy, structs.MethodCatalogRegister, req, &struct{}{})
		if err == nil || errors.Is(err, structs.ErrPermissionDenied) {
			sy.state.serviceRegistered(item, err == nil && !req.SkipNodeUpdate)
			sy.logger.Info("synced service", "service", item.svc.ID)
		}
		return err != nil && failLocked("register service", item.svc.ID, err)
	}) {
		return errors.Join(errs...)
	}
	for _, d := range p.deregChecks {
		err := dereg(d, false)
		if err == nil || errors.Is(err, structs.ErrPermissionDenied) {
			sy.state.checkDeregistered(d)
			sy.logger.Info("deregistered check", "check", d.id)
		}
		if err != nil && fail("deregister check", d.id, err) {
			return errors.Join(errs...)
		}
	}
	for _, item := range p.regChecks {
		req := sy.registerRequest(p.nodeInSync, sy.itemToken(item.token))
		req.Service = item.svc
		req.Check = item.check
		err := syncCall(ctx, sy, structs.MethodCatalogRegister, req, &struct{}{})
		if err == nil || errors.Is(err, structs.ErrPermissionDenied) {
			sy.state.checkRegistered(item, err == nil && !req.SkipNodeUpdate)
			sy.logger.Debug("synced check", "check", item.check.CheckID)
		}
		if err != nil && fail("register check", item.check.CheckID, err) {
			return errors.Join(errs...)
		}
	}
	// The node record rode along with any registration above; send it
	// alone when nothing else went.
	if !sy.state.isNodeInSync() {
		req := sy.registerRequest(false, sy.agentToken())
		if err := syncCall(ctx, sy, structs.MethodCatalogRegister, req, &struct{}{}); err == nil {
			sy.state.nodeRegistered()
			sy.logger.Info("synced node info")
		} else {
			fail("register node", cfg.NodeName, err)
		}
	}
	return errors.Join(errs...)
}

// registerRequest is a registration carrying this node: its full record
// unless the catalog's is known to be right (SkipNodeUpdate then keeps
// the catalog from rewriting it, and from fighting the leader's
// reconciliation over it).
func (sy *Syncer) registerRequest(nodeInSync bool, token string) *structs.RegisterRequest {
	cfg := sy.state.cfg
	return &structs.RegisterRequest{
		ID:              cfg.NodeID,
		Node:            cfg.NodeName,
		Address:         cfg.AdvertiseAddr,
		TaggedAddresses: maps.Clone(cfg.TaggedAddresses),
		NodeMeta:        maps.Clone(cfg.NodeMeta),
		Locality:        cfg.Locality.Clone(),
		SkipNodeUpdate:  nodeInSync,
		WriteRequest:    structs.WriteRequest{Datacenter: cfg.Datacenter, Token: token},
	}
}

// agentToken is the token of the node's own requests.
func (sy *Syncer) agentToken() string {
	if sy.cfg.Tokens == nil {
		return ""
	}
	return sy.cfg.Tokens.AgentToken()
}

// itemToken is the token a service or check was registered with, or the
// default token when it had none (Consul's fallback).
func (sy *Syncer) itemToken(registered string) string {
	if registered != "" || sy.cfg.Tokens == nil {
		return registered
	}
	return sy.cfg.Tokens.UserToken()
}

// syncConcurrency bounds the registrations one sync round has in flight.
const syncConcurrency = 16

// forEachConcurrently calls fn for every item, at most syncConcurrency at
// a time, and stops starting new calls once one reports that the round
// must stop (fn returns true) or ctx ends. It reports whether it stopped.
func forEachConcurrently[T any](ctx context.Context, items []T, fn func(T) bool) bool {
	var (
		wg      sync.WaitGroup
		stopped atomic.Bool
		sem     = make(chan struct{}, syncConcurrency)
	)
	for _, item := range items {
		if stopped.Load() || ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if fn(item) {
				stopped.Store(true)
			}
		}()
	}
	wg.Wait()
	return stopped.Load()
}
