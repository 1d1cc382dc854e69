// Package local is an agent's local state: the services and checks
// registered to this agent (by its HTTP API, its config or its data dir),
// their persistence under the data dir, and the anti-entropy Syncer that
// keeps the catalog's record of this node equal to them.
//
// The agent is the source of truth for its own node: the catalog is made
// to match the local state, never the other way round (except for the tags
// of services with EnableTagOverride, as in Consul).
//
// Typical wiring:
//
//	st, _ := local.NewState(local.Config{NodeName: ..., DataDir: ..., ...})
//	_ = st.Load()                       // services and checks from the data dir
//	sy, _ := local.NewSyncer(local.SyncerConfig{State: st, RPC: agent, ...})
//	sy.Start()                          // first a full sync, then changes at once
//	res, err := st.RegisterService(def, token, replaceExistingChecks)
//	...
//	sy.Stop()
//
// State implements agent/checks' Notifier and AliasSource.
package local

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Config holds what State needs. NodeName is required.
type Config struct {
	Logger *slog.Logger
	// NodeName, NodeID and Datacenter identify this node in the catalog.
	NodeName   string
	NodeID     string
	Datacenter string
	// AdvertiseAddr is the node's address in the catalog.
	AdvertiseAddr string
	// TaggedAddresses of the node; nil means lan, lan_ipv4 (lan_ipv6),
	// wan and wan_ipv4 (wan_ipv6) all set to AdvertiseAddr, which is what
	// the leader registers for a Serf member too.
	TaggedAddresses map[string]string
	// NodeMeta is the node's metadata in the catalog.
	NodeMeta map[string]string
	// Locality is the node's region and zone in the catalog (nil: none).
	Locality *structs.Locality
	// DataDir holds services/, checks/ and checks/state/; empty (dev
	// mode) persists nothing.
	DataDir string
	// SidecarMinPort..SidecarMaxPort is the sidecar port range; zeros mean
	// 21000..21255, a negative bound disables auto-assignment.
	SidecarMinPort int
	SidecarMaxPort int
	// CheckUpdateInterval defers the sync of an output-only check change
	// by up to this long (status changes go at once); 0 sends every change
	// at once. The agent's default is 5m.
	CheckUpdateInterval time.Duration
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
	// EnableScriptChecks accepts script and docker checks from the HTTP
	// API; EnableLocalScriptChecks from the config files only (Consul's
	// enable_script_checks, enable_local_script_checks). Without them a
	// registration with such a check is refused whole.
	EnableScriptChecks      bool
	EnableLocalScriptChecks bool
}

// State is the agent's local services and checks. It is safe for
// concurrent use. Every method that hands out a service or check hands out
// a copy.
type State struct {
	cfg    Config
	logger *slog.Logger
	now    func() time.Time

	mu       sync.RWMutex
	services map[string]*serviceEntry
	checks   map[string]*checkEntry
	// nodeInSync is whether the catalog's node record (address, tagged
	// addresses, meta) is known to match.
	nodeInSync bool
	// notify are the Notify channels; watches the per-service channels
	// WatchService hands out (closed on that service's next change);
	// aliases the alias-check channels by aliased service ID, then check ID.
	notify  map[chan<- struct{}]struct{}
	watches map[string]chan struct{}
	// changes are the ServiceChanges subscriptions: each one's service
	// IDs changed since it last took them.
	changes map[chan<- struct{}]map[string]struct{}
	aliases map[string]map[string]chan<- struct{}
	// ix indexes services and checks (index.go).
	ix indexes

	// syncCh wakes the syncer (capacity 1: signals coalesce).
	syncCh chan struct{}
}

// serviceEntry is one service as local state keeps it. A deleted entry
// is a tombstone: gone locally, still to be deregistered from the catalog.
type serviceEntry struct {
	svc     *structs.NodeService
	token   string
	inSync  bool
	deleted bool
	// version moves on every local change, so that a sync that raced a
	// change does not mark the newer state in sync.
	version uint64
}

type checkEntry struct {
	check   *structs.HealthCheck
	def     *structs.CheckType
	token   string
	inSync  bool
	deleted bool
	version uint64
	// criticalSince is when the check last turned critical (zero when it
	// is not critical).
	criticalSince time.Time
	// outputDue is when a deferred output-only change must be synced at
	// the latest (zero when none is pending).
	outputDue time.Time
}

// CheckState is a copy of one check's local state.
type CheckState struct {
	Check *structs.HealthCheck
	// Type is how the check runs; nil for checks nothing runs
	// (maintenance).
	Type  *structs.CheckType
	Token string
	// CriticalSince is when the check turned critical, zero while it is
	// not critical: DeregisterCriticalServiceAfter reaping reads it.
	CriticalSince time.Time
}

// Critical reports whether the check is critical.
func (c *CheckState) Critical() bool { return !c.CriticalSince.IsZero() }

// CriticalFor is how long the check has been critical at now (0 when it
// is not critical).
func (c *CheckState) CriticalFor(now time.Time) time.Duration {
	if c.CriticalSince.IsZero() {
		return 0
	}
	return now.Sub(c.CriticalSince)
}

// NewState returns an empty local state; call Load to restore what the
// data dir holds.
func NewState(cfg Config) (*State, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("local: Config.NodeName is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SidecarMinPort == 0 && cfg.SidecarMaxPort == 0 {
		cfg.SidecarMinPort, cfg.SidecarMaxPort = DefaultSidecarMinPort, DefaultSidecarMaxPort
	}
	if cfg.TaggedAddresses == nil && cfg.AdvertiseAddr != "" {
		cfg.TaggedAddresses = DefaultNodeTaggedAddresses(cfg.AdvertiseAddr)
	}
	return &State{
		cfg:      cfg,
		logger:   cfg.Logger,
		now:      cfg.Now,
		services: make(map[string]*serviceEntry),
		checks:   make(map[string]*checkEntry),
		notify:   make(map[chan<- struct{}]struct{}),
		changes:  make(map[chan<- struct{}]map[string]struct{}),
		watches:  make(map[string]chan struct{}),
		aliases:  make(map[string]map[string]chan<- struct{}),
		ix:       newIndexes(),
		syncCh:   make(chan struct{}, 1),
	}, nil
}

// DefaultNodeTaggedAddresses is the node's tagged addresses for one
// advertise address: lan/wan plus lan_ipv4/wan_ipv4 (or the _ipv6 keys).
func DefaultNodeTaggedAddresses(addr string) map[string]string {
	out := map[string]string{"lan": addr, "wan": addr}
	if ip := net.ParseIP(addr); ip != nil && ip.To4() == nil {
		out["lan_ipv6"], out["wan_ipv6"] = addr, addr
	} else {
		out["lan_ipv4"], out["wan_ipv4"] = addr, addr
	}
	return out
}

// NodeName is the node this state belongs to.
func (s *State) NodeName() string { return s.cfg.NodeName }

// --- Reads -----------------------------------------------------------------

// Service returns a copy of the service registered under id, or nil.
func (s *State) Service(id string) *structs.NodeService {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.services[id]; e != nil && !e.deleted {
		return e.svc.Clone()
	}
	return nil
}

// ServiceExists reports whether a service is registered under id.
func (s *State) ServiceExists(id string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e := s.services[id]
	return e != nil && !e.deleted
}

// Services returns copies of every registered service, keyed by ID.
func (s *State) Services() map[string]*structs.NodeService {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]*structs.NodeService, len(s.services))
	for id, e := range s.services {
		if !e.deleted {
			out[id] = e.svc.Clone()
		}
	}
	return out
}

// ServiceToken is the ACL token the service registered under id was
// registered with ("" when none): a proxy's configuration is read, and its
// leaf signed, with its own registration's token, as in Consul.
func (s *State) ServiceToken(id string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.services[id]; e != nil && !e.deleted {
		return e.token
	}
	return ""
}

// WatchService returns a copy of the service registered under id (nil when
// there is none), its content hash (HashService; "" when none) and a
// channel that is closed at the next change of that service ID: a
// (re-)registration, a removal, or a tag update from the catalog. It is
// what blocking GET /v1/agent/service/<id>?hash= waits on.
func (s *State) WatchService(id string) (*structs.NodeService, string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.watches[id]
	if ch == nil {
		ch = make(chan struct{})
		s.watches[id] = ch
	}
	e := s.services[id]
	if e == nil || e.deleted {
		return nil, "", ch
	}
	return e.svc.Clone(), HashService(e.svc), ch
}

// Check returns a copy of the check registered under id, or nil.
func (s *State) Check(id string) *structs.HealthCheck {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c := s.checks[id]; c != nil && !c.deleted {
		return c.check.Clone()
	}
	return nil
}

// Checks returns copies of every registered check, node checks included,
// sorted by check ID.
func (s *State) Checks() structs.HealthChecks {
	s.mu.RLock()
	out := make(structs.HealthChecks, 0, len(s.checks))
	for _, c := range s.checks {
		if !c.deleted {
			out = append(out, c.check.Clone())
		}
	}
	s.mu.RUnlock()
	sortHealthChecks(out)
	return out
}

// ChecksForService returns copies of the checks of one service ("": the
// node checks), sorted by check ID. It costs the service's checks, not
// every check of the agent: alias checks call it on each change of the
// service they follow.
func (s *State) ChecksForService(serviceID string) structs.HealthChecks {
	s.mu.RLock()
	out := make(structs.HealthChecks, 0, len(s.ix.checksByService[serviceID]))
	for _, c := range s.serviceChecksLocked(serviceID) {
		if !c.deleted {
			out = append(out, c.check.Clone())
		}
	}
	s.mu.RUnlock()
	sortHealthChecks(out)
	return out
}

func sortHealthChecks(out structs.HealthChecks) {
	slices.SortFunc(out, func(a, b *structs.HealthCheck) int { return strings.Compare(a.CheckID, b.CheckID) })
}

// CheckState returns a copy of one check's state, or nil.
func (s *State) CheckState(id string) *CheckState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if c := s.checks[id]; c != nil && !c.deleted {
		return c.state()
	}
	return nil
}

// CheckStates returns copies of every check's state, keyed by check ID.
func (s *State) CheckStates() map[string]*CheckState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]*CheckState, len(s.checks))
	for id, c := range s.checks {
		if !c.deleted {
			out[id] = c.state()
		}
	}
	return out
}

func (c *checkEntry) state() *CheckState {
	return &CheckState{Check: c.check.Clone(), Type: c.def.Clone(), Token: c.token, CriticalSince: c.criticalSince}
}

// --- Notification --------------------------------------------------------

// Notify registers ch to receive a signal (non-blocking send, so signals
// coalesce: give ch a buffer of 1) after every change of the set of
// services or checks and every check status change. Output-only check
// changes do not signal.
func (s *State) Notify(ch chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify[ch] = struct{}{}
}

// StopNotify unregisters a channel given to Notify.
func (s *State) StopNotify(ch chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.notify, ch)
}

// NotifyServiceChanges registers ch to be signalled (non-blocking; give it
// a buffer of 1) after every change of a service: a registration, a
// removal, a tag update from the catalog. TakeServiceChanges then says
// which services changed, so that a consumer costs O(changed) per change
// rather than re-reading every service. Check updates do not signal.
func (s *State) NotifyServiceChanges(ch chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changes[ch] == nil {
		s.changes[ch] = make(map[string]struct{})
	}
}

// TakeServiceChanges returns the IDs of the services changed since ch's
// last take (in no order) and forgets them. Read each with Service: one
// that is gone returns nil.
func (s *State) TakeServiceChanges(ch chan<- struct{}) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending := s.changes[ch]
	if len(pending) == 0 {
		return nil
	}
	ids := make([]string, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	s.changes[ch] = make(map[string]struct{})
	return ids
}

// StopNotifyServiceChanges unregisters a channel given to
// NotifyServiceChanges.
func (s *State) StopNotifyServiceChanges(ch chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.changes, ch)
}

// AddAliasCheck registers notify to be signalled (non-blocking) whenever
// the service serviceID is added or removed or one of its checks is
// added, removed or changes status or output (agent/checks.AliasSource).
func (s *State) AddAliasCheck(checkID, serviceID string, notify chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.aliases[serviceID]
	if m == nil {
		m = make(map[string]chan<- struct{})
		s.aliases[serviceID] = m
	}
	m[checkID] = notify
}

// RemoveAliasCheck undoes AddAliasCheck.
func (s *State) RemoveAliasCheck(checkID, serviceID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.aliases[serviceID]; m != nil {
		delete(m, checkID)
		if len(m) == 0 {
			delete(s.aliases, serviceID)
		}
	}
}

func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// broadcastLocked signals every Notify channel.
func (s *State) broadcastLocked() {
	for ch := range s.notify {
		signal(ch)
	}
}

// aliasLocked signals the alias checks of serviceID.
func (s *State) aliasLocked(serviceID string) {
	if serviceID == "" {
		return
	}
	for _, ch := range s.aliases[serviceID] {
		signal(ch)
	}
}

// serviceChangedLocked runs after any write of service id.
func (s *State) serviceChangedLocked(id string) {
	if ch := s.watches[id]; ch != nil {
		close(ch)
		delete(s.watches, id)
	}
	s.aliasLocked(id)
	for ch, pending := range s.changes {
		pending[id] = struct{}{}
		signal(ch)
	}
	s.broadcastLocked()
	s.triggerSync()
}

// triggerSync wakes the syncer without blocking.
func (s *State) triggerSync() {
	select {
	case s.syncCh <- struct{}{}:
	default:
	}
}

// --- Check status --------------------------------------------------------

// UpdateCheck records a check result: agent/checks runners and TTL
// updates call it (agent/checks.Notifier). Unknown IDs are ignored (a
// result can race the check's removal); use SetCheckStatus to learn about
// them. A status change is synced at once; an output-only change is
// deferred by up to CheckUpdateInterval. For a TTL check the result is
// also written to the data dir, so that a restart keeps it until the TTL
// runs out.
func (s *State) UpdateCheck(id, status, output string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.checks[id]; c != nil && !c.deleted {
		s.updateCheckLocked(c, status, output)
	}
}

// SetCheckStatus is UpdateCheck for callers that need to know: it fails
// with a *ValidationError for a status other than passing, warning or
// critical, and with ErrCheckNotFound (Consul's 404 text) for an unknown
// ID.
func (s *State) SetCheckStatus(id, status, output string) error {
	if !validStatus(status) {
		return invalid("Status", "Invalid check status: '%s'", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.checks[id]
	if c == nil || c.deleted {
		return unknownCheck(id)
	}
	s.updateCheckLocked(c, status, output)
	return nil
}

func (s *State) updateCheckLocked(c *checkEntry, status, output string) {
	now := s.now()
	if status == structs.HealthCritical {
		if c.criticalSince.IsZero() {
			c.criticalSince = now
		}
	} else {
		c.criticalSince = time.Time{}
	}
	if c.def != nil && c.def.IsTTL() {
		s.persistCheckStateLocked(c.check.CheckID, status, output, now.Add(c.def.TTL.Duration()))
	}
	if c.check.Status == status && c.check.Output == output {
		return
	}
	statusChanged := c.check.Status != status
	c.check.Output = output
	s.aliasLocked(c.check.ServiceID)
	if !statusChanged && s.cfg.CheckUpdateInterval > 0 {
		// Output-only: keep it locally and let the syncer write it back
		// when due, so that a chatty check does not become a stream of
		// Raft writes. Status changes below go at once.
		if c.outputDue.IsZero() {
			d := s.cfg.CheckUpdateInterval
			c.outputDue = now.Add(d/2 + time.Duration(rand.Int64N(int64(d/2)+1))) //nolint:gosec // jitter to spread timers, not a secret
			s.deferOutputLocked(c.check.CheckID, c.outputDue)
			s.triggerSync() // let the syncer arm its timer
		}
		return
	}
	c.check.Status = status
	c.inSync = false
	c.outputDue = time.Time{}
	c.version++
	s.reindexCheckLocked(c.check.CheckID)
	if statusChanged {
		s.broadcastLocked()
	}
	s.triggerSync()
}
