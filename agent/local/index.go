package local

import (
	"container/heap"
	"iter"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// The State's secondary indexes. With thousands of local services (one
// sidecar per application instance, 5,000 on a busy node) every question
// that scanned all entries made one registration, one check result or one
// sync round cost O(N), and a burst of N registrations O(N²). The indexes
// answer them in O(answer): the checks of one service, the services on
// one port, the entries anti-entropy must send, the next deferred output.
//
// They live under State.mu with the maps they index. Every write of
// s.services or s.checks, including a change of an entry's inSync or
// deleted flag, ends with reindexServiceLocked or reindexCheckLocked of
// that ID, which compares the entry with what the index recorded for it.

// indexes are the State's secondary indexes (guarded by State.mu).
type indexes struct {
	// checksByService holds every check entry's ID, tombstones included,
	// under its ServiceID ("" for node checks); checkService is the key
	// each check ID is filed under.
	checksByService map[string]map[string]struct{}
	checkService    map[string]string
	// servicesByPort holds the live services' IDs under their Port;
	// servicePort is the port each is filed under.
	servicesByPort map[int]map[string]struct{}
	servicePort    map[string]int
	// dirtyServices and dirtyChecks are the entries anti-entropy must
	// send: tombstones and entries not in sync.
	dirtyServices map[string]struct{}
	dirtyChecks   map[string]struct{}
	// outputDue orders the deferred output syncs by due time. Entries are
	// not removed when a check's outputDue is cleared: one whose time no
	// longer matches its check is dropped when it reaches the top.
	outputDue dueHeap
}

func newIndexes() indexes {
	return indexes{
		checksByService: make(map[string]map[string]struct{}),
		checkService:    make(map[string]string),
		servicesByPort:  make(map[int]map[string]struct{}),
		servicePort:     make(map[string]int),
		dirtyServices:   make(map[string]struct{}),
		dirtyChecks:     make(map[string]struct{}),
	}
}

func addToSet[K comparable](m map[K]map[string]struct{}, k K, id string) {
	set := m[k]
	if set == nil {
		set = make(map[string]struct{})
		m[k] = set
	}
	set[id] = struct{}{}
}

func removeFromSet[K comparable](m map[K]map[string]struct{}, k K, id string) {
	if set := m[k]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

// reindexServiceLocked files service id as its entry is now (nil: gone).
func (s *State) reindexServiceLocked(id string) {
	ix := &s.ix
	e := s.services[id]
	if port, ok := ix.servicePort[id]; ok {
		removeFromSet(ix.servicesByPort, port, id)
		delete(ix.servicePort, id)
	}
	if e != nil && !e.deleted {
		addToSet(ix.servicesByPort, e.svc.Port, id)
		ix.servicePort[id] = e.svc.Port
	}
	if e != nil && (e.deleted || !e.inSync) {
		ix.dirtyServices[id] = struct{}{}
	} else {
		delete(ix.dirtyServices, id)
	}
}

// reindexCheckLocked files check id as its entry is now (nil: gone).
func (s *State) reindexCheckLocked(id string) {
	ix := &s.ix
	c := s.checks[id]
	if svc, ok := ix.checkService[id]; ok && (c == nil || svc != c.check.ServiceID) {
		removeFromSet(ix.checksByService, svc, id)
		delete(ix.checkService, id)
	}
	if c == nil {
		delete(ix.dirtyChecks, id)
		return
	}
	addToSet(ix.checksByService, c.check.ServiceID, id)
	ix.checkService[id] = c.check.ServiceID
	if c.deleted || !c.inSync {
		ix.dirtyChecks[id] = struct{}{}
	} else {
		delete(ix.dirtyChecks, id)
	}
}

// rebuildIndexesLocked files every entry again: after a full sync, which
// walks everything anyway. The output heap is kept: it does not depend
// on what a full sync changes.
func (s *State) rebuildIndexesLocked() {
	due := s.ix.outputDue
	s.ix = newIndexes()
	s.ix.outputDue = due
	for id := range s.services {
		s.reindexServiceLocked(id)
	}
	for id := range s.checks {
		s.reindexCheckLocked(id)
	}
}

// serviceChecksLocked yields the entries of the checks of serviceID ("":
// node checks), tombstones included.
func (s *State) serviceChecksLocked(serviceID string) iter.Seq2[string, *checkEntry] {
	return func(yield func(string, *checkEntry) bool) {
		for id := range s.ix.checksByService[serviceID] {
			if !yield(id, s.checks[id]) {
				return
			}
		}
	}
}

// deferOutputLocked records that check id's deferred output is due at.
func (s *State) deferOutputLocked(id string, at time.Time) {
	heap.Push(&s.ix.outputDue, dueItem{at: at, checkID: id})
}

// nextDueLocked is the check whose deferred output is due first, dropping
// stale heap entries on the way; ok is false when none is pending.
func (s *State) nextDueLocked() (c *checkEntry, ok bool) {
	h := &s.ix.outputDue
	for h.Len() > 0 {
		top := (*h)[0]
		if c := s.checks[top.checkID]; c != nil && !c.deleted && c.outputDue.Equal(top.at) {
			return c, true
		}
		heap.Pop(h)
	}
	return nil, false
}

// promoteDueOutputsLocked marks out of sync every check whose deferred
// output is due at now.
func (s *State) promoteDueOutputsLocked(now time.Time) {
	for {
		c, ok := s.nextDueLocked()
		if !ok || now.Before(c.outputDue) {
			return
		}
		heap.Pop(&s.ix.outputDue)
		c.outputDue = time.Time{}
		c.inSync = false
		c.version++
		s.reindexCheckLocked(c.check.CheckID)
	}
}

type dueItem struct {
	at      time.Time
	checkID string
}

// dueHeap is a min-heap of deferred output syncs (container/heap).
type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// lockedServices is the live services as ExpandService reads them, from
// the State's maps and port index: only valid while State.mu is held.
type lockedServices struct{ s *State }

func (v lockedServices) Service(id string) *structs.NodeService {
	if e := v.s.services[id]; e != nil && !e.deleted {
		return e.svc
	}
	return nil
}

func (v lockedServices) OnPort(port int) iter.Seq[*structs.NodeService] {
	return func(yield func(*structs.NodeService) bool) {
		for id := range v.s.ix.servicesByPort[port] {
			if !yield(v.s.services[id].svc) {
				return
			}
		}
	}
}
