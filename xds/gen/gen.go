package gen

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// The type URLs Resources is keyed by (go-control-plane's constants).
const (
	ListenerType = resource.ListenerType
	ClusterType  = resource.ClusterType
	RouteType    = resource.RouteType
	EndpointType = resource.EndpointType
)

// Resources is a complete set of Envoy resources for one proxy: by type URL
// (ListenerType, ...), then by resource name. Its underlying type is the
// ADS server's xds.Resources, so a set converts to it directly. Generate
// always sets the four type keys, possibly to empty maps: an empty type
// means "no resource of this type", not "unchanged".
type Resources map[string]map[string]proto.Message

// Errors of this package.
var (
	// ErrInvalidSnapshot is returned for a snapshot that lacks what its kind
	// needs (roots, a leaf, the kind-specific part) or is malformed (a
	// discovery chain naming a node or target it does not have).
	ErrInvalidSnapshot = errors.New("gen: invalid snapshot")
	// ErrUnsupportedKind is returned for a service kind with no generator.
	ErrUnsupportedKind = errors.New("gen: unsupported proxy kind")
	// ErrInvalidResources wraps every problem Validate finds.
	ErrInvalidResources = errors.New("gen: invalid resources")
	// ErrInvalidEscapeHatch is returned for an escape-hatch override
	// (envoy_public_listener_json, envoy_local_cluster_json,
	// envoy_listener_json, envoy_cluster_json) that cannot be delivered
	// as given: it is not the protojson of the Envoy resource its key
	// names, fails validation, or names a resource the proxy does not
	// get. The whole generation fails, as in Consul; see escape_hatches.go.
	ErrInvalidEscapeHatch = errors.New("gen: invalid escape hatch")
)

// Generate returns the resources of the proxy or gateway snap describes.
//
// Upstreams whose discovery chain is not known yet are left out (their
// listener too); targets whose endpoints are not known yet get an empty
// endpoint set. When two parts of the snapshot produce a resource of the
// same name, the first in a deterministic order (upstreams by ID) wins.
func Generate(snap *proxycfg.ConfigSnapshot) (Resources, error) {
	return generate(nil, snap, nil, nil)
}

// generate is Generate, reusing parts of a Generator's previous generation
// when m is set, sharing endpoint sets through endpoints when set, and
// writing the result into dst when set (see Generator.GenerateInto).
func generate(dst Resources, snap *proxycfg.ConfigSnapshot, m *memo, endpoints *EndpointCache) (Resources, error) {
	if snap == nil {
		return nil, fmt.Errorf("%w: nil snapshot", ErrInvalidSnapshot)
	}
	if snap.Roots == nil || len(snap.Roots.Roots) == 0 {
		return nil, fmt.Errorf("%w: %s has no CA roots", ErrInvalidSnapshot, snap.ProxyID)
	}
	if snap.Service == nil {
		return nil, fmt.Errorf("%w: %s has no service", ErrInvalidSnapshot, snap.ProxyID)
	}
	b := newBuilder(snap)
	b.memo, b.endpoints = m, endpoints
	var prev *memo
	if m != nil {
		prev = m.prev
		b.parts = m.all[:0]
		if cap(b.parts) == 0 && prev != nil {
			b.parts = make([]*part, 0, len(prev.all))
		}
	}
	var err error
	switch snap.Kind {
	case structs.ServiceKindConnectProxy:
		err = b.connectProxy()
	case structs.ServiceKindIngressGateway:
		err = b.ingressGateway()
	case structs.ServiceKindTerminatingGateway:
		err = b.terminatingGateway()
	case structs.ServiceKindMeshGateway:
		err = b.meshGateway()
	default:
		err = fmt.Errorf("%w: %q", ErrUnsupportedKind, snap.Kind)
	}
	if err == nil {
		err = b.err
	}
	if err != nil {
		return nil, fmt.Errorf("gen: %s: %w", snap.ProxyID, err)
	}
	res, by, types := b.assemble(prev, dst)
	if m != nil {
		m.all = b.parts // its storage, recycled with m's
	}
	if err := b.checkOverrideRefs(res); err != nil {
		return nil, fmt.Errorf("gen: %s: %w", snap.ProxyID, err)
	}
	if m != nil {
		m.types, m.by, m.assembled = types, by, true
	}
	return res, nil
}

// builder accumulates the resources of one generation.
type builder struct {
	snap *proxycfg.ConfigSnapshot
	// td is the trust domain; rootsPEMs every trusted root, concatenated,
	// once trustedCA first needs it (a generation that reuses every TLS
	// context does not).
	td        string
	rootsPEMs *string
	// parts are the generation's resources, in the order they were added,
	// grouped by the part that added them; cur is the part adds go to (nil
	// starts a new anonymous one). assemble turns them into Resources.
	parts []*part
	cur   *part
	// memo, when generating for a Generator, holds the previous
	// generation's reusable parts and collects this one's.
	memo *memo
	// endpoints shares endpoint sets between proxies; nil builds them.
	endpoints *EndpointCache
	// err is the first failure to pack a typed config (see any).
	err error
}

func newBuilder(snap *proxycfg.ConfigSnapshot) *builder {
	return &builder{snap: snap, td: snap.TrustDomain()}
}

// trustedCA is every trusted root certificate, concatenated (rootsPEM).
func (b *builder) trustedCA() string {
	if b.rootsPEMs == nil {
		pems := rootsPEM(b.snap.Roots)
		b.rootsPEMs = &pems
	}
	return *b.rootsPEMs
}

// add records a resource in the current part (see assemble for what
// happens to duplicates).
func (b *builder) add(typeURL, name string, m proto.Message) {
	t, ok := typeIndex(typeURL)
	if !ok {
		if b.err == nil {
			b.err = fmt.Errorf("add %s %q: unknown type", typeURL, name)
		}
		return
	}
	if b.cur == nil {
		b.cur = &part{}
		b.parts = append(b.parts, b.cur)
	}
	b.cur.resources = append(b.cur.resources, recorded{typeIdx: t, name: name, msg: m})
	b.cur.count[t]++ // int32: a part never holds 2^31 resources
}

// addListener adds a listener (see assemble for the address rule).
func (b *builder) addListener(l *listenerv3.Listener) { b.add(ListenerType, l.GetName(), l) }

// resourceTypes are the types a generation produces, in typeIndex order.
var resourceTypes = [...]string{ListenerType, ClusterType, RouteType, EndpointType}

// endpointTypeIdx is EndpointType's index in resourceTypes.
const endpointTypeIdx = 3

// typeIndex places a type URL in resourceTypes.
func typeIndex(typeURL string) (int, bool) {
	switch typeURL {
	case ListenerType:
		return 0, true
	case ClusterType:
		return 1, true
	case RouteType:
		return 2, true
	case EndpointType:
		return endpointTypeIdx, true
	}
	return 0, false
}

// contributors are, per type, the parts that added resources of it, in
// order.
type contributors [len(resourceTypes)][]*part

// assemble builds the Resources of the generation from its parts. A
// resource is kept unless one of that name was added before it (the first
// one wins, see Generate). A listener is also left out when one was added
// before it on the same address: Envoy cannot bind twice, and a
// registration naming, say, the public port as an upstream's bind port
// must not take every listener down. The first one wins: the public
// listener, then upstreams by ID.
//
// A type whose contributing parts are the very parts (reused, in the same
// order) that made it in prev is prev's map itself: the result is equal,
// and sharing it tells the ADS server the type did not change without
// looking at its resources.
//
// The result is dst, emptied first, when dst is set; its type maps are
// also returned in resourceTypes order, which is how the next generation
// finds them (dst is the caller's to reuse).
func (b *builder) assemble(prev *memo, dst Resources) (Resources, contributors, [len(resourceTypes)]map[string]proto.Message) {
	// One backing array for the four lists: generations are frequent.
	var lens [len(resourceTypes)]int
	total := 0
	for _, p := range b.parts {
		for t, n := range p.count {
			if n > 0 {
				lens[t]++
				total++
			}
		}
	}
	var backing []*part
	if m := b.memo; m != nil && cap(m.byParts) >= total {
		backing = m.byParts[:0:total]
		m.byParts = m.byParts[:total] // filled below, through by
	} else {
		backing = make([]*part, 0, total)
		if m != nil {
			m.byParts = backing[:total]
		}
	}
	var by contributors
	for t := range by {
		by[t], backing = backing[:0:lens[t]], backing[lens[t]:lens[t]:cap(backing)]
	}
	for _, p := range b.parts {
		for t, n := range p.count {
			if n > 0 {
				by[t] = append(by[t], p)
			}
		}
	}
	res := dst
	if res == nil {
		res = make(Resources, len(resourceTypes))
	} else {
		clear(res)
	}
	var types [len(resourceTypes)]map[string]proto.Message
	for t, typeURL := range resourceTypes {
		if prev != nil && prev.assembled && slices.Equal(prev.by[t], by[t]) {
			types[t] = prev.types[t]
			res[typeURL] = types[t]
			continue
		}
		size := added(by[t], t)
		// Names several parts add (two upstreams with a target in
		// common) are counted once per part. When the previous
		// generation's parts added as many resources (an endpoint
		// change), its set's size is the likely exact one: a map sized
		// for the duplicates too may take more memory, even more
		// allocations (past 8 entries).
		if prev != nil && prev.assembled {
			if n := len(prev.types[t]); n < size && added(prev.by[t], t) == size {
				size = n
			}
		}
		if t == endpointTypeIdx && b.endpoints != nil {
			types[t] = b.endpoints.sharedEDS(by[t], t, size)
		} else {
			types[t] = collectType(by[t], t, size)
		}
		res[typeURL] = types[t]
	}
	return res, by, types
}

// collectType is the map of the resources of type t that parts add,
// sized for size of them, with the rules of assemble.
func collectType(parts []*part, t, size int) map[string]proto.Message {
	set := make(map[string]proto.Message, size)
	var addrs map[listenerAddr]bool
	for _, p := range parts {
		for _, r := range p.resources {
			if r.typeIdx != t {
				continue
			}
			if _, dup := set[r.name]; dup {
				continue
			}
			// A gRPC client's api_listeners bind nothing.
			if l, ok := r.msg.(*listenerv3.Listener); ok && l.GetAddress().GetSocketAddress() != nil {
				sa := l.GetAddress().GetSocketAddress()
				key := listenerAddr{addr: sa.GetAddress(), port: sa.GetPortValue()}
				if addrs[key] {
					continue
				}
				if addrs == nil {
					addrs = map[listenerAddr]bool{}
				}
				addrs[key] = true
			}
			set[r.name] = r.msg
		}
	}
	return set
}

// added is the number of resources of type t that parts added.
func added(parts []*part, t int) int {
	n := 0
	for _, p := range parts {
		n += int(p.count[t])
	}
	return n
}

// listenerAddr is the address a listener binds.
type listenerAddr struct {
	addr string
	port uint32
}

// any packs a typed config. Packing is deterministic: with map fields
// (RBAC policies, protocol options) a plain Marshal orders entries at
// random, and equal resources would get different versions and be re-sent.
// Packing a valid message cannot fail; should it anyway, the first error is
// kept and returned by Generate.
func (b *builder) any(m proto.Message) *anypb.Any {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("pack %T: %w", m, err)
		}
		return &anypb.Any{}
	}
	return a
}

// sortedKeys returns a string-keyed map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
