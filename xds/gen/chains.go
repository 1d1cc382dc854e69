package gen

import (
	"fmt"
	"math"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// A compiled discovery chain becomes, per resolver node, one EDS cluster
// named after the node's target (its SNI), with mTLS to that target and
// its endpoints; a resolver with failover targets becomes an aggregate
// cluster of that name over "failover-target~<n>~<name>" members, the
// primary first. Routers and splitters become routes (routes.go) or, for
// TCP, the tcp_proxy destination (chainTCPDestination).

// isHTTPProtocol reports whether a chain's traffic is proxied at L7.
func isHTTPProtocol(protocol string) bool { return structs.IsProtocolHTTPLike(protocol) }

// isHTTP2Protocol reports whether a protocol needs HTTP/2 end to end.
func isHTTP2Protocol(protocol string) bool { return protocol == "http2" || protocol == "grpc" }

// resolverNode returns the chain node named key, which must be a resolver
// whose target exists.
func resolverNode(chain *structs.CompiledDiscoveryChain, key string) (*structs.DiscoveryGraphNode, *structs.DiscoveryTarget, error) {
	n := chain.Nodes[key]
	if n == nil || n.Type != structs.DiscoveryGraphNodeTypeResolver || n.Resolver == nil {
		return nil, nil, fmt.Errorf("%w: chain %q: %q is not a resolver node", ErrInvalidSnapshot, chain.ServiceName, key)
	}
	t := chain.Targets[n.Resolver.Target]
	if t == nil {
		return nil, nil, fmt.Errorf("%w: chain %q: node %q names unknown target %q", ErrInvalidSnapshot, chain.ServiceName, key, n.Resolver.Target)
	}
	return n, t, nil
}

// addChainClusters adds the clusters and endpoint sets of every resolver
// of an upstream's chain; leaf is the certificate the proxy presents to
// the targets.
func (b *builder) addChainClusters(u *proxycfg.UpstreamSnapshot, leaf *structs.IssuedCert) error {
	clusters, err := b.addUpstreamClusters(u, leaf)
	if err != nil {
		return err
	}
	b.addUpstreamEndpoints(u, clusters)
	return nil
}

// chainCluster is one cluster of a chain: the EDS cluster of a resolver's
// target (or of a failover member), or a failover's aggregate cluster
// (target nil) over its members.
type chainCluster struct {
	name   string
	node   *structs.DiscoveryGraphNode
	target *structs.DiscoveryTarget
	// member marks a failover member, whose stats go under its own name.
	member bool
	// members are an aggregate's clusters, the primary first.
	members []string
}

// chainClusters lists the clusters of every resolver of a chain, in a
// deterministic order (a failover's members before their aggregate).
func chainClusters(chain *structs.CompiledDiscoveryChain) ([]chainCluster, error) {
	var out []chainCluster
	for _, key := range sortedKeys(chain.Nodes) {
		if n := chain.Nodes[key]; n == nil || n.Type != structs.DiscoveryGraphNodeTypeResolver {
			continue
		}
		n, t, err := resolverNode(chain, key)
		if err != nil {
			return nil, err
		}
		name := clusterName(chain, t)
		if f := n.Resolver.Failover; f != nil && len(f.Targets) > 0 {
			members := make([]string, 0, len(f.Targets)+1)
			for i, tid := range append([]string{t.ID}, f.Targets...) {
				ft := chain.Targets[tid]
				if ft == nil {
					return nil, fmt.Errorf("%w: chain %q: failover names unknown target %q", ErrInvalidSnapshot, chain.ServiceName, tid)
				}
				member := failoverClusterName(i, name)
				out = append(out, chainCluster{name: member, node: n, target: ft, member: true})
				members = append(members, member)
			}
			out = append(out, chainCluster{name: name, node: n, members: members})
			continue
		}
		out = append(out, chainCluster{name: name, node: n, target: t})
	}
	return out, nil
}

// addUpstreamClusters adds the clusters of an upstream's chain: what its
// definition, central config, chain, the leaf, the roots and the mesh
// entry decide, never its endpoints (see addUpstreamEndpoints), so that a
// Generator reuses them when only endpoints change. It returns the
// chain's clusters (chainClusters), for addUpstreamEndpoints.
func (b *builder) addUpstreamClusters(u *proxycfg.UpstreamSnapshot, leaf *structs.IssuedCert) ([]chainCluster, error) {
	clusters, err := chainClusters(u.Chain)
	if err != nil {
		return nil, err
	}
	http2 := isHTTP2Protocol(u.Chain.Protocol)
	for _, cc := range clusters {
		timeout := cc.node.Resolver.ConnectTimeout.Duration()
		if cc.target == nil {
			b.add(ClusterType, cc.name, b.aggregateCluster(cc.name, timeout, cc.members))
			continue
		}
		c := b.edsCluster(clusterOpts{
			name: cc.name, connectTimeout: timeout, lb: cc.node.LoadBalancer, http2: http2, upstream: u.Config,
			tls: b.meshUpstreamTLS(leaf, cc.target.SNI, targetSpiffeID(cc.target, b.td)),
		})
		if cc.member {
			c.AltStatName = cc.name
		}
		b.add(ClusterType, cc.name, c)
	}
	return clusters, nil
}

// addUpstreamEndpoints adds the endpoint set of every EDS cluster of an
// upstream's chain, given its clusters (chainClusters).
func (b *builder) addUpstreamEndpoints(u *proxycfg.UpstreamSnapshot, clusters []chainCluster) {
	for _, cc := range clusters {
		if cc.target != nil {
			b.add(EndpointType, cc.name, b.targetAssignment(cc.name, u, cc.target))
		}
	}
}

// targetAssignment is the endpoint set of a target: its own instances, or
// the mesh gateways it is reached through (their LAN address in this
// datacenter, their WAN address in another).
func (b *builder) targetAssignment(name string, u *proxycfg.UpstreamSnapshot, t *structs.DiscoveryTarget) *endpointv3.ClusterLoadAssignment {
	if gdc := proxycfg.MeshGatewayDatacenter(t, b.snap.Datacenter); gdc != "" {
		kind := addrLAN
		if gdc != b.snap.Datacenter {
			kind = addrWAN
		}
		return b.endpoints.get(name, u.GatewayEndpoints[gdc], false, kind)
	}
	return b.endpoints.get(name, u.Endpoints[t.ID], t.Subset.OnlyPassing, addrService)
}

// resolverCluster is the cluster a route or tcp_proxy uses to reach the
// resolver node key.
func resolverCluster(chain *structs.CompiledDiscoveryChain, key string) (string, error) {
	_, t, err := resolverNode(chain, key)
	if err != nil {
		return "", err
	}
	return clusterName(chain, t), nil
}

// splitWeight scales a split's percentage to Envoy's integer weights: the
// smallest share, 0.01%, is 1.
func splitWeight(w float32) uint32 {
	return uint32(math.Round(float64(w) * 100))
}

// chainTCPDestination is where a TCP chain sends connections: the start
// resolver's cluster, or weighted clusters for a splitter. Routers need
// HTTP and are refused.
func chainTCPDestination(chain *structs.CompiledDiscoveryChain) (string, []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight, error) {
	start := chain.Nodes[chain.StartNode]
	if start == nil {
		return "", nil, fmt.Errorf("%w: chain %q has no start node %q", ErrInvalidSnapshot, chain.ServiceName, chain.StartNode)
	}
	switch start.Type {
	case structs.DiscoveryGraphNodeTypeResolver:
		c, err := resolverCluster(chain, chain.StartNode)
		return c, nil, err
	case structs.DiscoveryGraphNodeTypeSplitter:
		var out []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight
		for _, s := range start.Splits {
			w := splitWeight(s.Weight)
			if w == 0 {
				continue
			}
			c, err := resolverCluster(chain, s.NextNode)
			if err != nil {
				return "", nil, err
			}
			out = append(out, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: c, Weight: w})
		}
		if len(out) == 0 {
			return "", nil, fmt.Errorf("%w: chain %q: splitter without weight", ErrInvalidSnapshot, chain.ServiceName)
		}
		return "", out, nil
	}
	return "", nil, fmt.Errorf("%w: chain %q: a %s cannot route TCP", ErrInvalidSnapshot, chain.ServiceName, start.Type)
}

// chainStatPrefix is the stat prefix of an upstream's listener or filter
// chain: its chain's service and datacenter.
func chainStatPrefix(chain *structs.CompiledDiscoveryChain) string {
	return upstreamStatPrefix(chain.ServiceName, chain.Datacenter)
}
