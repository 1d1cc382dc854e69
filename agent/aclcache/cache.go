// Package aclcache resolves ACL tokens on a client agent, as Consul's
// client agents do: a token becomes its identity (ACL.TokenResolve), its
// roles (ACL.RoleResolve) and their policies (ACL.PolicyResolve), read
// from the servers and compiled here with the acl package under the
// servers' default policy. Tokens are kept for acl.token_ttl, policies for
// policy_ttl and roles for role_ttl (0: not kept), and acl.down_policy
// decides what happens while no server can answer. What it decides is
// only the agent's own edges (its local HTTP endpoints, xDS streams):
// every server RPC is decided again on the servers with the token the
// agent forwards.
package aclcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/structs"
)

// The down policies of acl.down_policy.
const (
	// DownExtendCache (the default) keeps using what is cached, however
	// old, while no server answers; a token never resolved is denied.
	DownExtendCache = "extend-cache"
	// DownAsyncCache is DownExtendCache that also answers from an expired
	// entry at once, refreshing it in the background.
	DownAsyncCache = "async-cache"
	// DownAllow allows everything while no server answers.
	DownAllow = "allow"
	// DownDeny denies everything while no server answers.
	DownDeny = "deny"
)

// maxTokens bounds the tokens kept; past it the cache starts over rather
// than tracking use (policies and roles are few and shared).
const maxTokens = 4096

// Sentinel errors of the package.
var (
	// ErrInvalidConfig is returned by New for a Config it cannot work
	// with.
	ErrInvalidConfig = errors.New("aclcache: invalid config")
	// ErrServersDown is Lookup's failure when no server answered for a
	// token that nothing cached answers for.
	ErrServersDown = errors.New("aclcache: no server answered")
)

// Config holds what a Cache needs.
type Config struct {
	// RPC reaches the servers. Required.
	RPC structs.Caller
	// Datacenter is the local datacenter: tokens are resolved there, and
	// grants limited to other datacenters grant nothing here.
	Datacenter string
	// TokenTTL, PolicyTTL and RoleTTL are acl.token_ttl, policy_ttl and
	// role_ttl: how long a resolved token, policy or role is used before
	// it is read again. Zero keeps nothing.
	TokenTTL, PolicyTTL, RoleTTL time.Duration
	// DownPolicy is acl.down_policy (one of the Down... constants; empty
	// means DownExtendCache).
	DownPolicy string
	// Down reports whether err means that no server could answer (a
	// transport failure, no leader) rather than an answer; it adds to the
	// classes structs names so (no leader, unavailable). An answer
	// denying or not knowing the token is never "down".
	Down func(error) bool
	// Now is the clock (time.Now when nil); tests move it.
	Now func() time.Time
	// Logger gets the warnings of resolutions under the down policy.
	Logger *slog.Logger
}

// Cache resolves tokens into authorizers. It is safe for concurrent use;
// Close stops its background refreshes.
type Cache struct {
	cfg    Config
	logger *slog.Logger
	// ctx ends the background refreshes, which wg counts.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// tokens, policies, roles, gen, refreshing and closed are guarded by
	// mu. gen moves whenever a policy or role is stored, so that an
	// authorizer compiled before is compiled again.
	tokens     map[string]*tokenEntry
	policies   map[string]item[structs.ACLPolicy]
	roles      map[string]item[structs.ACLRole]
	gen        uint64
	refreshing map[string]bool
	closed     bool
}

// item is a cached policy or role; v nil means the servers have none
// with the ID (or none the token may read).
type item[T any] struct {
	v       *T
	fetched time.Time
}

// tokenEntry is one resolved token. authz, gen, roleIDs and policyIDs are
// guarded by Cache.mu: the authorizer last compiled for the token, the
// Cache.gen it was compiled at and what it was compiled from.
type tokenEntry struct {
	token         *structs.ACLToken
	defaultPolicy string
	fetched       time.Time

	authz     *acl.Authorizer
	gen       uint64
	roleIDs   []string
	policyIDs []string
}

// downError is a resolution that failed because no server answered.
type downError struct{ err error }

func (e *downError) Error() string        { return ErrServersDown.Error() + ": " + e.err.Error() }
func (e *downError) Unwrap() error        { return e.err }
func (e *downError) Is(target error) bool { return target == ErrServersDown }

// New builds a Cache.
func New(cfg Config) (*Cache, error) {
	if cfg.RPC == nil {
		return nil, fmt.Errorf("%w: RPC is required", ErrInvalidConfig)
	}
	switch cfg.DownPolicy {
	case "":
		cfg.DownPolicy = DownExtendCache
	case DownExtendCache, DownAsyncCache, DownAllow, DownDeny:
	default:
		return nil, fmt.Errorf("%w: unknown down policy %q", ErrInvalidConfig, cfg.DownPolicy)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{
		cfg: cfg, logger: cfg.Logger, ctx: ctx, cancel: cancel,
		tokens:     make(map[string]*tokenEntry),
		policies:   make(map[string]item[structs.ACLPolicy]),
		roles:      make(map[string]item[structs.ACLRole]),
		refreshing: make(map[string]bool),
	}, nil
}

// Close stops the background refreshes and waits for them. Resolve still
// works afterwards, without them. Closing twice is harmless.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// Invalidate forgets the token secret (its policies and roles, shared
// with other tokens, stay): the servers said they do not know it, or the
// agent's own token store changed.
func (c *Cache) Invalidate(secrets ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range secrets {
		delete(c.tokens, s)
	}
}

// Resolve is what the token secret ("" is the anonymous token) may do:
// structs.ErrACLNotFound for a token the servers do not know (or one
// past its expiration time), an authorizer under the down policy while no
// server answers, and acl.ManageAll when the servers run without ACLs.
func (c *Cache) Resolve(ctx context.Context, secret string) (*acl.Authorizer, error) {
	a, err := c.Lookup(ctx, secret)
	var down *downError
	if errors.As(err, &down) {
		return c.whenDown(secret, down), nil
	}
	return a, err
}

// Lookup is Resolve without the down policy's own answer: while no
// server answers for a token that nothing cached (or, under extend-cache
// and async-cache, nothing expired) answers for, it fails with an error
// that errors.Is matches to ErrServersDown. The agent_recovery token is
// looked up so, to fall back on its local rules.
func (c *Cache) Lookup(ctx context.Context, secret string) (*acl.Authorizer, error) {
	if c.cfg.DownPolicy == DownAsyncCache {
		if a, stale, ok := c.cached(secret); ok {
			if stale {
				c.refresh(secret)
			}
			return a, nil
		}
	}
	a, err := c.resolve(ctx, secret)
	switch {
	case err == nil:
		return a, nil
	case errors.Is(err, structs.ErrACLDisabled):
		// As the servers decide without ACLs.
		return acl.ManageAll(), nil
	}
	return nil, err
}

// whenDown is the down policy's answer for a token nothing cached
// answers for.
func (c *Cache) whenDown(secret string, err *downError) *acl.Authorizer {
	if c.cfg.DownPolicy == DownAllow {
		c.logger.Warn("no server answered an ACL resolution; allowing, as acl.down_policy says", "error", err.err)
		return acl.AllowAll()
	}
	accessor := ""
	c.mu.Lock()
	if e := c.tokens[secret]; e != nil {
		accessor = e.token.AccessorID
	}
	c.mu.Unlock()
	c.logger.Warn("no server answered an ACL resolution; denying, as acl.down_policy says", "down_policy", c.cfg.DownPolicy, "accessor_id", accessor, "error", err.err)
	// An authorizer of no rules over deny: its denials name the token.
	return acl.NewPolicyAuthorizer(accessor, acl.DenyAll())
}

// cached is the authorizer last compiled for secret, for async-cache,
// and whether anything it was compiled from has expired since.
func (c *Cache) cached(secret string) (*acl.Authorizer, bool, bool) {
	now := c.cfg.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.tokens[secret]
	if e == nil || e.authz == nil || e.token.IsExpired(now) {
		return nil, false, false
	}
	stale := !fresh(e.fetched, c.cfg.TokenTTL, now) || e.gen != c.gen ||
		anyStale(c.roles, e.roleIDs, c.cfg.RoleTTL, now) || anyStale(c.policies, e.policyIDs, c.cfg.PolicyTTL, now)
	return e.authz, stale, true
}

// refresh resolves secret again in the background, once at a time.
func (c *Cache) refresh(secret string) {
	c.mu.Lock()
	if c.closed || c.refreshing[secret] {
		c.mu.Unlock()
		return
	}
	c.refreshing[secret] = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.refreshing, secret)
			c.mu.Unlock()
		}()
		if _, err := c.resolve(c.ctx, secret); err != nil {
			c.logger.Debug("background ACL refresh failed", "error", err)
		}
	}()
}

func fresh(fetched time.Time, ttl time.Duration, now time.Time) bool {
	return ttl > 0 && now.Sub(fetched) < ttl
}

func anyStale[T any](m map[string]item[T], ids []string, ttl time.Duration, now time.Time) bool {
	for _, id := range ids {
		it, ok := m[id]
		if !ok || !fresh(it.fetched, ttl, now) {
			return true
		}
	}
	return false
}
