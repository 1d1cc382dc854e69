package gen

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	sniclusterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/sni_cluster/v3"
)

// sniClusterFilter is Envoy's name of the filter that takes a
// connection's cluster from its SNI.
const sniClusterFilter = "envoy.filters.network.sni_cluster"

// meshGateway generates a mesh gateway as Consul does: TLS passthrough
// routed by SNI (tls_inspector) on one listener "default:<addr>:<port>".
// Each service of this datacenter that has Connect endpoints, and each
// subset of its resolver, gets a cluster named by its SNI; one catch-all
// chain (sni_cluster, then a tcp_proxy) sends a connection to the cluster
// its SNI names, so an SNI naming no cluster is refused. Each other
// datacenter whose gateways are known gets a chain matching
// "*.<dc>.internal.<trust domain>" and a cluster "<dc>.internal.<trust
// domain>" of those gateways' WAN addresses. The gateway never terminates
// TLS: the client's mTLS session goes through to the destination proxy.
// The listener and its tcp_proxies log as a sidecar's (access_logs.go).
func (b *builder) meshGateway() error {
	mg := b.snap.MeshGateway
	if mg == nil {
		return fmt.Errorf("%w: mesh-gateway snapshot without its MeshGateway part", ErrInvalidSnapshot)
	}
	if b.td == "" {
		return fmt.Errorf("%w: no trust domain", ErrInvalidSnapshot)
	}
	dc := b.snap.Datacenter
	var chains []*listenerv3.FilterChain
	local := false
	for _, svc := range sortedKeys(mg.Services) {
		if len(mg.Services[svc]) == 0 {
			// Not a mesh service (a sidecar's or a gateway's own name, a
			// service without Connect endpoints): nothing to reach.
			continue
		}
		local = true
		resolver := mg.Resolvers[svc]
		o := clusterOpts{}
		if resolver != nil {
			o.connectTimeout, o.lb = resolver.ConnectTimeout.Duration(), resolver.LoadBalancer
		}
		for _, sub := range serviceSubsets(mg.Services[svc], resolver) {
			sni := serviceSNI(svc, sub.name, dc, b.td)
			o.name = sni
			b.add(ClusterType, sni, b.edsCluster(o))
			b.add(EndpointType, sni, loadAssignment(sni, sub.nodes, sub.onlyPassing, addrService))
		}
	}
	for _, remote := range mg.Datacenters {
		gws, ok := mg.GatewaysByDatacenter[remote]
		if !ok || remote == dc {
			continue
		}
		name := datacenterSNI(remote, b.td)
		b.add(ClusterType, name, b.edsCluster(clusterOpts{name: name}))
		b.add(EndpointType, name, loadAssignment(name, gws, false, addrWAN))
		chains = append(chains, &listenerv3.FilterChain{
			Name:             name,
			FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{"*." + name}},
			Filters:          []*listenerv3.Filter{b.tcpProxy("mesh_gateway_remote."+defaultNamespace+"."+remote, name, b.filterAccessLogs()...)},
		})
	}
	if local {
		// Last: it matches anything the chains before it do not.
		chains = append(chains, &listenerv3.FilterChain{
			Filters: []*listenerv3.Filter{
				b.networkFilter(sniClusterFilter, &sniclusterv3.SniCluster{}),
				b.tcpProxy("mesh_gateway_local."+gatewayListenerPrefix, "", b.filterAccessLogs()...),
			},
		})
	}
	return b.sniGatewayListener("mesh", chains)
}

// sniGatewayListener adds a gateway's one listener "default:<addr>:<port>",
// which picks a filter chain by SNI (tls_inspector). kind names the
// gateway in errors.
func (b *builder) sniGatewayListener(kind string, chains []*listenerv3.FilterChain) error {
	if len(chains) == 0 {
		return nil // Envoy refuses a listener without filter chains
	}
	addr, port := gatewayAddress(b.snap.Service), b.snap.Service.Port
	if port <= 0 || port > 65535 {
		return fmt.Errorf("%w: %s gateway without a port", ErrInvalidSnapshot, kind)
	}
	b.addListener(&listenerv3.Listener{
		Name:            listenerName(gatewayListenerPrefix, addr, port),
		Address:         socketAddress(addr, port),
		ListenerFilters: []*listenerv3.ListenerFilter{b.tlsInspector()},
		FilterChains:    chains,
		AccessLog:       b.listenerAccessLogs(),
	})
	return nil
}
