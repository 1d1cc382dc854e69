package bench

import (
	"strings"
	"sync/atomic"
	"time"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// Change is one endpoint change a proxy should see: an instance at
// Addr:Port added or, when Gone, removed from an upstream whose EDS
// cluster names start with Prefix (clusters are named by SNI, which
// starts with the service name and a dot, on Trellis as on Consul).
type Change struct {
	Addr   string
	Port   uint32
	Gone   bool
	Prefix string
}

// Shows reports whether an endpoint set a proxy received shows the
// change: an addition by holding Addr:Port, whatever the cluster; a
// removal by being a set of the upstream without it.
func (c Change) Shows(cla *endpointv3.ClusterLoadAssignment) bool {
	found := false
	for _, l := range cla.GetEndpoints() {
		for _, ep := range l.GetLbEndpoints() {
			sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
			if sa.GetAddress() == c.Addr && sa.GetPortValue() == c.Port {
				found = true
			}
		}
	}
	if c.Gone {
		return !found && strings.HasPrefix(cla.GetClusterName(), c.Prefix)
	}
	return found
}

// Expect follows one Change across the streams of a Fleet: when each
// affected stream first received an endpoint set that shows it.
type Expect struct {
	change   Change
	affected []bool
	arrivals []atomic.Int64 // Unix ns; 0 until received
	left     atomic.Int64
	done     chan struct{}
}

// NewExpect expects c on the streams i with affected[i]; the others are
// ignored. With none affected it is done at once.
func NewExpect(c Change, affected []bool) *Expect {
	x := &Expect{change: c, affected: affected, arrivals: make([]atomic.Int64, len(affected)), done: make(chan struct{})}
	n := 0
	for _, a := range affected {
		if a {
			n++
		}
	}
	x.left.Store(int64(n))
	if n == 0 {
		close(x.done)
	}
	return x
}

// Observe records that stream i received cla at t. Safe for concurrent
// use; a nil Expect observes nothing.
func (x *Expect) Observe(i int, cla *endpointv3.ClusterLoadAssignment, t time.Time) {
	if x == nil || i < 0 || i >= len(x.affected) || !x.affected[i] || !x.change.Shows(cla) {
		return
	}
	if x.arrivals[i].CompareAndSwap(0, t.UnixNano()) && x.left.Add(-1) == 0 {
		close(x.done)
	}
}

// Done is closed once every affected stream received the change.
func (x *Expect) Done() <-chan struct{} { return x.done }

// Delays returns, for every affected stream that received the change,
// how long after from it did, and the number of affected streams that
// have not (yet).
func (x *Expect) Delays(from time.Time) (delays []time.Duration, missing int) {
	for i, a := range x.affected {
		if !a {
			continue
		}
		at := x.arrivals[i].Load()
		if at == 0 {
			missing++
			continue
		}
		delays = append(delays, time.Duration(at-from.UnixNano()))
	}
	return delays, missing
}
