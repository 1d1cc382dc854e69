// Package leafcert is the agent's leaf certificate manager: it holds one
// Connect leaf certificate per service, signed by the servers' CA, and keeps
// it fresh.
//
// For each service and ACL token asked for, the manager makes a private key
// and a CSR for the service's SPIFFE identity, has a server sign it
// (ConnectCA.Sign) with that token, and caches the result: every request for
// that service with that token gets the same certificate until it is
// renewed. The token is part of the cache key, as in Consul's agent cache,
// so that a token the servers would refuse never gets a certificate signed
// for another. A certificate is renewed at a random
// point between 60 % and 90 % of its lifetime, and, when the CA's active
// root changes (the manager watches the roots with a blocking query), after
// a random delay within RootChangeJitter, so that a rotation does not send
// every agent's every CSR to the leader at once. A blocking Get returns as
// soon as the certificate changes. Services not asked for during IdleTTL
// are dropped.
//
// The manager owns one goroutine watching the roots. A cached leaf (one per
// service and token) holds a runtime timer, not a goroutine: its next signing (or idle
// check) runs in the goroutine the runtime starts when the timer fires,
// so an agent with thousands of sidecars keeps no stack per leaf. Stop
// ends and waits for all of them.
package leafcert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/internal/wait"
	"github.com/trellis-mesh/trellis/structs"
)

// Errors of the manager.
var (
	// ErrStopped is returned by Get after Stop.
	ErrStopped = errors.New("leafcert: manager stopped")
	// ErrMissingService is returned by Get without a service name.
	ErrMissingService = errors.New("leafcert: service name is required")
	// ErrTimeout is returned by a Get that found no certificate in time
	// while the CA was not initialized.
	ErrTimeout = errors.New("leafcert: timed out waiting for a leaf certificate")
	// errNoRoots is a fetch before the roots (and trust domain) are known.
	errNoRoots = errors.New("CA is uninitialized and unable to sign certificates yet: no active root")
)

// Defaults.
const (
	// DefaultRootChangeJitter is Consul's caChangeJitterWindow.
	DefaultRootChangeJitter = 30 * time.Second
	// DefaultRateLimitRetry is the window a rate-limited renewal retries
	// within (uniformly spread, as Consul does when a renewal meets the
	// rate limit). A refused first signing follows firstSignRetry instead.
	DefaultRateLimitRetry = 30 * time.Second
	DefaultRetryMin       = time.Second
	DefaultRetryMax       = time.Minute
	// DefaultIdleTTL is how long an unrequested leaf is kept (Consul's
	// agent cache keeps leaves three days).
	DefaultIdleTTL = 72 * time.Hour
	// DefaultFirstFetchTimeout bounds how long a Get waits for a
	// service's first certificate while the CA is not initialized.
	DefaultFirstFetchTimeout = time.Minute
	// defaultRootsWait is the blocking time of the roots watch.
	defaultRootsWait = 10 * time.Minute
	// defaultQueryWait and maxQueryWait bound a blocking Get, as Consul's
	// blocking queries.
	defaultQueryWait = 5 * time.Minute
	maxQueryWait     = 10 * time.Minute
	// rpcTimeout bounds one sign or roots call beyond its blocking time.
	rpcTimeout = 30 * time.Second
	// immediateRetries is how many refused first signings in a row are
	// retried at once (Consul's CacheRefreshBackoffMin); later ones wait
	// 2 s, 4 s, ... up to RetryMax, each plus up to as much again.
	immediateRetries = 3
	// immediateRetryJitter spreads the immediate retries of a refused
	// burst so that they do not reach the server in lockstep.
	immediateRetryJitter = 50 * time.Millisecond
	// minRenewDelay keeps a very short-lived certificate from being
	// re-requested in a tight loop.
	minRenewDelay = time.Second
)

// Config holds the manager's dependencies and tuning. Zero durations take
// the defaults above; a negative RootChangeJitter re-issues at once.
type Config struct {
	// RPC reaches the servers (the agent's RPC client, or the local server
	// on a server agent) for ConnectCA.Roots and ConnectCA.Sign. Required.
	RPC structs.Caller
	// Datacenter is this agent's datacenter: the dc of every identity.
	// Required.
	Datacenter string
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Token gives the ACL token of a request that carries none (the
	// agent's default token, as Consul's agent uses for requests without
	// one); nil sends none.
	Token func() string
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	RootChangeJitter  time.Duration
	RateLimitRetry    time.Duration
	RetryMin          time.Duration
	RetryMax          time.Duration
	IdleTTL           time.Duration
	FirstFetchTimeout time.Duration
	// RootsWait is the blocking time of the roots watch query.
	RootsWait time.Duration
}

// Manager caches and renews leaf certificates. Create it with New, call
// Start, and Stop it when done.
type Manager struct {
	cfg    Config
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// Guarded by mu:
	started bool
	stopped bool
	roots   *structs.IndexedCARoots
	// rootsChanged is closed and replaced whenever the active root (or
	// trust domain) changes.
	rootsChanged chan struct{}
	// rootsUpdated is closed and replaced whenever the roots answer moves
	// to a new index (any root added, removed or changed), for WatchRoots.
	rootsUpdated chan struct{}
	entries      map[leafKey]*entry
}

// leafKey names one cached leaf: a service's, signed with one token.
type leafKey struct {
	service string
	token   string
}

// entry is one service's leaf for one token. Its fields are guarded by
// Manager.mu.
type entry struct {
	service string
	token   string
	cert    *structs.IssuedCert
	// signer is the colon-hex AuthorityKeyId of cert: which root's key
	// signed it, compared with the active root's SigningKeyID.
	signer string
	// err is the last fetch failure, cleared by a success.
	err error
	// fetched is when cert was signed for this agent: the Age of an
	// answer that did not wait for it.
	fetched time.Time
	// changed is closed and replaced whenever cert or err changes.
	changed  chan struct{}
	lastUsed time.Time
	removed  bool

	// The schedule (schedule.go): next is when to fetch; timer fires at
	// next or at the idle deadline, whichever is first, and gen tells its
	// callback from a replaced one's. While fetching, a reschedule only
	// lowers wantAt, which the fetch's end honours.
	next     time.Time
	timer    *time.Timer
	gen      uint64
	fetching bool
	wantAt   time.Time
	backoff  time.Duration
	// refused counts the rate-limited attempts in a row.
	refused int
	// watchers are the Watch callers (watch.go).
	watchers map[*watcher]struct{}
}

// New checks the configuration. Nothing runs until Start.
func New(cfg Config) (*Manager, error) {
	if cfg.RPC == nil {
		return nil, errors.New("leafcert: RPC is required")
	}
	if cfg.Datacenter == "" {
		return nil, errors.New("leafcert: Datacenter is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.RootChangeJitter, DefaultRootChangeJitter)
	def(&cfg.RateLimitRetry, DefaultRateLimitRetry)
	def(&cfg.RetryMin, DefaultRetryMin)
	def(&cfg.RetryMax, DefaultRetryMax)
	def(&cfg.IdleTTL, DefaultIdleTTL)
	def(&cfg.FirstFetchTimeout, DefaultFirstFetchTimeout)
	def(&cfg.RootsWait, defaultRootsWait)
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{
		cfg:          cfg,
		logger:       cfg.Logger,
		ctx:          ctx,
		cancel:       cancel,
		rootsChanged: make(chan struct{}),
		rootsUpdated: make(chan struct{}),
		entries:      make(map[leafKey]*entry),
	}, nil
}

// Start begins watching the CA roots.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.stopped {
		return
	}
	m.started = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.watchRoots()
	}()
}

// Stop ends every goroutine of the manager and waits for them. Blocked
// Gets return ErrStopped.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.stopped = true
	for _, e := range m.entries {
		m.disarmLocked(e)
	}
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// Get returns the service's leaf certificate, with its private key, as
// signed with token ("" uses Config.Token): each token has a certificate
// of its own, so a token that may not write the service gets the servers'
// denial, never another token's certificate. With
// minIndex > 0 it blocks until the certificate's ModifyIndex passes
// minIndex or wait elapses (0 means 5 minutes, at most 10), then returns
// the current one. The first request for a service waits for the first
// certificate, or for the first signing's failure (a rate limit, say);
// while the service has no certificate, a request with minIndex > 0 that
// finds such a failure waits for the next attempt and returns its
// outcome. The returned value is the caller's copy.
func (m *Manager) Get(ctx context.Context, service, token string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, error) {
	cert, _, err := m.GetWithMeta(ctx, service, token, minIndex, wait)
	return cert, err
}

// CacheMeta says how the manager answered, as Consul's agent cache says
// it in X-Cache and Age: Hit when it held a certificate that answered the
// request without waiting, and then Age, how long it has held it.
type CacheMeta struct {
	Hit bool
	Age time.Duration
}

// GetWithMeta is Get, also saying whether the answer was already held.
func (m *Manager) GetWithMeta(ctx context.Context, service, token string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, CacheMeta, error) {
	if service == "" {
		return nil, CacheMeta{}, ErrMissingService
	}
	if wait <= 0 {
		wait = defaultQueryWait
	}
	wait = min(wait, maxQueryWait)
	start := m.cfg.Now()
	blockUntil := start.Add(wait + rand.N(wait/16+1)) //nolint:gosec // jitter to spread timers, not a secret
	firstUntil := start.Add(max(m.cfg.FirstFetchTimeout, time.Millisecond))
	for waited := false; ; waited = true {
		e, err := m.entry(leafKey{service: service, token: token})
		if err != nil {
			return nil, CacheMeta{}, err
		}
		m.mu.Lock()
		cert, ferr, ch, removed, fetched := e.cert, e.err, e.changed, e.removed, e.fetched
		m.mu.Unlock()
		if removed {
			if errors.Is(ferr, structs.ErrACLNotFound) {
				// Dropped because its token is gone (schedule.go): asking
				// again would only make a new entry to fail the same way.
				return nil, CacheMeta{}, ferr
			}
			continue
		}
		if cert != nil && (minIndex == 0 || cert.ModifyIndex > minIndex) {
			c := *cert
			// Signed for this request (the entry's first signing may
			// finish before this loop first looks): a miss, as Consul's
			// cache counts a fetch it waited on.
			if waited || !fetched.Before(start) {
				return &c, CacheMeta{}, nil
			}
			return &c, CacheMeta{Hit: true, Age: max(m.cfg.Now().Sub(fetched), 0)}, nil
		}
		until := blockUntil
		if cert == nil {
			// A request that has waited, or did not ask to (minIndex 0),
			// gets the failure; a blocking one waits for the next attempt's
			// outcome, so that its caller need not poll.
			if ferr != nil && !waitable(ferr) && (waited || minIndex == 0) {
				return nil, CacheMeta{}, ferr
			}
			if ferr == nil || waitable(ferr) {
				until = firstUntil
			}
		}
		timer := time.NewTimer(until.Sub(m.cfg.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, CacheMeta{}, ctx.Err()
		case <-m.ctx.Done():
			timer.Stop()
			return nil, CacheMeta{}, ErrStopped
		case <-ch:
			timer.Stop()
		case <-timer.C:
			if cert != nil {
				// The wait ran out: the held certificate, which did not
				// answer the request when it came, so not a hit.
				c := *cert
				return &c, CacheMeta{}, nil
			}
			if ferr != nil {
				return nil, CacheMeta{}, fmt.Errorf("%w: %w", ErrTimeout, ferr)
			}
			return nil, CacheMeta{}, ErrTimeout
		}
	}
}

// entry returns the entry of k, creating it (and scheduling its first
// signing) on first use, and records the use.
func (m *Manager) entry(k leafKey) (*entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped || !m.started {
		return nil, ErrStopped
	}
	e, ok := m.entries[k]
	if !ok {
		e = &entry{service: k.service, token: k.token, changed: make(chan struct{})}
		m.entries[k] = e
		e.lastUsed = m.cfg.Now()
		m.scheduleLocked(e, e.lastUsed)
	}
	e.lastUsed = m.cfg.Now()
	return e, nil
}

// waitable reports whether a first Get should keep waiting through a
// fetch error: only while the CA does not exist yet (an agent started
// together with its servers). Any other error, a rate limit included,
// is returned to the caller as Consul's agent does (the HTTP API answers
// 429 to a rate limit); the manager keeps retrying in the background, so a
// later request finds the certificate.
func waitable(err error) bool {
	return errors.Is(err, errNoRoots) || errors.Is(err, structs.ErrCANotInitialized)
}

// fetch makes a new key and CSR for the entry's service and has the
// servers sign it.
func (m *Manager) fetch(e *entry) error {
	roots, err := m.activeRoots()
	if err != nil {
		m.setError(e, err)
		return err
	}
	id := connect.NewServiceID(roots.TrustDomain, m.cfg.Datacenter, e.service)
	csrPEM, keyPEM, err := ca.NewLeafCSR(id)
	if err != nil {
		m.setError(e, err)
		return err
	}
	ctx, cancel := context.WithTimeout(m.ctx, rpcTimeout)
	defer cancel()
	var reply structs.IssuedCert
	err = structs.MethodConnectCASign.Call(ctx, m.cfg.RPC, &structs.CASignRequest{
		CSR: csrPEM, WriteRequest: structs.WriteRequest{Datacenter: m.cfg.Datacenter, Token: m.token(e.token)},
	}, &reply)
	if err != nil {
		m.setError(e, err)
		return err
	}
	leaf, err := ca.ParseCert(reply.CertPEM)
	if err != nil {
		m.setError(e, err)
		return fmt.Errorf("leafcert: server returned an unreadable certificate: %w", err)
	}
	reply.PrivateKeyPEM = keyPEM
	m.mu.Lock()
	defer m.publish(e)
	defer m.mu.Unlock()
	// Index is per service and only moves forward: leaves signed from one
	// reserved serial block share their Raft index, and a blocking
	// client must still see every new leaf as a change.
	if e.cert != nil && reply.ModifyIndex <= e.cert.ModifyIndex {
		reply.ModifyIndex = e.cert.ModifyIndex + 1
	}
	e.cert, e.err, e.fetched = &reply, nil, m.cfg.Now()
	e.signer = connect.HexString(leaf.AuthorityKeyId)
	close(e.changed)
	e.changed = make(chan struct{})
	return nil
}

// setError records a failed fetch; a blocked first Get sees it.
func (m *Manager) setError(e *entry, err error) {
	m.mu.Lock()
	defer m.publish(e)
	defer m.mu.Unlock()
	e.err = err
	close(e.changed)
	e.changed = make(chan struct{})
}

// renewAtLocked picks when to renew the entry's certificate: uniformly between
// 60 % and 90 % of its lifetime (Consul's soft expiry), or sooner when it
// is already not from the active root.
func (m *Manager) renewAtLocked(e *entry, now time.Time) time.Time {
	if m.staleSignerLocked(e) {
		return now.Add(max(wait.Jitter(m.cfg.RootChangeJitter), minRenewDelay))
	}
	return RenewAt(e.cert.ValidAfter, e.cert.ValidBefore, now)
}

// RenewAt is when to renew a certificate valid from validAfter until
// validBefore: at a uniformly random point between 60 % and 90 % of its
// lifetime (Consul's soft expiry, spreading many agents' renewals), and
// never sooner than a second after now. The agent's auto_encrypt
// certificate is renewed on the same schedule as the services' leaves.
func RenewAt(validAfter, validBefore, now time.Time) time.Time {
	life := validBefore.Sub(validAfter)
	at := validAfter.Add(time.Duration(float64(life) * (0.6 + 0.3*rand.Float64()))) //nolint:gosec // jitter to spread timers, not a secret
	return maxTime(at, now.Add(minRenewDelay))
}

// staleSignerLocked reports whether the entry's certificate was signed by
// a key other than the active root's.
func (m *Manager) staleSignerLocked(e *entry) bool {
	if e.cert == nil || m.roots == nil {
		return false
	}
	for _, r := range m.roots.Roots {
		if r.ID == m.roots.ActiveRootID {
			return r.SigningKeyID != "" && r.SigningKeyID != e.signer
		}
	}
	return false
}

// retryDelay is the wait after a failed fetch. When the servers pushed
// back on a service that has no certificate yet, its proxy is waiting:
// as Consul's agent cache, the first refusals in a row are retried at
// once (here within immediateRetryJitter), then after 2 s, 4 s, ...
// (capped at RetryMax) plus up to as much again. When a certificate is
// held (a renewal or a re-issue after a root change), the retry is spread
// uniformly within RateLimitRetry, so that a rotation's burst spreads
// out. Any other failure waits the current backoff with jitter.
func (m *Manager) retryDelay(err error, backoff time.Duration, refused int, hasCert bool) time.Duration {
	if errors.Is(err, structs.ErrRateLimited) {
		if hasCert {
			return max(wait.Jitter(m.cfg.RateLimitRetry), 10*time.Millisecond)
		}
		return firstSignRetry(refused, m.cfg.RetryMax)
	}
	if backoff == 0 {
		backoff = m.cfg.RetryMin
	}
	return backoff/2 + wait.Jitter(backoff/2)
}

// firstSignRetry is the wait after the refused-th refusal in a row of a
// service's first signing.
func firstSignRetry(refused int, maxWait time.Duration) time.Duration {
	if refused <= immediateRetries {
		return wait.Jitter(immediateRetryJitter)
	}
	d := maxWait
	if shift := refused - immediateRetries; shift < 31 {
		d = min(time.Duration(1<<shift)*time.Second, maxWait)
	}
	return d + wait.Jitter(d)
}

func nextBackoff(cur, lo, hi time.Duration) time.Duration {
	if cur == 0 {
		return lo
	}
	return min(2*cur, hi)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// token is the token a leaf asked for with token is signed with: token
// itself, else Config.Token's, read at each signing so that a changed
// default token is used from the next renewal on.
func (m *Manager) token(token string) string {
	if token != "" || m.cfg.Token == nil {
		return token
	}
	return m.cfg.Token()
}
