package proxycfg

import (
	"slices"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// ConfigSnapshot is everything needed to configure one proxy or gateway at
// one moment. Snapshots are immutable once delivered and shared by every
// watcher of the proxy: read them, never modify them (including the
// data-source results they point to). Each delivery is a fresh value, so a
// consumer may keep an old snapshot and compare it with a new one.
//
// Exactly one of the kind-specific parts is set, matching Kind.
type ConfigSnapshot struct {
	// ProxyID is the ID the proxy was registered and watched under. It
	// holds the ACL token: log ProxyID.String(), never the struct.
	ProxyID ProxyID
	Kind    structs.ServiceKind
	// Service is the proxy's registration (address, port, Proxy block
	// with its upstreams, expose paths, ...).
	Service *structs.NodeService
	// Datacenter is the local datacenter.
	Datacenter string
	// Version increases with every snapshot delivered for ProxyID,
	// across restarts of its state machine.
	Version uint64

	// Roots are the trusted CA roots (always set).
	Roots *structs.IndexedCARoots
	// MeshConfig is the mesh config entry, nil when none exists.
	MeshConfig *structs.MeshConfigEntry
	// IntentionDefaultAllow decides connections no intention matches.
	IntentionDefaultAllow bool

	ConnectProxy       *ConnectProxySnapshot
	MeshGateway        *MeshGatewaySnapshot
	IngressGateway     *IngressGatewaySnapshot
	TerminatingGateway *TerminatingGatewaySnapshot
}

// TrustDomain is the mesh's trust domain ("<cluster id>.consul"), from the
// roots.
func (s *ConfigSnapshot) TrustDomain() string {
	if s.Roots == nil {
		return ""
	}
	return s.Roots.TrustDomain
}

// Leaf is the certificate the proxy presents: the sidecar's (for its
// destination service) or the ingress gateway's; nil for other kinds.
func (s *ConfigSnapshot) Leaf() *structs.IssuedCert {
	switch {
	case s.ConnectProxy != nil:
		return s.ConnectProxy.Leaf
	case s.IngressGateway != nil:
		return s.IngressGateway.Leaf
	}
	return nil
}

// ConnectProxySnapshot is the sidecar-specific part of a snapshot.
type ConnectProxySnapshot struct {
	// Leaf is the certificate of the proxied (destination) service.
	Leaf *structs.IssuedCert
	// Intentions are those applying to connections to the destination
	// service, highest precedence first (possibly empty).
	Intentions structs.Intentions
	// ServiceConfig is the merged proxy-defaults and service-defaults of
	// the destination service (protocol, mode, expose, ...).
	ServiceConfig *structs.ServiceConfigResponse
	// Mode is the effective proxy mode: the registration's, else the
	// central configuration's.
	Mode structs.ProxyMode
	// Upstreams are the explicit upstreams of the registration and, in
	// transparent mode, the implicit ones (CentrallyConfigured), sorted
	// by ID. Prepared-query upstreams are not supported and are absent.
	Upstreams Upstreams
}

// Upstreams are upstreams sorted by ID, each ID once, none nil. Like
// everything in a snapshot they are read-only: With and Without return
// modified copies. A slice, not a map: a snapshot is built per proxy per
// change, and copying a few pointers is a fraction of copying a map.
type Upstreams []*UpstreamSnapshot

// NewUpstreams sorts ups into a new Upstreams, leaving out nils; of two
// with one ID, the last is kept.
func NewUpstreams(ups ...*UpstreamSnapshot) Upstreams {
	out := make(Upstreams, 0, len(ups))
	for _, u := range ups {
		if u != nil {
			out = append(out, u)
		}
	}
	slices.SortStableFunc(out, func(a, b *UpstreamSnapshot) int { return strings.Compare(string(a.ID), string(b.ID)) })
	kept := out[:0]
	for i, u := range out {
		if i+1 < len(out) && out[i+1].ID == u.ID {
			continue
		}
		kept = append(kept, u)
	}
	return kept
}

// Get returns the upstream of an ID, nil when there is none.
func (us Upstreams) Get(id UpstreamID) *UpstreamSnapshot {
	if i, ok := us.find(id); ok {
		return us[i]
	}
	return nil
}

// With returns a copy of us with u in place of the upstream of its ID, or
// added.
func (us Upstreams) With(u *UpstreamSnapshot) Upstreams {
	i, ok := us.find(u.ID)
	if ok {
		out := slices.Clone(us)
		out[i] = u
		return out
	}
	out := make(Upstreams, 0, len(us)+1)
	out = append(out, us[:i]...)
	out = append(out, u)
	return append(out, us[i:]...)
}

// Without returns a copy of us without the upstream of id.
func (us Upstreams) Without(id UpstreamID) Upstreams {
	i, ok := us.find(id)
	if !ok {
		return slices.Clone(us)
	}
	return slices.Delete(slices.Clone(us), i, i+1)
}

// find is where id is, or would be, in us.
func (us Upstreams) find(id UpstreamID) (int, bool) {
	return slices.BinarySearchFunc(us, id, func(u *UpstreamSnapshot, id UpstreamID) int { return strings.Compare(string(u.ID), string(id)) })
}

// UpstreamID identifies an upstream of a proxy or an ingress gateway: the
// destination service name, followed by "?dc=<dc>" when the upstream names
// a datacenter (Consul's convention, so that two upstreams to one service
// in different datacenters stay apart).
type UpstreamID string

// NewUpstreamID returns the ID of an upstream definition.
func NewUpstreamID(u *structs.Upstream) UpstreamID {
	if u.Datacenter != "" {
		return UpstreamID(u.DestinationName + "?dc=" + u.Datacenter)
	}
	return UpstreamID(u.DestinationName)
}

// UpstreamSnapshot is one upstream: its definition, its discovery chain
// and the endpoints of every target of that chain. Every change of an
// upstream is a new UpstreamSnapshot; an unchanged one stays the same
// pointer from snapshot to snapshot. Its endpoint maps may be shared with
// other proxies' snapshots: like everything in a snapshot, read-only.
type UpstreamSnapshot struct {
	ID UpstreamID
	// Upstream is the definition: the registration's, or synthesized for
	// implicit (transparent) and ingress upstreams.
	Upstream *structs.Upstream
	// Config is what the central configuration says about this upstream
	// (service-defaults UpstreamConfig of the proxied service); nil when
	// nothing.
	Config *structs.UpstreamConfig
	// Chain is the compiled discovery chain, nil until it is known (xDS
	// should leave the upstream out until then).
	Chain *structs.CompiledDiscoveryChain
	// Endpoints maps each target ID of Chain to the target's Connect
	// endpoints, every instance with its checks. A target missing from
	// the map is not known yet; an empty list means no instance.
	Endpoints map[string]structs.CheckServiceNodes
	// GatewayEndpoints maps a datacenter to its mesh gateways, for the
	// targets routed through mesh gateways (MeshGatewayDatacenter).
	GatewayEndpoints map[string]structs.CheckServiceNodes
}

// MeshGatewayDatacenter says through which datacenter's mesh gateways a
// proxy in localDC reaches target t: "" for direct (same datacenter, or
// mode none), localDC for mode "local", the target's datacenter for mode
// "remote".
func MeshGatewayDatacenter(t *structs.DiscoveryTarget, localDC string) string {
	if t == nil || t.Datacenter == "" || t.Datacenter == localDC {
		return ""
	}
	switch t.MeshGateway.Mode {
	case "local":
		return localDC
	case "remote":
		return t.Datacenter
	}
	return ""
}

// IngressGatewaySnapshot is the ingress-gateway-specific part of a
// snapshot.
type IngressGatewaySnapshot struct {
	// Leaf is the gateway's own certificate (it originates mTLS to
	// upstreams).
	Leaf *structs.IssuedCert
	// Config is the gateway's config entry, nil when none exists.
	Config *structs.IngressGatewayConfigEntry
	// Listeners are keyed by (protocol, port).
	Listeners map[IngressListenerKey]*IngressListenerSnapshot
	// Upstreams are the exposed services, sorted by ID (their name), each
	// with its chain and endpoints; several listeners may share one.
	Upstreams Upstreams
	// ServiceConfig is the gateway's own resolved service config
	// (proxy-defaults merged with its service-defaults: access logs,
	// ...), nil until known: snapshots do not wait for it.
	ServiceConfig *structs.ServiceConfigResponse
}

// IngressListenerKey identifies an ingress listener.
type IngressListenerKey struct {
	Protocol string
	Port     int
}

// IngressListenerSnapshot is one ingress listener and what it exposes.
type IngressListenerSnapshot struct {
	Key IngressListenerKey
	// Config is the listener's definition in the config entry (TLS, ...),
	// nil if the entry does not (yet) list it.
	Config *structs.IngressListener
	// Services are the gateway services on this listener, by service
	// name; Upstreams their IDs in the same order.
	Services  []*structs.GatewayService
	Upstreams []UpstreamID
}

// TerminatingGatewaySnapshot is the terminating-gateway-specific part of a
// snapshot.
type TerminatingGatewaySnapshot struct {
	// Services are the linked services by name.
	Services map[string]*TerminatingService
	// ServiceConfig is the gateway's own resolved service config
	// (proxy-defaults merged with its service-defaults: access logs,
	// ...), nil until known: snapshots do not wait for it.
	ServiceConfig *structs.ServiceConfigResponse
}

// TerminatingService is one service linked to a terminating gateway,
// with everything the gateway needs to stand in for it.
type TerminatingService struct {
	Link *structs.GatewayService
	// Endpoints are the service's own instances (not Connect
	// endpoints), nil until known.
	Endpoints structs.CheckServiceNodes
	// Leaf is the service's certificate: the gateway presents it to
	// mesh clients. Nil until known.
	Leaf *structs.IssuedCert
	// Intentions apply to connections to the service; IntentionsSet
	// says whether they are known (an unknown list must deny, not allow).
	Intentions    structs.Intentions
	IntentionsSet bool
	// Config is the service's merged central configuration (protocol),
	// nil until known.
	Config *structs.ServiceConfigResponse
	// Resolver is the service's resolver entry, nil when none exists;
	// ResolverSet says whether the answer is known: a service served
	// before it would lose its subsets and connect timeout until it came.
	Resolver    *structs.ServiceResolverConfigEntry
	ResolverSet bool
}

// Ready reports whether everything needed to serve the service is known
// (as Consul's ValidServices: endpoints, leaf, intentions, config and
// whether there is a resolver).
func (t *TerminatingService) Ready() bool {
	return t.Endpoints != nil && t.Leaf != nil && t.IntentionsSet && t.Config != nil && t.ResolverSet
}

// MeshGatewaySnapshot is the mesh-gateway-specific part of a snapshot.
type MeshGatewaySnapshot struct {
	// Services maps each service of the local datacenter to its Connect
	// endpoints (a service appears once they are known).
	Services map[string]structs.CheckServiceNodes
	// Resolvers are the service-resolver entries by service name (their
	// subsets become SNI clusters).
	Resolvers map[string]*structs.ServiceResolverConfigEntry
	// Datacenters are the other known datacenters; GatewaysByDatacenter
	// their mesh gateways (a datacenter appears once known).
	Datacenters          []string
	GatewaysByDatacenter map[string]structs.CheckServiceNodes
	// ServiceConfig is the gateway's own resolved service config
	// (proxy-defaults merged with its service-defaults: access logs,
	// ...), nil until known: snapshots do not wait for it.
	ServiceConfig *structs.ServiceConfigResponse
}
