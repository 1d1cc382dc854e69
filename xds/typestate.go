package xds

import (
	"maps"
	"slices"
	"time"
)

// typeState is what one stream knows about one resource type: what the
// client subscribed to, what it holds, and the response awaiting its ACK.
// It is owned by the stream's loop goroutine.
type typeState struct {
	typeURL string
	rank    int
	// subscribed is set by the first request for the type on the stream.
	subscribed bool
	// wildcard subscribes to every resource of the type.
	wildcard bool
	// names are the explicitly subscribed resource names.
	names map[string]struct{}
	// client is what the client holds, by name: the entry last sent (or the
	// version it announced in initial_resource_versions). A nil value means
	// the client was told the resource does not exist (delta only).
	client map[string]*entry
	// answered is set once a response for the type went out on the stream:
	// the first request of each type is answered even when empty, because
	// Envoy waits for it to finish initialising.
	answered bool
	// inflight is the response awaiting ACK or NACK; at most one per type.
	inflight *inflight
	// spare is the last settled inflight, emptied, for the next response
	// (see newInflight).
	spare *inflight
	// scratch is versionHeld's storage, empty between calls.
	scratch []*entry
	// suppressed holds the type back after a NACK until the resources the
	// client would get (fingerprint suppressedFP) change: Envoy rejects the
	// same content every time, so re-sending it would loop forever.
	suppressed   bool
	suppressedFP string
	// lastNonce is the nonce of the latest response of the type; a
	// state-of-the-world request quoting any other nonce is stale.
	lastNonce string
	status    TypeStatus

	// gens numbers the changes of the session's state (shared by its
	// types); subGen and clientGen are the numbers of the latest change of
	// the subscription and of the client view. Together with the typeSet
	// pointer they key what plan can skip.
	gens      *uint64
	subGen    uint64
	clientGen uint64
	// vc is the view of the latest set for the subscription.
	vc viewCache
	// settled is the state in which the type was last found to owe the
	// client nothing (no upserts, no removals): plan skips the type while
	// nothing of it changed.
	settled stateKey
}

// stateKey identifies what a type's plan depends on: the resources, the
// subscription and the client view.
type stateKey struct {
	set         *typeSet
	sub, client uint64
}

// viewCache is a type's view of a set for one subscription, with its
// fingerprint once computed.
type viewCache struct {
	set  *typeSet
	sub  uint64
	view []*entry
	fp   string
	// owned is set when view is the type's own slice (not a set's).
	owned bool
}

// inflight is one response awaiting ACK or NACK.
type inflight struct {
	nonce   string
	version string
	// viewFP fingerprints the resources the client was meant to get; a NACK
	// suppresses the type until that changes.
	viewFP string
	// prev is what the client held, for every name the response touched,
	// before it: a NACK means the client kept that.
	prev []prevEntry
}

// prevEntry is what the client held of one name before a response: e,
// or nothing (held false).
type prevEntry struct {
	name string
	e    *entry
	held bool
}

// newTypeState returns the state of a type newly requested on a stream;
// gens is the session's change counter (nil: the type's own).
func newTypeState(typeURL string, gens *uint64) *typeState {
	if gens == nil {
		gens = new(uint64)
	}
	ts := &typeState{
		typeURL: typeURL,
		rank:    typeRank(typeURL),
		names:   map[string]struct{}{},
		client:  map[string]*entry{},
		status:  TypeStatus{TypeURL: typeURL},
		gens:    gens,
	}
	ts.touchSub()
	ts.touchClient()
	return ts
}

// touchSub records a change of the subscription.
func (ts *typeState) touchSub() {
	*ts.gens++
	ts.subGen = *ts.gens
}

// touchClient records a change of the client view.
func (ts *typeState) touchClient() {
	*ts.gens++
	ts.clientGen = *ts.gens
}

// key is the type's current state for set.
func (ts *typeState) key(set *typeSet) stateKey {
	return stateKey{set: set, sub: ts.subGen, client: ts.clientGen}
}

// isSettled reports whether the type owes the client nothing for set:
// nothing changed since plan last found no upserts and no removals.
func (ts *typeState) isSettled(set *typeSet) bool {
	return ts.answered && ts.settled == ts.key(set)
}

// wants reports whether the client subscribed to a resource name.
func (ts *typeState) wants(name string) bool {
	if ts.wildcard {
		return true
	}
	_, ok := ts.names[name]
	return ok
}

// view is what the client should hold: the subscribed resources that
// exist, sorted by name. The slice is shared (the set's own for a
// wildcard): callers must not modify it, nor keep it past the next view
// of another set or subscription, which may reuse its storage.
func (ts *typeState) view(set *typeSet) []*entry {
	if ts.vc.set == set && ts.vc.sub == ts.subGen && ts.vc.view != nil {
		return ts.vc.view
	}
	var out []*entry
	if ts.wildcard {
		if set != nil {
			out = set.sorted
		}
	} else {
		// The previous view is only in the cache (callers use a view
		// before they ask for another), so its storage serves again.
		if prev := ts.vc.view; ts.vc.owned && cap(prev) >= len(ts.names) {
			clear(prev)
			out = prev[:0]
		} else {
			out = make([]*entry, 0, len(ts.names))
		}
		for n := range ts.names {
			if e := set.get(n); e != nil {
				out = append(out, e)
			}
		}
		slices.SortFunc(out, byName)
	}
	if out == nil {
		out = []*entry{}
	}
	ts.vc = viewCache{set: set, sub: ts.subGen, view: out, owned: !ts.wildcard}
	return out
}

// viewFP is the fingerprint of view(set).
func (ts *typeState) viewFP(set *typeSet) string {
	v := ts.view(set)
	if ts.vc.fp == "" {
		ts.vc.fp = fingerprint(v)
	}
	return ts.vc.fp
}

// upserts are the entries of the view the client does not hold at their
// current version.
func (ts *typeState) upserts(view []*entry) []*entry {
	var out []*entry
	for _, e := range view {
		if c := ts.client[e.name]; c == nil || c.version != e.version {
			out = append(out, e)
		}
	}
	return out
}

// removals are the names the client must drop: those it holds that are no
// longer in the view and, in delta, subscribed names it was never told do
// not exist (the protocol's way of saying "no such resource"). In
// state-of-the-world only listeners and clusters are removed (by omission).
func (ts *typeState) removals(set *typeSet, delta bool) []string {
	if !delta && !omissionDeletes(ts.typeURL) {
		return nil
	}
	var out []string
	for name, c := range ts.client {
		if c != nil && (set.get(name) == nil || !ts.wants(name)) {
			out = append(out, name)
		}
	}
	if delta {
		for n := range ts.names {
			if _, known := ts.client[n]; !known && set.get(n) == nil {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// held are the entries the client holds that are not in the view, for a
// state-of-the-world listener or cluster response that must not remove
// anything yet (removals go last).
func (ts *typeState) held(view []*entry) []*entry {
	var out []*entry
	for name, c := range ts.client {
		if c == nil || c.any == nil {
			continue
		}
		if _, found := slices.BinarySearchFunc(view, name, func(e *entry, n string) int {
			switch {
			case e.name < n:
				return -1
			case e.name > n:
				return 1
			}
			return 0
		}); !found {
			out = append(out, c)
		}
	}
	return out
}

// apply records a response in the client view (optimistically: a NACK
// reverts it) and returns what the touched names held before. replace
// drops every held name not sent (state-of-the-world omission).
func (ts *typeState) apply(prev []prevEntry, sent []*entry, removed []string, replace bool) []prevEntry {
	ts.touchClient()
	// A name may be recorded twice (sent and removed in one response,
	// which plan never does); revert restores in reverse, so the first
	// record, the state before the response, wins.
	prev = slices.Grow(prev[:0], len(sent)+len(removed))
	record := func(name string) {
		c, held := ts.client[name]
		prev = append(prev, prevEntry{name: name, e: c, held: held})
	}
	if replace {
		keep := make(map[string]struct{}, len(sent))
		for _, e := range sent {
			keep[e.name] = struct{}{}
		}
		for name := range ts.client {
			if _, ok := keep[name]; !ok {
				record(name)
				delete(ts.client, name)
			}
		}
	}
	for _, e := range sent {
		record(e.name)
		ts.client[e.name] = e
	}
	for _, n := range removed {
		record(n)
		if _, explicit := ts.names[n]; explicit {
			ts.client[n] = nil
		} else {
			delete(ts.client, n)
		}
	}
	return prev
}

// newInflight returns the record of a new response: the spare one when
// there is one (a type settles a response before it sends the next, so
// one record per type serves a whole stream at steady state, its prev
// storage too).
func (ts *typeState) newInflight(nonce, viewFP string) *inflight {
	inf := ts.spare
	if inf == nil {
		return &inflight{nonce: nonce, viewFP: viewFP}
	}
	ts.spare = nil
	*inf = inflight{nonce: nonce, viewFP: viewFP, prev: inf.prev[:0]}
	return inf
}

// recycle keeps a settled inflight as the spare, without what it
// pointed to.
func (ts *typeState) recycle(inf *inflight) {
	clear(inf.prev)
	*inf = inflight{prev: inf.prev[:0]}
	ts.spare = inf
}

// revert undoes a rejected response.
func (ts *typeState) revert(prev []prevEntry) {
	ts.touchClient()
	for i := len(prev) - 1; i >= 0; i-- {
		if p := prev[i]; p.held {
			ts.client[p.name] = p.e
		} else {
			delete(ts.client, p.name)
		}
	}
	ts.dropUnwanted()
}

// dropUnwanted forgets held resources the client no longer subscribes to:
// the client drops them itself.
func (ts *typeState) dropUnwanted() {
	if ts.wildcard {
		return
	}
	n := len(ts.client)
	maps.DeleteFunc(ts.client, func(name string, _ *entry) bool { return !ts.wants(name) })
	if len(ts.client) != n {
		ts.touchClient()
	}
}

// versionHeld fingerprints what the client holds (the delta
// system_version_info).
func (ts *typeState) versionHeld() string {
	entries := ts.scratch[:0]
	for _, c := range ts.client {
		if c != nil {
			entries = append(entries, c)
		}
	}
	slices.SortFunc(entries, byName)
	fp := fingerprint(entries)
	clear(entries)
	ts.scratch = entries[:0]
	return fp
}

// setSotWNames applies a state-of-the-world request's resource names: an
// empty list is a wildcard for listeners, clusters and unknown types and
// subscribes to nothing for named-only types; "*" is an explicit wildcard.
func (ts *typeState) setSotWNames(names []string) {
	ts.touchSub()
	ts.wildcard = len(names) == 0 && !namedOnly(ts.typeURL)
	clear(ts.names)
	for _, n := range names {
		if n == "*" {
			ts.wildcard = true
			continue
		}
		ts.names[n] = struct{}{}
	}
	ts.dropUnwanted()
}

// applyDelta applies a delta request's subscription changes. A
// (re)subscribed name is forgotten from the client view so that it is sent
// again: the client may have dropped it.
func (ts *typeState) applyDelta(first bool, subscribe, unsubscribe []string, initial map[string]string) {
	if !first && len(subscribe) == 0 && len(unsubscribe) == 0 {
		return // an ACK or NACK only
	}
	ts.touchSub()
	ts.touchClient()
	if first && len(subscribe) == 0 && !namedOnly(ts.typeURL) {
		ts.wildcard = true // legacy wildcard: the first request names nothing
	}
	for _, n := range subscribe {
		if n == "*" {
			ts.wildcard = true
			continue
		}
		ts.names[n] = struct{}{}
		delete(ts.client, n)
	}
	for _, n := range unsubscribe {
		if n == "*" {
			ts.wildcard = false
			continue
		}
		delete(ts.names, n)
		delete(ts.client, n)
	}
	if first {
		for n, v := range initial {
			ts.client[n] = &entry{name: n, version: v}
		}
	}
	if len(unsubscribe) > 0 || len(initial) > 0 {
		ts.dropUnwanted()
	}
}

// statusCopy returns the type's status with the derived fields filled in.
func (ts *typeState) statusCopy() TypeStatus {
	s := ts.status
	s.Pending = ts.inflight != nil
	s.Suppressed = ts.suppressed
	s.Wildcard = ts.wildcard
	s.Subscribed = len(ts.names)
	s.Held = 0
	for _, c := range ts.client {
		if c != nil {
			s.Held++
		}
	}
	return s
}

// noteSent records a response in the type's status.
func (ts *typeState) noteSent(nonce, version string, now time.Time) {
	ts.status.LastSentVersion, ts.status.LastSentNonce, ts.status.LastSentAt = version, nonce, now
}
