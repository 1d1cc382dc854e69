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
// the type is unchanged without looking inside.
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
}

// Generate returns the resources of snap; see the package function
// Generate.
func (g *Generator) Generate(snap *proxycfg.ConfigSnapshot) (Resources, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := &memo{prev: g.prev}
	res, err := generate(snap, m, g.Endpoints)
	if err != nil {
		return nil, err
	}
	// Only what this generation used is kept: removed upstreams are
	// forgotten.
	m.prev = nil
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
	key       any
	resources []recorded
	// count is the number of resources per type (resourceTypes order).
	count [len(resourceTypes)]int
	// filter is an upstream's network filter (transparent proxies reuse
	// it in their outbound listener).
	filter *listenerv3.Filter
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
type memo struct {
	prev  *memo
	parts map[partID]*part
	res   Resources
	by    contributors
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
	svcConfig    *proxycfg.ServiceConfigResponse
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
	if b.memo != nil && b.memo.prev != nil {
		if p := b.memo.prev.parts[id]; p != nil {
			if k, ok := p.key.(K); ok && k == key {
				b.parts = append(b.parts, p)
				b.cur = nil
				b.memo.store(id, p)
				return p, nil
			}
		}
	}
	p := &part{key: key}
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

func (m *memo) store(id partID, p *part) {
	if m.parts == nil {
		size := 8
		if m.prev != nil {
			size = len(m.prev.parts)
		}
		m.parts = make(map[partID]*part, size)
	}
	m.parts[id] = p
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
		intentions: unsafe.SliceData(cp.Intentions), nIntentions: len(cp.Intentions),
		svcConfig: cp.ServiceConfig, roots: b.snap.Roots, mesh: b.snap.MeshConfig,
		defaultAllow: b.snap.IntentionDefaultAllow,
	}
}
