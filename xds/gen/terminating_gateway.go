package gen

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// terminatingGateway generates a terminating gateway: one listener
// "default:<addr>:<port>" that tells services apart by SNI (tls_inspector),
// with per linked service (and per subset of its resolver) a filter chain
// that terminates mesh mTLS presenting the service's own leaf, enforces
// the intentions to it, and forwards to a cluster of the service's
// instances, optionally originating TLS with the files the entry names.
// Services not Ready yet are left out. The listener and its filters log as
// a sidecar's (access_logs.go).
func (b *builder) terminatingGateway() error {
	tg := b.snap.TerminatingGateway
	if tg == nil {
		return fmt.Errorf("%w: terminating-gateway snapshot without its TerminatingGateway part", ErrInvalidSnapshot)
	}
	if b.td == "" {
		return fmt.Errorf("%w: no trust domain", ErrInvalidSnapshot)
	}
	dc := b.snap.Datacenter
	var chains []*listenerv3.FilterChain
	for _, name := range sortedKeys(tg.Services) {
		ts := tg.Services[name]
		if ts == nil || !ts.Ready() {
			continue
		}
		protocol := structs.DefaultServiceProtocol
		if ts.Config.Protocol != "" {
			protocol = ts.Config.Protocol
		}
		for _, sub := range serviceSubsets(ts.Endpoints, ts.Resolver) {
			sni := serviceSNI(name, sub.name, dc, b.td)
			b.terminatingCluster(ts, sni, sub.nodes, sub.onlyPassing, protocol)
			chains = append(chains, b.terminatingChain(ts, name, sni, protocol))
		}
	}
	return b.sniGatewayListener("terminating", chains)
}

// subsetNodes is a service's instances, or those of one subset.
type subsetNodes struct {
	name        string
	nodes       structs.CheckServiceNodes
	onlyPassing bool
}

// serviceSubsets is a gateway's view of one service: all its instances,
// then those of each subset of its resolver (if any), in name order.
func serviceSubsets(nodes structs.CheckServiceNodes, resolver *structs.ServiceResolverConfigEntry) []subsetNodes {
	out := []subsetNodes{{nodes: nodes}}
	if resolver == nil {
		return out
	}
	for _, name := range sortedKeys(resolver.Subsets) {
		sub := resolver.Subsets[name]
		out = append(out, subsetNodes{name: name, nodes: filterNodes(nodes, sub.Filter), onlyPassing: sub.OnlyPassing})
	}
	return out
}

// filterNodes keeps the instances a subset filter selects. An invalid
// filter (refused when the entry was written) selects nothing.
func filterNodes(nodes structs.CheckServiceNodes, expr string) structs.CheckServiceNodes {
	if expr == "" {
		return nodes
	}
	f, err := structs.ParseFilter(expr)
	if err != nil {
		return structs.CheckServiceNodes{}
	}
	out := structs.CheckServiceNodes{}
	for i := range nodes {
		if f.Evaluate(&nodes[i]) {
			out = append(out, nodes[i])
		}
	}
	return out
}

// terminatingCluster reaches a linked service's instances: EDS when every
// address is an IP, DNS resolution of the addresses otherwise.
func (b *builder) terminatingCluster(ts *proxycfg.TerminatingService, name string, nodes structs.CheckServiceNodes, onlyPassing bool, protocol string) {
	o := clusterOpts{name: name, http2: isHTTP2Protocol(protocol)}
	if r := ts.Resolver; r != nil {
		o.connectTimeout, o.lb = r.ConnectTimeout.Duration(), r.LoadBalancer
	}
	if l := ts.Link; l != nil && l.CAFile != "" {
		o.tls = b.originationTLS(linkTLS{CAFile: l.CAFile, CertFile: l.CertFile, KeyFile: l.KeyFile, SNI: l.SNI})
	}
	cla := loadAssignment(name, nodes, onlyPassing, addrService)
	if !hasHostname(cla.GetEndpoints()) {
		b.add(ClusterType, name, b.edsCluster(o))
		b.add(EndpointType, name, cla)
		return
	}
	c := b.baseCluster(o)
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}
	c.LoadAssignment = cla
	b.add(ClusterType, name, c)
}

// terminatingChain is the filter chain of one linked service (or subset),
// selected by its SNI.
func (b *builder) terminatingChain(ts *proxycfg.TerminatingService, service, sni, protocol string) *listenerv3.FilterChain {
	stat := upstreamStatPrefix(service, b.snap.Datacenter)
	var filters []*listenerv3.Filter
	if isHTTPProtocol(protocol) {
		action := &routev3.RouteAction{
			ClusterSpecifier:     &routev3.RouteAction_Cluster{Cluster: sni},
			HostRewriteSpecifier: &routev3.RouteAction_AutoHostRewrite{AutoHostRewrite: wrapBool(true)},
		}
		if r := ts.Resolver; r != nil {
			setTimeout(&action.Timeout, r.RequestTimeout.Duration())
			action.HashPolicy = hashPolicies(r.LoadBalancer)
		}
		b.add(RouteType, sni, routeConfiguration(sni, &routev3.VirtualHost{
			Name:    sni,
			Domains: []string{"*"},
			Routes:  []*routev3.Route{{Match: prefixMatch("/"), Action: &routev3.Route_Route{Route: action}}},
		}))
		filters = append(filters, b.httpConnectionManager(hcmOpts{
			statPrefix: stat,
			rds:        sni,
			filters:    []*hcmv3.HttpFilter{b.httpRBAC(ts.Intentions, b.snap.IntentionDefaultAllow)},
			http2:      isHTTP2Protocol(protocol),
			accessLogs: b.filterAccessLogs(),
		}))
	} else {
		filters = append(filters, b.networkRBAC(ts.Intentions, b.snap.IntentionDefaultAllow), b.tcpProxy(stat, sni, b.filterAccessLogs()...))
	}
	return &listenerv3.FilterChain{
		Name:             sni,
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{sni}},
		Filters:          filters,
		TransportSocket:  b.meshDownstreamTLS(ts.Leaf),
	}
}
