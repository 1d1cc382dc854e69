package gen

import (
	"errors"
	"fmt"
	"sort"
	"strconv"

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
)

// Generate returns the resources of the proxy or gateway snap describes.
//
// Upstreams whose discovery chain is not known yet are left out (their
// listener too); targets whose endpoints are not known yet get an empty
// endpoint set. When two parts of the snapshot produce a resource of the
// same name, the first in a deterministic order (upstreams by ID) wins.
func Generate(snap *proxycfg.ConfigSnapshot) (Resources, error) {
	return generate(snap, nil)
}

// generate is Generate, reusing parts of a Generator's previous generation
// when m is set.
func generate(snap *proxycfg.ConfigSnapshot, m *memo) (Resources, error) {
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
	b.memo = m
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
	return b.res, nil
}

// builder accumulates the resources of one generation.
type builder struct {
	snap *proxycfg.ConfigSnapshot
	res  Resources
	// td is the trust domain; rootsPEMs every trusted root, concatenated,
	// once trustedCA first needs it (a generation that reuses every TLS
	// context does not).
	td        string
	rootsPEMs *string
	// addrs are the addresses listeners were added on (see put).
	addrs map[string]bool
	// memo, when generating for a Generator, holds the previous
	// generation's reusable parts and collects this one's; rec records the
	// resources of the part being generated.
	memo *memo
	rec  *[]recorded
	// err is the first failure to pack a typed config (see any).
	err error
}

func newBuilder(snap *proxycfg.ConfigSnapshot) *builder {
	b := &builder{
		snap: snap,
		res: Resources{
			ListenerType: {},
			ClusterType:  {},
			RouteType:    {},
			EndpointType: {},
		},
		td: snap.TrustDomain(),
	}
	return b
}

// trustedCA is every trusted root certificate, concatenated (rootsPEM).
func (b *builder) trustedCA() string {
	if b.rootsPEMs == nil {
		pems := rootsPEM(b.snap.Roots)
		b.rootsPEMs = &pems
	}
	return *b.rootsPEMs
}

// add stores a resource unless one of that name exists already (the first
// one wins, see Generate). While an upstream is being generated for a
// Generator, the resource is also recorded for reuse.
func (b *builder) add(typeURL, name string, m proto.Message) {
	if b.rec != nil {
		*b.rec = append(*b.rec, recorded{typeURL: typeURL, name: name, msg: m})
	}
	b.put(typeURL, name, m)
}

// addListener adds a listener (see put for the address rule).
func (b *builder) addListener(l *listenerv3.Listener) { b.add(ListenerType, l.GetName(), l) }

// put stores a resource unless one of that name exists already. A listener
// is also left out when another one was added on the same address: Envoy
// cannot bind twice, and a registration naming, say, the public port as an
// upstream's bind port must not take every listener down. The first one
// wins: the public listener, then upstreams by ID.
func (b *builder) put(typeURL, name string, m proto.Message) {
	set := b.res[typeURL]
	if _, ok := set[name]; ok {
		return
	}
	if l, ok := m.(*listenerv3.Listener); ok {
		sa := l.GetAddress().GetSocketAddress()
		key := sa.GetAddress() + ":" + strconv.FormatUint(uint64(sa.GetPortValue()), 10)
		if b.addrs[key] {
			return
		}
		if b.addrs == nil {
			b.addrs = map[string]bool{}
		}
		b.addrs[key] = true
	}
	set[name] = m
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

// sortedUpstreams returns the upstreams in ID order, so that generation
// (and "first wins") is deterministic.
func sortedUpstreams(ups map[proxycfg.UpstreamID]*proxycfg.UpstreamSnapshot) []*proxycfg.UpstreamSnapshot {
	ids := make([]string, 0, len(ups))
	for id, u := range ups {
		if u != nil {
			ids = append(ids, string(id))
		}
	}
	sort.Strings(ids)
	out := make([]*proxycfg.UpstreamSnapshot, len(ids))
	for i, id := range ids {
		out[i] = ups[proxycfg.UpstreamID(id)]
	}
	return out
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
