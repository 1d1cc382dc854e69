package gen

import (
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// meshGateway generates a mesh gateway: TLS passthrough routed by SNI
// (tls_inspector) on one listener "default:<addr>:<port>". Each service of
// this datacenter, and each subset of its resolver, gets a filter chain
// matching its SNI and a cluster of its Connect endpoints; each other
// datacenter whose gateways are known gets a chain matching
// "*.<dc>.internal.<trust domain>" and a cluster "<dc>.internal.<trust
// domain>" of those gateways' WAN addresses. The gateway never terminates
// TLS: the client's mTLS session goes through to the destination proxy.
// The listener and its tcp_proxies log as a sidecar's (access_logs.go).
//
// Unlike Consul there is no catch-all sni_cluster chain: every cluster the
// gateway serves has an explicit chain, and an unknown SNI is refused at
// the handshake instead of reaching whatever cluster it happens to name.
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
	for _, svc := range sortedKeys(mg.Services) {
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
			chains = append(chains, &listenerv3.FilterChain{
				Name:             sni,
				FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{sni}},
				Filters:          []*listenerv3.Filter{b.tcpProxy("mesh_gateway_local."+svc+"."+defaultNamespace+"."+defaultPartition+"."+dc, sni, b.filterAccessLogs()...)},
			})
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
