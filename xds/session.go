package xds

import (
	"log/slog"
	"slices"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
)

// maxTypesPerStream bounds the type URLs one stream may subscribe to, so a
// client inventing type URLs cannot grow the server's memory without limit.
// Envoy uses fewer than ten.
const maxTypesPerStream = 32

// request is a delta or state-of-the-world request reduced to what the
// protocol needs.
type request struct {
	typeURL     string
	nonce       string
	errorDetail *rpcstatus.Status
	node        *corev3.Node
	// names are the state-of-the-world resource_names.
	names []string
	// subscribe, unsubscribe and initial are the delta fields.
	subscribe, unsubscribe []string
	initial                map[string]string
}

func sotwRequest(r *discoveryv3.DiscoveryRequest) request {
	return request{
		typeURL:     r.GetTypeUrl(),
		nonce:       r.GetResponseNonce(),
		errorDetail: r.GetErrorDetail(),
		node:        r.GetNode(),
		names:       r.GetResourceNames(),
	}
}

func deltaRequest(r *discoveryv3.DeltaDiscoveryRequest) request {
	return request{
		typeURL:     r.GetTypeUrl(),
		nonce:       r.GetResponseNonce(),
		errorDetail: r.GetErrorDetail(),
		node:        r.GetNode(),
		subscribe:   r.GetResourceNamesSubscribe(),
		unsubscribe: r.GetResourceNamesUnsubscribe(),
		initial:     r.GetInitialResourceVersions(),
	}
}

// session is the protocol state of one ADS stream, without any I/O: the
// stream loop feeds it requests and resource sets and sends what plan
// returns. It is not safe for concurrent use.
type session struct {
	delta bool
	log   *slog.Logger
	now   func() time.Time
	// res is the latest resource set; nil until the Source delivers one.
	res   prepared
	types map[string]*typeState
	nonce uint64
	// staleEDS names assignments whose cluster was re-sent while the client
	// did not subscribe to them yet (see refreshEndpoints).
	staleEDS map[string]struct{}
	// gens numbers the changes of the types' subscriptions and client
	// views (see typeState.gens).
	gens uint64
	// byRank and byRemoval are the subscribed types in typeRank and
	// removalRank order; nil when a type was added or subscribed since.
	byRank, byRemoval []*typeState
	// pending caches endpointsPending for the state it was computed in.
	pending struct {
		valid bool
		key   pendingKey
		value bool
	}
	// planned is plan's storage for its result, valid until the next
	// plan: the caller copies the responses out (outbox.push).
	planned []response
}

// pendingKey is what endpointsPending depends on.
type pendingKey struct {
	cds, eds      uint64 // client view generations (0: no such type)
	set           *typeSet
	edsSuppressed bool
}

func newSession(delta bool, log *slog.Logger, now func() time.Time) *session {
	return &session{delta: delta, log: log, now: now, types: map[string]*typeState{}, staleEDS: map[string]struct{}{}}
}

// setResources takes a new prepared resource set.
func (s *session) setResources(p prepared) { s.res = p }

// typeFor returns the state of a type, creating it on first use.
func (s *session) typeFor(typeURL string) (*typeState, bool) {
	if typeURL == "" {
		s.log.Warn("xds: ignoring request without type_url")
		return nil, false
	}
	if ts, ok := s.types[typeURL]; ok {
		return ts, true
	}
	if len(s.types) >= maxTypesPerStream {
		s.log.Warn("xds: ignoring request: too many types on one stream", "type", typeURL)
		return nil, false
	}
	ts := newTypeState(typeURL, &s.gens)
	s.types[typeURL] = ts
	return ts, true
}

// handle applies one request: ACK/NACK bookkeeping and subscription
// changes. Responses follow from plan.
func (s *session) handle(r request) {
	if s.delta {
		s.handleDelta(r)
	} else {
		s.handleSotW(r)
	}
	if r.typeURL == resource.EndpointType {
		s.consumeStaleEDS()
	}
}

func (s *session) handleSotW(r request) {
	ts, ok := s.typeFor(r.typeURL)
	if !ok {
		return
	}
	if ts.subscribed && r.nonce != "" && r.nonce != ts.lastNonce {
		// Stale: the client has not seen our latest response of the type
		// yet; its ACK of that one will carry its current subscription.
		s.log.Debug("xds: ignoring stale request", "type", r.typeURL, "nonce", r.nonce)
		return
	}
	if ts.subscribed && r.nonce == "" {
		// The client starts the type over on the same stream: it holds
		// nothing we can rely on.
		s.log.Debug("xds: type re-requested without nonce", "type", r.typeURL)
		clear(ts.client)
		ts.touchClient()
		ts.answered, ts.inflight, ts.suppressed = false, nil, false
	}
	if ts.inflight != nil && r.nonce == ts.inflight.nonce {
		s.ackOrNack(ts, r)
	}
	s.subscribe(ts)
	ts.setSotWNames(r.names)
}

// subscribe marks a type subscribed, the first time it is requested.
func (s *session) subscribe(ts *typeState) {
	if !ts.subscribed {
		ts.subscribed = true
		s.byRank, s.byRemoval = nil, nil
	}
}

func (s *session) handleDelta(r request) {
	ts, ok := s.typeFor(r.typeURL)
	if !ok {
		return
	}
	first := !ts.subscribed
	s.subscribe(ts)
	if r.nonce != "" {
		if ts.inflight != nil && r.nonce == ts.inflight.nonce {
			s.ackOrNack(ts, r)
		} else {
			// Subscription changes still apply: they are incremental and
			// losing one would desynchronise the client.
			s.log.Debug("xds: request nonce matches no pending response", "type", r.typeURL, "nonce", r.nonce)
		}
	}
	ts.applyDelta(first, r.subscribe, r.unsubscribe, r.initial)
}

// ackOrNack settles the type's in-flight response.
func (s *session) ackOrNack(ts *typeState, r request) {
	inf := ts.inflight
	ts.inflight = nil
	defer ts.recycle(inf)
	now := s.now()
	if r.errorDetail == nil {
		ts.status.LastAckedVersion, ts.status.LastAckedAt = inf.version, now
		return
	}
	ts.revert(inf.prev)
	ts.suppressed, ts.suppressedFP = true, inf.viewFP
	ts.status.LastNackedVersion, ts.status.LastNackedAt = inf.version, now
	ts.status.LastNackError, ts.status.LastNackCode = r.errorDetail.GetMessage(), r.errorDetail.GetCode()
	s.log.Warn("xds: envoy rejected config", "type", ts.typeURL, "version", inf.version,
		"nonce", inf.nonce, "error", r.errorDetail.GetMessage())
}

// ordered returns the subscribed types sorted by rank (then URL). The
// slice is cached until a type is added: callers must not modify it.
func (s *session) ordered(rank func(string) int, cache *[]*typeState) []*typeState {
	if *cache != nil {
		return *cache
	}
	out := make([]*typeState, 0, len(s.types))
	for _, ts := range s.types {
		if ts.subscribed {
			out = append(out, ts)
		}
	}
	slices.SortFunc(out, func(a, b *typeState) int {
		if ra, rb := rank(a.typeURL), rank(b.typeURL); ra != rb {
			return ra - rb
		}
		switch {
		case a.typeURL < b.typeURL:
			return -1
		case a.typeURL > b.typeURL:
			return 1
		}
		return 0
	})
	*cache = out
	return out
}

// plan decides which responses to send now and records them as sent. The
// rules, in order:
//   - nothing before the Source delivered resources (the stream stays silent);
//   - at most one unacknowledged response per type: a type in flight waits,
//     and its newer changes go out together after the ACK or NACK;
//   - a type rejected by NACK stays silent until its resources change;
//   - upserts go in make-before-break order (secrets, clusters, endpoints,
//     listeners, routes), and listeners and routes wait while anything ranked
//     before them is in flight or a cluster the client holds still lacks its
//     current endpoints, so they never name what Envoy lacks or is warming;
//   - each cluster change re-sends its endpoints (Envoy drops the endpoints
//     of a re-warmed cluster);
//   - removals go last, once nothing is in flight or waiting, referrers
//     first.
//
// Types that owe the client nothing since the last look (same resources,
// subscription and client view) are skipped without looking inside, so an
// ACK, or a change of one type, costs work in that type only.
//
// The result is valid until the next call.
func (s *session) plan() []response {
	if s.res == nil {
		return nil
	}
	clear(s.planned)
	out := s.planned[:0]
	earlierInFlight := false // a type ranked before listeners is in flight
	deferred := false        // an upsert had to wait
	for _, ts := range s.ordered(typeRank, &s.byRank) {
		if ts.inflight != nil {
			if ts.rank < rankListener {
				earlierInFlight = true
			}
			continue
		}
		set := s.res.get(ts.typeURL)
		if ts.isSettled(set) {
			continue
		}
		if ts.suppressed {
			if ts.viewFP(set) == ts.suppressedFP {
				continue
			}
			ts.suppressed = false
		}
		ups := ts.upserts(ts.view(set))
		if len(ups) == 0 && ts.answered {
			continue
		}
		// endpointsPending is asked last: it walks the client's clusters.
		if (ts.rank == rankListener || ts.rank == rankRoute) && (earlierInFlight || s.endpointsPending()) {
			deferred = true
			continue
		}
		out = append(out, s.respond(ts, set, ups, nil))
		if ts.rank < rankListener {
			earlierInFlight = true
		}
		if ts.typeURL == resource.ClusterType {
			s.refreshEndpoints(ups)
		}
	}
	out = s.planRemovals(out, deferred)
	s.planned = out
	return out
}

// planRemovals is plan's last step: it settles the types that owe the
// client nothing and, once nothing is in flight or waiting, appends the
// removals the others owe to out, referrers first.
func (s *session) planRemovals(out []response, deferred bool) []response {
	type owed struct {
		ts   *typeState
		set  *typeSet
		rems []string
	}
	var todo []owed
	inflight := false
	for _, ts := range s.ordered(removalRank, &s.byRemoval) {
		if ts.inflight != nil {
			inflight = true
			continue
		}
		set := s.res.get(ts.typeURL)
		if ts.suppressed || ts.isSettled(set) || len(ts.upserts(ts.view(set))) > 0 {
			continue
		}
		rems := ts.removals(set, s.delta)
		if len(rems) == 0 {
			ts.settled = ts.key(set)
			continue
		}
		todo = append(todo, owed{ts, set, rems})
	}
	if len(todo) == 0 || inflight || deferred || s.endpointsPending() {
		return out
	}
	for _, o := range todo {
		out = append(out, s.respond(o.ts, o.set, nil, o.rems))
	}
	return out
}

// endpointsPending reports whether a cluster the client holds takes its
// endpoints from an assignment that exists but the client does not hold at
// its current version: listeners and routes then wait, as Envoy keeps such
// a cluster warming. It does not wait for endpoints Envoy rejected.
func (s *session) endpointsPending() bool {
	cds := s.types[resource.ClusterType]
	if cds == nil {
		return false
	}
	eds := s.types[resource.EndpointType]
	key := pendingKey{cds: cds.clientGen, set: s.res.get(resource.EndpointType)}
	if eds != nil {
		key.eds, key.edsSuppressed = eds.clientGen, eds.suppressed
	}
	if s.pending.valid && s.pending.key == key {
		return s.pending.value
	}
	v := s.endpointsPendingNow(cds, eds, key.set)
	s.pending.valid, s.pending.key, s.pending.value = true, key, v
	return v
}

func (s *session) endpointsPendingNow(cds, eds *typeState, set *typeSet) bool {
	if eds != nil && eds.suppressed {
		return false
	}
	for _, c := range cds.client {
		if c == nil || c.edsName == "" {
			continue
		}
		want := set.get(c.edsName)
		if want == nil {
			continue
		}
		if eds == nil {
			return true
		}
		if h := eds.client[c.edsName]; h == nil || h.version != want.version {
			return true
		}
	}
	return false
}

// refreshEndpoints makes the endpoints of changed EDS clusters go out
// again: Envoy drops the endpoints of a cluster it re-warms. A name the
// client does not subscribe to yet is remembered, so that versions it
// announces in initial_resource_versions do not suppress the refresh.
func (s *session) refreshEndpoints(clusters []*entry) {
	for _, c := range clusters {
		if c.edsName != "" {
			s.staleEDS[c.edsName] = struct{}{}
		}
	}
	s.consumeStaleEDS()
}

// consumeStaleEDS forgets, from the endpoint client view, the assignments of
// re-sent clusters that the client subscribes to, and drops remembered names
// whose cluster the client no longer holds.
func (s *session) consumeStaleEDS() {
	if len(s.staleEDS) == 0 {
		return
	}
	eds := s.types[resource.EndpointType]
	if eds != nil && eds.subscribed {
		for n := range s.staleEDS {
			if !eds.wants(n) {
				continue
			}
			delete(s.staleEDS, n)
			if _, held := eds.client[n]; held {
				delete(eds.client, n)
				eds.touchClient()
				eds.suppressed = false
			}
		}
	}
	needed := map[string]struct{}{}
	if cds := s.types[resource.ClusterType]; cds != nil {
		for _, c := range cds.client {
			if c != nil && c.edsName != "" {
				needed[c.edsName] = struct{}{}
			}
		}
	}
	for n := range s.staleEDS {
		if _, ok := needed[n]; !ok {
			delete(s.staleEDS, n)
		}
	}
}

// respond plans one response for a type and records it as in flight.
// The type's view of set is what the client should end up with; ups the
// entries it lacks; rems the names to remove (removal phase, ups empty).
func (s *session) respond(ts *typeState, set *typeSet, ups []*entry, rems []string) response {
	s.nonce++
	nonce := strconv.FormatUint(s.nonce, 10)
	view := ts.view(set)
	inf := ts.newInflight(nonce, ts.viewFP(set))
	r := response{delta: s.delta, typeURL: ts.typeURL, nonce: nonce}
	if s.delta {
		inf.prev = ts.apply(inf.prev, ups, rems, false)
		inf.version = ts.versionHeld()
		r.resources, r.removed = ups, rems
	} else {
		// The response keeps its own slice: the view's storage may serve
		// the next view before the response is sent.
		sent := slices.Clone(view)
		if rems == nil && omissionDeletes(ts.typeURL) {
			// Upsert phase: keep what is going away until the removal phase.
			if held := ts.held(view); len(held) > 0 {
				sent = append(sent, held...)
				slices.SortFunc(sent, byName)
			}
		}
		inf.prev = ts.apply(inf.prev, sent, nil, omissionDeletes(ts.typeURL))
		inf.version = fingerprint(sent)
		r.resources = sent
	}
	r.version = inf.version
	ts.inflight = inf
	ts.answered = true
	ts.lastNonce = nonce
	ts.noteSent(nonce, inf.version, s.now())
	return r
}

// waiting reports whether no resources arrived yet.
func (s *session) waiting() bool { return s.res == nil }

// typeStatuses returns the status of every subscribed type.
func (s *session) typeStatuses() []TypeStatus {
	types := s.ordered(typeRank, &s.byRank)
	out := make([]TypeStatus, len(types))
	for i, ts := range types {
		out[i] = ts.statusCopy()
	}
	return out
}
