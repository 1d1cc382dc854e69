package gen

import (
	"sync"
	"unsafe"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// Generator generates the successive snapshots of one proxy, reusing what
// did not change since the previous call: a sidecar's public listener,
// each of its upstreams (clusters, routes, listener) and each upstream's
// endpoints are rebuilt only when one of their inputs is a different
// value. Snapshots make this cheap to tell: proxycfg never modifies a
// delivered value, it replaces it, so an unchanged input is the same
// pointer.
//
// An endpoint change of one upstream thus costs that upstream's endpoint
// sets, and every other resource is the very message of the previous set,
// which the ADS server recognises without re-encoding it. A type none of
// whose parts changed is even the previous result's very map (listeners,
// clusters and routes after an endpoint change), so the server can tell
// the type is unchanged without looking inside. The Generator's own
// bookkeeping is recycled from one generation to the next, so that such
// a change allocates little more than the new endpoint sets' part and the
// result's new maps: with a generation per proxy per change, garbage is
// what makes the collector run.
//
// The result always equals Generate's for the same snapshot. Use one
// Generator per proxy (the reuse is keyed on that proxy's values); it is
// safe for concurrent use, though a proxy's snapshots usually come one at
// a time. Gateways are generated without reuse.
type Generator struct {
	// Endpoints, when set, shares endpoint sets with the Generators of
	// other proxies (see EndpointCache). Set it before the first Generate.
	Endpoints *EndpointCache

	mu   sync.Mutex
	prev *memo
	// spare is the memo before prev, emptied: its storage (not its
	// contents) is the next generation's, so that a steady state of
	// generations allocates no bookkeeping. Only the memo's own slices
	// are recycled, never parts or type maps, which the ADS server holds.
	spare *memo
}

// Generate returns the resources of snap; see the package function
// Generate.
func (g *Generator) Generate(snap *proxycfg.ConfigSnapshot) (Resources, error) {
	return g.GenerateInto(nil, snap)
}

// GenerateInto is Generate, with the result written into dst (emptied
// first) instead of a new Resources when dst is not nil: a caller done
// with the previous result's outer map passes it back, and an endpoint
// change then allocates no outer map per proxy. Only the outer map is
// reused: type maps are never modified once returned (an unchanged type
// is the previous result's very map). On error, dst's content is
// unspecified.
func (g *Generator) GenerateInto(dst Resources, snap *proxycfg.ConfigSnapshot) (Resources, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.spare
	if m == nil {
		m = &memo{}
	}
	g.spare = nil
	m.prev = g.prev
	res, err := generate(dst, snap, m, g.Endpoints)
	// Only what this generation used is kept: removed upstreams are
	// forgotten.
	m.prev = nil
	if err != nil {
		m.reset()
		g.spare = m
		return nil, err
	}
	if g.prev != nil {
		g.prev.reset()
		g.spare = g.prev
	}
	g.prev = m
	return res, nil
}

// recorded is one resource a part of a generation added.
type recorded struct {
	typeIdx int // in resourceTypes
	name    string
	msg     proto.Message
}

// part is the output of one part of a generation: a reusable one (made
// by reuse, with the key of its inputs) or an anonymous run of resources
// added outside reuse.
type part struct {
	key       any // a *K of reusePart; nil for an anonymous part
	resources []recorded
	// count is the number of resources per type (resourceTypes order);
	// int32 keeps parts small.
	count [len(resourceTypes)]int32
	// filter is an upstream's network filter (transparent proxies reuse
	// it in their outbound listener).
	filter *listenerv3.Filter
	// clusters are an upstream's chain clusters (chainClusters), kept
	// for its endpoints part: an endpoint change lists them without
	// allocating. Nil when the upstream's cluster is an override.
	clusters []chainCluster
	// overrides is what escape hatches recorded in the part; nil for
	// none, the common case, which keeps parts small.
	overrides *partOverrides
}

// partOverrides is what a part's escape hatches record.
type partOverrides struct {
	// refs are what the overrides among the part's resources name;
	// checkOverrideRefs verifies them against every generation the part
	// is in (the resources they name may come from other parts).
	refs []ref
	// cluster is set when an upstream's cluster is its
	// envoy_cluster_json; eds is then the endpoint set that cluster reads
	// ("" for a cluster that is not EDS).
	cluster bool
	eds     string
}

// memo holds the reusable parts of the previous generation (prev) and
// collects those of the current one, with the generation's result and,
// per type, the parts it was assembled from.
//
// Its slices are storage a Generator recycles (see Generator.spare): a
// memo is emptied (reset) once it is neither the current generation's
// nor the previous one's, and its capacity serves the next generation.
type memo struct {
	prev *memo
	// parts are the generation's reusable parts, in the order it made
	// them (the public part, then upstreams by ID). That order changes
	// little from one generation to the next, so lookup finds a part of
	// prev at the position after the last one found, without a map.
	parts []memoPart
	// next is where in prev.parts lookup looks first; scans counts its
	// linear searches, after which it indexes prev.parts (index).
	next  int
	scans int
	index map[partID]int
	// all is the storage of the builder's parts; byParts that of by.
	all     []*part
	byParts []*part
	// types are the generation's type maps (resourceTypes order), and by
	// the parts each was assembled from; assembled says the generation
	// got that far.
	types     [len(resourceTypes)]map[string]proto.Message
	by        contributors
	assembled bool
}

// memoPart is a reusable part of a generation, with its ID.
type memoPart struct {
	id partID
	p  *part
}

// maxScans is how many parts lookup searches for linearly in a
// generation before it indexes the previous generation's parts: a few
// added or removed upstreams cost a scan each, many would cost a scan
// each of many.
const maxScans = 8

// lookup returns the previous generation's part id, or nil.
func (m *memo) lookup(id partID) *part {
	prev := m.prev
	if prev == nil {
		return nil
	}
	ps := prev.parts
	if i := m.next; i < len(ps) && ps[i].id == id {
		m.next = i + 1
		return ps[i].p
	}
	if prev.index == nil && m.scans < maxScans {
		m.scans++
		for i := range ps {
			if ps[i].id == id {
				m.next = i + 1
				return ps[i].p
			}
		}
		return nil
	}
	if prev.index == nil {
		prev.index = make(map[partID]int, len(ps))
		for i := len(ps) - 1; i >= 0; i-- { // the first of an ID wins
			prev.index[ps[i].id] = i
		}
	}
	if i, ok := prev.index[id]; ok {
		m.next = i + 1
		return ps[i].p
	}
	return nil
}

// store records p as the generation's part id.
func (m *memo) store(id partID, p *part) {
	if m.parts == nil && m.prev != nil {
		m.parts = make([]memoPart, 0, len(m.prev.parts))
	}
	m.parts = append(m.parts, memoPart{id: id, p: p})
}

// reset empties m for reuse as the next generation's memo, keeping the
// capacity of its slices. Clearing them lets the parts and snapshots
// they pointed to go.
func (m *memo) reset() {
	// Up to their capacity: a failed generation may have left pointers
	// past a slice's length.
	clear(m.parts[:cap(m.parts)])
	clear(m.all[:cap(m.all)])
	clear(m.byParts[:cap(m.byParts)])
	*m = memo{
		parts:   m.parts[:0],
		all:     m.all[:0],
		byParts: m.byParts[:0],
	}
}

// upstreamKey is every input of an upstream's clusters, routes and
// listener: the parts of its UpstreamSnapshot other than the endpoints,
// which proxycfg keeps (same pointers) when only endpoints change, and
// proxy-defaults' access logs (by value: the resolved service config is
// a new value whenever any entry behind it changes, the access logs
// rarely).
type upstreamKey struct {
	def        *structs.Upstream
	cfg        *structs.UpstreamConfig
	chain      *structs.CompiledDiscoveryChain
	leaf       *structs.IssuedCert
	roots      *structs.IndexedCARoots
	mesh       *structs.MeshConfigEntry
	dc         string
	accessLogs structs.AccessLogsConfig
}

// endpointsKey is every input of an upstream's endpoint sets: any change
// of the UpstreamSnapshot (a new value for every endpoint change) rebuilds
// them.
type endpointsKey struct {
	u  *proxycfg.UpstreamSnapshot
	dc string
}

// publicKey is every input of a sidecar's public part: its public
// listener, local_app and exposed paths (the registration's and the
// resolved service config's Expose are behind svc and svcConfig).
type publicKey struct {
	svc          *structs.NodeService
	leaf         *structs.IssuedCert
	intentions   *(*structs.Intention)
	nIntentions  int
	svcConfig    *structs.ServiceConfigResponse
	roots        *structs.IndexedCARoots
	mesh         *structs.MeshConfigEntry
	defaultAllow bool
}

// partID names a part within a proxy: its kind and, for an upstream's
// parts, the upstream.
type partID struct {
	kind     partKind
	upstream proxycfg.UpstreamID
}

type partKind uint8

const (
	partPublic partKind = iota
	partUpstream
	partEndpoints
	partOriginalDst
)

// reuse generates a part, or replays the previous generation's output of
// it when its key is unchanged. Without a memo (Generate) every part is
// generated. K is a comparable struct of the part's inputs: comparing it
// unboxed keeps the common case (nothing changed) free of allocations.
func reuse[K comparable](b *builder, id partID, key K, gen func() (*listenerv3.Filter, error)) (*listenerv3.Filter, error) {
	p, err := reusePart(b, id, key, gen)
	return p.filter, err
}

// reusePart is reuse, returning the part itself: what gen recorded in
// it besides resources (b.cur is the part while gen runs) comes back
// with it when the part is replayed.
func reusePart[K comparable](b *builder, id partID, key K, gen func() (*listenerv3.Filter, error)) (*part, error) {
	var prev *part
	if b.memo != nil {
		if p := b.memo.lookup(id); p != nil {
			if k, ok := p.key.(*K); ok && *k == key {
				b.parts = append(b.parts, p)
				b.cur = nil
				b.memo.store(id, p)
				return p, nil
			}
			prev = p
		}
	}
	// The part and its key in one allocation; the key is boxed as a
	// pointer into it, which costs none. A part likely has as many
	// resources as before (an endpoint change): one, the most frequent
	// (an upstream's endpoint set), also comes in that allocation.
	n := 0
	if prev != nil {
		n = len(prev.resources)
	}
	var p *part
	if n == 1 {
		kp := &keyedPart1[K]{key: key}
		p = &kp.part
		p.key = &kp.key
		p.resources = kp.one[:0:1]
	} else {
		kp := &keyedPart[K]{key: key}
		p = &kp.part
		p.key = &kp.key
		if n > 1 {
			p.resources = make([]recorded, 0, n)
		}
	}
	b.parts = append(b.parts, p)
	b.cur = p
	filter, err := gen()
	b.cur = nil
	p.filter = filter
	if err != nil || b.err != nil || b.memo == nil {
		return p, err
	}
	b.memo.store(id, p)
	return p, nil
}

// keyedPart is a reusable part with its key (part.key points to key).
type keyedPart[K comparable] struct {
	part
	key K
}

// keyedPart1 is keyedPart with room for one resource (part.resources
// starts as one[:0:1]).
type keyedPart1[K comparable] struct {
	part
	key K
	one [1]recorded
}

func (b *builder) upstreamKey(u *proxycfg.UpstreamSnapshot, leaf *structs.IssuedCert) upstreamKey {
	k := upstreamKey{def: u.Upstream, cfg: u.Config, chain: u.Chain, leaf: leaf, roots: b.snap.Roots, mesh: b.snap.MeshConfig, dc: b.snap.Datacenter}
	if c := b.proxyAccessLogs(); c != nil {
		k.accessLogs = *c
	}
	return k
}

func (b *builder) endpointsKey(u *proxycfg.UpstreamSnapshot) endpointsKey {
	return endpointsKey{u: u, dc: b.snap.Datacenter}
}

func (b *builder) publicKey(cp *proxycfg.ConnectProxySnapshot) publicKey {
	return publicKey{
		svc: b.snap.Service, leaf: cp.Leaf,
		intentions: unsafe.SliceData(cp.Intentions), nIntentions: len(cp.Intentions), //nolint:gosec // the backing array's identity, part of a comparable key, never dereferenced
		svcConfig: cp.ServiceConfig, roots: b.snap.Roots, mesh: b.snap.MeshConfig,
		defaultAllow: b.snap.IntentionDefaultAllow,
	}
}
