package gen

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// Tagged addresses of a Connect endpoint that carry a virtual IP of its
// service: Consul's own (the chain has it too) and the Kubernetes
// ClusterIP consul-k8s sets as "virtual".
var virtualAddressTags = []string{structs.TaggedAddressVirtualIP, "virtual"}

// outboundChain is an upstream's network filter, for the transparent
// listener.
type outboundChain struct {
	u      *proxycfg.UpstreamSnapshot
	filter *listenerv3.Filter
}

// originalDstKey is the key of the original-destination cluster's part:
// the cluster has no inputs.
type originalDstKey struct{}

// transparentListener adds the listener that iptables redirects outbound
// traffic to. The original destination picks the filter chain, as in
// Consul: each upstream has one chain matching its virtual IPs on any
// port, never its instances' addresses, so that dialing one instance does
// not balance over all of them and an endpoint change leaves the listener
// as it was. Connections to anything else go to the original destination,
// unless the mesh entry restricts transparent proxies to mesh
// destinations.
//
// Filter chain matches must be unique, so an address claimed by two
// upstreams goes to the first in ID order; an upstream without a virtual
// IP has no chain (an empty match would catch everything).
func (b *builder) transparentListener(cp *proxycfg.ConnectProxySnapshot, chains []outboundChain) {
	port := b.snap.Service.Proxy.TransparentProxy.OutboundListenerPort
	if port <= 0 && cp.ServiceConfig != nil {
		port = cp.ServiceConfig.TransparentProxy.OutboundListenerPort
	}
	if port <= 0 {
		port = defaultTransparentPort
	}
	const addr = "127.0.0.1"
	name := listenerName(outboundListenerName, addr, port)
	l := &listenerv3.Listener{
		Name:             name,
		Address:          socketAddress(addr, port),
		ListenerFilters:  []*listenerv3.ListenerFilter{b.originalDst()},
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		AccessLog:        b.listenerAccessLogs(),
	}
	claimed := map[string]bool{}
	for _, oc := range chains {
		match := &listenerv3.FilterChainMatch{}
		for _, ip := range upstreamVirtualIPs(oc.u) {
			if claimed[ip] {
				continue
			}
			if r, ok := hostPrefix(ip); ok {
				claimed[ip] = true
				match.PrefixRanges = append(match.PrefixRanges, r)
			}
		}
		if len(match.PrefixRanges) == 0 {
			continue
		}
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
			Name:             string(oc.u.ID),
			FilterChainMatch: match,
			Filters:          []*listenerv3.Filter{oc.filter},
		})
	}
	if m := b.snap.MeshConfig; m == nil || !m.TransparentProxy.MeshDestinationsOnly {
		// A part of its own: the cluster never changes, and keeping it out
		// of the listener's (built with every generation) lets the
		// cluster type stay the previous generation's.
		_, _ = reuse(b, partID{kind: partOriginalDst}, originalDstKey{}, func() (*listenerv3.Filter, error) {
			b.add(ClusterType, originalDstCluster, b.originalDestinationCluster())
			return nil, nil
		})
		l.DefaultFilterChain = &listenerv3.FilterChain{
			Name:    originalDstCluster,
			Filters: []*listenerv3.Filter{b.tcpProxy("upstream."+originalDstCluster, originalDstCluster, b.filterAccessLogs()...)},
		}
	}
	if len(l.FilterChains) == 0 && l.DefaultFilterChain == nil {
		return // Envoy refuses a listener without filter chains
	}
	b.addListener(l)
}

// upstreamVirtualIPs lists the virtual IPs of an upstream, sorted: its
// chain's automatic and manual ones and those its endpoints carry as
// tagged addresses. The instances of a terminating gateway standing for
// a target are skipped: their tagged addresses are the gateway's own.
func upstreamVirtualIPs(u *proxycfg.UpstreamSnapshot) []string {
	set := map[string]bool{}
	if c := u.Chain; c != nil {
		for _, ip := range c.AutoVirtualIPs {
			set[ip] = true
		}
		for _, ip := range c.ManualVirtualIPs {
			set[ip] = true
		}
	}
	for _, tid := range sortedKeys(u.Endpoints) {
		for i := range u.Endpoints[tid] {
			n := &u.Endpoints[tid][i]
			if n.Service == nil || n.Service.Kind == structs.ServiceKindTerminatingGateway {
				continue
			}
			for _, tag := range virtualAddressTags {
				if ta, ok := n.Service.TaggedAddresses[tag]; ok && ta.Address != "" {
					set[ta.Address] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for ip := range set {
		out = append(out, ip)
	}
	slices.Sort(out)
	return out
}
