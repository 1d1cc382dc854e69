package structs

import (
	"fmt"
	"time"
)

// CompiledDiscoveryChain is a service's discovery chain: the graph of
// router, splitter and resolver nodes, starting at StartNode, that decides
// which targets (service instances in some datacenter, possibly a subset)
// a request for the service reaches. Its JSON is Consul's
// /v1/discovery-chain/<service> "Chain".
type CompiledDiscoveryChain struct {
	ServiceName string
	Namespace   string
	Partition   string
	Datacenter  string
	// CustomizationHash is set when request overrides changed the result,
	// so that proxies keep customized and plain chains apart.
	CustomizationHash string `json:",omitempty"`
	// Default is true when no router, splitter or resolver shapes the chain.
	Default     bool              `json:",omitempty"`
	Protocol    string            `json:",omitempty"`
	ServiceMeta map[string]string `json:",omitempty"`
	StartNode   string            `json:",omitempty"`
	// Nodes are keyed by "<type>:<name>" (DiscoveryGraphNode.MapKey).
	Nodes map[string]*DiscoveryGraphNode `json:",omitempty"`
	// Targets are keyed by target ID "[subset.]service.namespace.partition.dc".
	Targets map[string]*DiscoveryTarget `json:",omitempty"`
	// AutoVirtualIPs and ManualVirtualIPs are the virtual IPs of the
	// chain's service (ServiceVirtualIP), which a transparent proxy's
	// outbound listener matches.
	AutoVirtualIPs   []string `json:",omitempty"`
	ManualVirtualIPs []string `json:",omitempty"`
}

// Discovery graph node types.
const (
	DiscoveryGraphNodeTypeRouter   = "router"
	DiscoveryGraphNodeTypeSplitter = "splitter"
	DiscoveryGraphNodeTypeResolver = "resolver"
)

// DiscoveryGraphNode is one node of a compiled chain.
type DiscoveryGraphNode struct {
	Type string
	// Name is "svc.namespace.partition" for routers and splitters and the
	// target ID for resolvers.
	Name         string
	Routes       []*DiscoveryRoute  `json:",omitempty"`
	Splits       []*DiscoverySplit  `json:",omitempty"`
	Resolver     *DiscoveryResolver `json:",omitempty"`
	LoadBalancer *LoadBalancer      `json:",omitempty"`
}

// MapKey is the node's key in CompiledDiscoveryChain.Nodes.
func (n *DiscoveryGraphNode) MapKey() string { return n.Type + ":" + n.Name }

// DiscoveryRoute is a compiled route: its definition and the node it leads
// to.
type DiscoveryRoute struct {
	Definition *ServiceRoute `json:",omitempty"`
	NextNode   string        `json:",omitempty"`
}

// DiscoverySplit is a compiled split leg. Weight is the effective weight
// after nested splitters were flattened.
type DiscoverySplit struct {
	Definition *ServiceSplit `json:",omitempty"`
	Weight     float32       `json:",omitempty"`
	NextNode   string        `json:",omitempty"`
}

// DiscoveryResolver is a compiled resolver: the target it resolves to and
// where to fail over.
type DiscoveryResolver struct {
	Default        bool               `json:",omitempty"`
	ConnectTimeout Duration           `json:",omitempty"`
	RequestTimeout time.Duration      `json:",omitempty"`
	Target         string             `json:",omitempty"`
	Failover       *DiscoveryFailover `json:",omitempty"`
}

// DiscoveryFailover lists failover targets in order.
type DiscoveryFailover struct {
	Targets []string                       `json:",omitempty"`
	Policy  *ServiceResolverFailoverPolicy `json:",omitempty"`
}

// DiscoveryTarget is one set of instances a chain can end at, with the
// names proxies use for it: SNI (the upstream cluster name and TLS server
// name) and the SPIFFE identity its instances present.
type DiscoveryTarget struct {
	ID               string
	Service          string
	ServiceSubset    string `json:",omitempty"`
	Namespace        string
	Partition        string
	Datacenter       string
	MeshGateway      MeshGatewayConfig
	Subset           ServiceResolverSubset
	TransparentProxy TransparentProxyConfig
	ConnectTimeout   Duration `json:",omitempty"`
	External         bool     `json:",omitempty"`
	SNI              string
	Name             string
	// SpiffeID is the URI SAN the target's instances present (a Trellis
	// addition; Consul computes it in its proxy layer).
	SpiffeID string `json:",omitempty"`
}

// DiscoveryTargetOpts names a target.
type DiscoveryTargetOpts struct {
	Service       string
	ServiceSubset string
	Namespace     string
	Partition     string
	Datacenter    string
}

// DiscoveryTargetID is Consul's target ID: "[subset.]svc.ns.partition.dc".
func DiscoveryTargetID(o DiscoveryTargetOpts) string {
	if o.ServiceSubset == "" {
		return fmt.Sprintf("%s.%s.%s.%s", o.Service, o.Namespace, o.Partition, o.Datacenter)
	}
	return fmt.Sprintf("%s.%s.%s.%s.%s", o.ServiceSubset, o.Service, o.Namespace, o.Partition, o.Datacenter)
}

// Opts returns the options that name t.
func (t *DiscoveryTarget) Opts() DiscoveryTargetOpts {
	return DiscoveryTargetOpts{
		Service: t.Service, ServiceSubset: t.ServiceSubset, Namespace: t.Namespace,
		Partition: t.Partition, Datacenter: t.Datacenter,
	}
}

// DiscoveryChainRequest asks for the chain of service Name compiled for
// a datacenter (this server's when empty), with optional overrides.
type DiscoveryChainRequest struct {
	Name                 string
	EvaluateInDatacenter string
	// OverrideMeshGateway replaces the mesh gateway mode of every target.
	OverrideMeshGateway MeshGatewayConfig
	// OverrideProtocol replaces the chain's protocol; an L4 protocol drops
	// routers and splitters.
	OverrideProtocol string
	// OverrideConnectTimeout replaces every resolver's connect timeout.
	OverrideConnectTimeout time.Duration
	QueryOptions
}

// DiscoveryChainResponse is the compiled chain.
type DiscoveryChainResponse struct {
	Chain *CompiledDiscoveryChain
	QueryMeta
}
