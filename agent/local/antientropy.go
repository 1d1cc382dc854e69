package local

import (
	"slices"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// The State's side of anti-entropy: which entries are out of sync, what a
// sync round must send, and the bookkeeping once the catalog answered.
// The Syncer (sync.go) drives it and does the RPCs; every method here
// takes the lock for a moment only, never across an RPC.

// syncPlan is a snapshot, taken under the lock, of everything a sync
// round must send. Services and checks in it are copies.
type syncPlan struct {
	nodeInSync    bool
	deregServices []deregItem
	regServices   []serviceItem
	deregChecks   []deregItem
	regChecks     []checkItem
}

type deregItem struct {
	id      string
	token   string
	version uint64
}

type serviceItem struct {
	svc     *structs.NodeService
	token   string
	version uint64
	// checks ride along in the same registration (same token, out of
	// sync): one Raft write, and the service never shows up without them.
	checks []checkItem
}

type checkItem struct {
	check   *structs.HealthCheck
	token   string
	version uint64
	// svc is the check's service, sent along so that the catalog has it
	// even if it lost it (nil for node checks).
	svc *structs.NodeService
}

// empty reports whether the plan has nothing to send.
func (p *syncPlan) empty() bool {
	return p.nodeInSync && len(p.deregServices)+len(p.regServices)+len(p.deregChecks)+len(p.regChecks) == 0
}

// syncPlan promotes deferred output changes that are due and returns what
// is out of sync. It walks the dirty sets only, so a round costs what
// changed, not every local entry.
func (s *State) syncPlan() *syncPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promoteDueOutputsLocked(s.now())

	p := &syncPlan{nodeInSync: s.nodeInSync}
	riding := make(map[string]bool)
	dereg := make(map[string]bool)
	// The out-of-sync checks by service, found in one pass: looking for
	// each out-of-sync service's checks among all checks made a burst of
	// N registrations cost N x checks.
	pendingChecks := make(map[string][]string)
	for cid := range s.ix.dirtyChecks {
		if c := s.checks[cid]; !c.deleted && !c.inSync && c.check.ServiceID != "" {
			pendingChecks[c.check.ServiceID] = append(pendingChecks[c.check.ServiceID], cid)
		}
	}
	for id := range s.ix.dirtyServices {
		switch e := s.services[id]; {
		case e.deleted:
			p.deregServices = append(p.deregServices, deregItem{id: id, token: e.token, version: e.version})
			dereg[id] = true
		case !e.inSync:
			item := serviceItem{svc: e.svc.Clone(), token: e.token, version: e.version}
			for _, cid := range pendingChecks[id] {
				if c := s.checks[cid]; c.token == e.token {
					item.checks = append(item.checks, checkItem{check: c.check.Clone(), token: c.token, version: c.version})
					riding[cid] = true
				}
			}
			sortChecks(item.checks)
			p.regServices = append(p.regServices, item)
		}
	}
	for id := range s.ix.dirtyChecks {
		switch c := s.checks[id]; {
		case c.deleted:
			// Deregistering a service removes its checks in the catalog.
			if !dereg[c.check.ServiceID] {
				p.deregChecks = append(p.deregChecks, deregItem{id: id, token: c.token, version: c.version})
			}
		case !c.inSync && !riding[id]:
			item := checkItem{check: c.check.Clone(), token: c.token, version: c.version}
			if e := s.services[c.check.ServiceID]; e != nil && !e.deleted {
				item.svc = e.svc.Clone()
			}
			p.regChecks = append(p.regChecks, item)
		}
	}
	// A stable order makes rounds reproducible (and logs readable).
	slices.SortFunc(p.deregServices, byDeregID)
	slices.SortFunc(p.deregChecks, byDeregID)
	slices.SortFunc(p.regServices, func(a, b serviceItem) int { return strings.Compare(a.svc.ID, b.svc.ID) })
	sortChecks(p.regChecks)
	return p
}

func byDeregID(a, b deregItem) int { return strings.Compare(a.id, b.id) }

func sortChecks(cs []checkItem) {
	slices.SortFunc(cs, func(a, b checkItem) int { return strings.Compare(a.check.CheckID, b.check.CheckID) })
}

// serviceDeregistered forgets a tombstone the catalog no longer has, and
// the tombstones of its checks (the catalog dropped them with it).
func (s *State) serviceDeregistered(d deregItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.services[d.id]
	if e == nil || !e.deleted || e.version != d.version {
		return
	}
	delete(s.services, d.id)
	s.reindexServiceLocked(d.id)
	for cid, c := range s.serviceChecksLocked(d.id) {
		if c.deleted {
			delete(s.checks, cid)
			s.reindexCheckLocked(cid)
		}
	}
}

func (s *State) checkDeregistered(d deregItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.checks[d.id]; c != nil && c.deleted && c.version == d.version {
		delete(s.checks, d.id)
		s.reindexCheckLocked(d.id)
	}
}

// serviceRegistered marks the service and the checks that rode along in
// sync, unless they changed while the RPC was in flight. nodeSent says the
// registration carried the node record.
func (s *State) serviceRegistered(item serviceItem, nodeSent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.services[item.svc.ID]; e != nil && !e.deleted && e.version == item.version {
		e.inSync = true
		s.reindexServiceLocked(item.svc.ID)
	}
	for _, ci := range item.checks {
		s.checkSyncedLocked(ci)
	}
	if nodeSent {
		s.nodeInSync = true
	}
}

func (s *State) checkRegistered(item checkItem, nodeSent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkSyncedLocked(item)
	if nodeSent {
		s.nodeInSync = true
	}
}

func (s *State) checkSyncedLocked(item checkItem) {
	c := s.checks[item.check.CheckID]
	if c == nil || c.deleted || c.version != item.version {
		return
	}
	c.inSync = true
	s.reindexCheckLocked(item.check.CheckID)
	// The output we sent is the latest: nothing deferred is left. An
	// output that changed meanwhile stays deferred.
	if c.check.Output == item.check.Output {
		c.outputDue = time.Time{}
	}
}

func (s *State) nodeRegistered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodeInSync = true
}

func (s *State) isNodeInSync() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodeInSync
}

// nextOutputDue is the earliest deferred output sync, zero when none.
func (s *State) nextOutputDue() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.nextDueLocked(); ok {
		return c.outputDue
	}
	return time.Time{}
}

// markDrift compares the catalog's view of this node with the local state
// and marks every difference, in both directions: what the catalog lacks
// or has differently is marked out of sync (to be registered again), what
// only the catalog has becomes a tombstone (to be deregistered), except
// the serfHealth check and the "consul" service, which the leader owns.
// remote is nil when the catalog does not know the node.
func (s *State) markDrift(remote *structs.NodeServices, remoteChecks structs.HealthChecks) {
	s.mu.Lock()
	defer s.mu.Unlock()

	var node *structs.Node
	remoteServices := map[string]*structs.NodeService{}
	if remote != nil {
		node = remote.Node
		if remote.Services != nil {
			remoteServices = remote.Services
		}
	}
	if node == nil || (s.cfg.NodeID != "" && !strings.EqualFold(node.ID, s.cfg.NodeID)) ||
		node.Address != s.cfg.AdvertiseAddr ||
		!stringMapsEqual(node.TaggedAddresses, s.cfg.TaggedAddresses) ||
		!stringMapsEqual(node.Meta, s.cfg.NodeMeta) ||
		!node.Locality.Same(s.cfg.Locality) {
		s.nodeInSync = false
	}

	for id, e := range s.services {
		rs, ok := remoteServices[id]
		switch {
		case e.deleted && !ok:
			// Already gone from the catalog: nothing left to do.
			delete(s.services, id)
		case e.deleted:
		case !ok:
			e.inSync = false
		default:
			if e.svc.EnableTagOverride && !slices.Equal(e.svc.Tags, rs.Tags) {
				// The catalog owns the tags of such a service.
				e.svc.Tags = slices.Clone(rs.Tags)
				if e.svc.Tags == nil {
					e.svc.Tags = []string{}
				}
				for _, c := range s.serviceChecksLocked(id) {
					if !c.deleted {
						c.check.ServiceTags = slices.Clone(e.svc.Tags)
					}
				}
				s.serviceChangedLocked(id)
			}
			e.inSync = sameService(e.svc, rs)
		}
	}
	goneServices := make(map[string]bool)
	for id, rs := range remoteServices {
		if _, ok := s.services[id]; ok || id == structs.ConsulServiceID {
			continue
		}
		s.services[id] = &serviceEntry{svc: rs.Clone(), deleted: true, version: 1}
		goneServices[id] = true
	}

	byID := make(map[string]*structs.HealthCheck, len(remoteChecks))
	for _, rc := range remoteChecks {
		byID[rc.CheckID] = rc
	}
	for id, c := range s.checks {
		rc, ok := byID[id]
		switch {
		case c.deleted && !ok:
			delete(s.checks, id)
		case c.deleted:
		case !ok:
			c.inSync = false
		default:
			c.inSync = sameCheck(c.check, rc, !c.outputDue.IsZero())
		}
	}
	for id, rc := range byID {
		if _, ok := s.checks[id]; ok || id == structs.SerfCheckID || goneServices[rc.ServiceID] {
			continue
		}
		s.checks[id] = &checkEntry{check: rc.Clone(), deleted: true, version: 1}
	}
	// A full sync touches every entry: file them all again.
	s.rebuildIndexesLocked()
}
