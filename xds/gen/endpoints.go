package gen

import (
	"cmp"
	"slices"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-mesh/trellis/internal/latest"
	"github.com/trellis-mesh/trellis/structs"
)

// maxEndpointWeight is Envoy's largest load-balancing weight per endpoint
// that Consul sends; larger weights are capped to it, as Consul does.
const maxEndpointWeight = 128

// addressKind says which address of an instance to dial.
type addressKind uint8

const (
	// addrService: the service's own address (else its node's) and port.
	addrService addressKind = iota
	// addrLAN and addrWAN: a mesh gateway's tagged "lan" or "wan" address,
	// falling back to the service address.
	addrLAN
	addrWAN
)

// instanceAddress returns where to reach an instance.
func instanceAddress(n *structs.CheckServiceNode, kind addressKind) (string, int) {
	svc := n.Service
	var tag string
	switch kind {
	case addrLAN:
		tag = "lan"
	case addrWAN:
		tag = "wan"
	}
	if tag != "" {
		if ta, ok := svc.TaggedAddresses[tag]; ok && ta.Address != "" && ta.Port > 0 {
			return ta.Address, ta.Port
		}
		if kind == addrWAN && n.Node != nil {
			if a := n.Node.TaggedAddresses["wan"]; a != "" {
				return a, svc.Port
			}
		}
	}
	addr := svc.Address
	if addr == "" && n.Node != nil {
		addr = n.Node.Address
	}
	return addr, svc.Port
}

// endpointHealth decides whether and how an instance takes traffic, from
// all its checks (node checks included):
//
//   - any check critical (or in maintenance): excluded;
//   - a check warning: DEGRADED at the Warning weight (excluded when the
//     subset asks for passing instances only);
//   - otherwise HEALTHY at the Passing weight.
//
// A zero weight excludes the instance; weights are capped at 128. Unset
// weights count as 1.
func endpointHealth(n *structs.CheckServiceNode, onlyPassing bool) (corev3.HealthStatus, uint32, bool) {
	status := corev3.HealthStatus_HEALTHY
	for _, c := range n.Checks {
		if c == nil {
			continue
		}
		switch c.Status {
		case structs.HealthPassing:
		case structs.HealthWarning:
			if onlyPassing {
				return 0, 0, false
			}
			status = corev3.HealthStatus_DEGRADED
		default: // critical, maintenance, unknown
			return 0, 0, false
		}
	}
	weight := 1
	if w := n.Service.Weights; w != nil {
		weight = w.Passing
		if status == corev3.HealthStatus_DEGRADED {
			weight = w.Warning
		}
	}
	// A zero weight (what the official client's Catalog().Register sends
	// when none is set) is Consul's "no traffic unless nothing else is
	// left": the instance goes out UNHEALTHY with weight 1, so Envoy still
	// uses it when every host of the cluster is unhealthy.
	if weight < 1 {
		return corev3.HealthStatus_UNHEALTHY, 1, true
	}
	return status, uint32(min(weight, maxEndpointWeight)), true
}

// loadAssignment builds the endpoint set of one cluster. Instances are
// sorted by address and port so that equal inputs encode equally.
func loadAssignment(name string, nodes structs.CheckServiceNodes, onlyPassing bool, kind addressKind) *endpointv3.ClusterLoadAssignment {
	type ep struct {
		addr   string
		port   int
		status corev3.HealthStatus
		weight uint32
	}
	eps := make([]ep, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if n.Service == nil {
			continue
		}
		status, weight, ok := endpointHealth(n, onlyPassing)
		if !ok {
			continue
		}
		addr, port := instanceAddress(n, kind)
		if addr == "" || port <= 0 || port > 65535 {
			continue
		}
		eps = append(eps, ep{addr, port, status, weight})
	}
	slices.SortFunc(eps, func(a, b ep) int {
		return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.port, b.port))
	})
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	if len(eps) == 0 {
		return cla
	}
	lbs := make([]*endpointv3.LbEndpoint, 0, len(eps))
	for _, e := range eps {
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: socketAddress(e.addr, e.port),
			}},
			HealthStatus:        e.status,
			LoadBalancingWeight: wrapUint32(e.weight),
		})
	}
	cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}
	return cla
}

// staticAssignment is the inline endpoint set of a static cluster (one
// address).
func staticAssignment(name, addr string, port int) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{
		ClusterName: name,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(addr, port)}},
		}}}},
	}
}

// hasHostname reports whether an endpoint set names a host rather than an
// IP (such a set needs DNS resolution, which EDS does not do).
func hasHostname(localities []*endpointv3.LocalityLbEndpoints) bool {
	for _, l := range localities {
		for _, e := range l.GetLbEndpoints() {
			if _, ok := hostPrefix(e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()); !ok {
				return true
			}
		}
	}
	return false
}

// EndpointCache lets the Generators of many proxies share endpoint sets.
// Proxies of one agent that watch the same target get the very same
// instances from proxycfg (a data source's result is shared, read-only),
// so they get the very same ClusterLoadAssignment from a shared cache:
// built once per change instead of once per proxy, and, being the same
// message, encoded once by the ADS server. Proxies whose upstreams are the
// same (replicas of one service, typically) also share the whole map of
// their endpoint resources (see sharedEDS). The zero value is ready; it is
// safe for concurrent use.
type EndpointCache struct {
	c latest.Cache[assignmentKey, *assignment]
	// eds holds, per sequence of endpoint-set names (a hash of them), the
	// latest map of a generation's endpoint resources.
	eds latest.Cache[uint64, *edsMap]
}

// edsMap is the endpoint resources of a generation (a Resources type map)
// and, in the order the generation's parts added them, the resources it
// was collected from.
type edsMap struct {
	from []recorded
	m    map[string]proto.Message
}

// madeOf reports whether the resources of type t that parts add are e's,
// in the same order: collectType would then make a map equal to e's.
func (e *edsMap) madeOf(parts []*part, t int) bool {
	i := 0
	for _, p := range parts {
		for _, r := range p.resources {
			if r.typeIdx != t {
				continue
			}
			if i == len(e.from) || e.from[i].name != r.name || e.from[i].msg != r.msg {
				return false
			}
			i++
		}
	}
	return i == len(e.from)
}

// sharedEDS is collectType(parts, t, size) for the endpoint type, shared
// between generations: one whose parts add the very same messages under
// the same names, in the same order, as the latest generation with those
// names gets that generation's map. After an endpoint change of an
// upstream that a thousand proxies list, the first proxy makes the map
// and the others take it (and the ADS server prepares it once, see
// xds.prepare): a map per proxy was nearly a fifth of the agent's garbage
// per change. A generation whose messages differ (a proxy still on the
// previous instances, say) makes a map of its own, which becomes the
// latest for those names; either way the map equals collectType's.
func (c *EndpointCache) sharedEDS(parts []*part, t, size int) map[string]proto.Message {
	var k uint64
	n := 0
	for _, p := range parts {
		for _, r := range p.resources {
			if r.typeIdx == t {
				k = k*edsKeyPrime ^ xxhash.Sum64String(r.name)
				n++
			}
		}
	}
	e, _ := c.eds.Get(k, func(e *edsMap) bool { return e.madeOf(parts, t) }, func() (*edsMap, error) {
		from := make([]recorded, 0, n)
		for _, p := range parts {
			for _, r := range p.resources {
				if r.typeIdx == t {
					from = append(from, r)
				}
			}
		}
		return &edsMap{from: from, m: collectType(parts, t, size)}, nil
	})
	return e.m
}

// edsKeyPrime mixes the names' hashes in order (FNV-1a's 64-bit prime).
const edsKeyPrime = 1099511628211

// assignmentKey is what an endpoint set is built from besides the
// instances.
type assignmentKey struct {
	name        string
	onlyPassing bool
	kind        addressKind
}

// assignment is an endpoint set and the instances it was built from
// (their slice: proxycfg replaces, never modifies, a delivered slice).
type assignment struct {
	nodes *structs.CheckServiceNode
	n     int
	cla   *endpointv3.ClusterLoadAssignment
}

// get returns loadAssignment's result, shared with every caller that
// passes the same instances (the same slice). A nil cache builds it.
func (c *EndpointCache) get(name string, nodes structs.CheckServiceNodes, onlyPassing bool, kind addressKind) *endpointv3.ClusterLoadAssignment {
	if c == nil {
		return loadAssignment(name, nodes, onlyPassing, kind)
	}
	// Every empty set of a name is the same set, whatever slice says so.
	data := unsafe.SliceData(nodes) //nolint:gosec // the backing array's identity, never dereferenced
	a, _ := c.c.Get(assignmentKey{name: name, onlyPassing: onlyPassing, kind: kind},
		func(a *assignment) bool { return a.n == len(nodes) && (a.n == 0 || a.nodes == data) },
		func() (*assignment, error) {
			return &assignment{nodes: data, n: len(nodes), cla: loadAssignment(name, nodes, onlyPassing, kind)}, nil
		})
	return a.cla
}
