package gen

import (
	"cmp"
	"slices"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// Tagged addresses of a Connect endpoint that carry a virtual IP of its
// service (consul-k8s sets "virtual" to the Kubernetes ClusterIP; Consul
// allocates "consul-virtual").
var virtualAddressTags = []string{"consul-virtual", "virtual"}

// outboundChain is an upstream's network filter, for the transparent
// listener.
type outboundChain struct {
	u      *proxycfg.UpstreamSnapshot
	filter *listenerv3.Filter
}

// dest is one destination a transparent filter chain claims: an address,
// and the port the application dials (0: any port).
type dest struct {
	ip   string
	port int
}

// originalDstKey is the key of the original-destination cluster's part:
// the cluster has no inputs.
type originalDstKey struct{}

// transparentListener adds the listener that iptables redirects outbound
// traffic to. The original destination picks the filter chain: each
// upstream claims the addresses of its targets' instances (on the port
// their service listens on) and their virtual IPs. Connections to anything
// else go to the original destination, unless the mesh entry restricts
// transparent proxies to mesh destinations.
//
// Filter chain matches must be unique, so a destination claimed by two
// upstreams goes to the first in ID order.
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
	claimed := map[dest]bool{}
	for _, oc := range chains {
		byPort := map[int][]string{}
		for _, d := range upstreamDestinations(oc.u) {
			if claimed[d] {
				continue
			}
			claimed[d] = true
			byPort[d.port] = append(byPort[d.port], d.ip)
		}
		ports := make([]int, 0, len(byPort))
		for p := range byPort {
			ports = append(ports, p)
		}
		slices.Sort(ports)
		for _, p := range ports {
			match := &listenerv3.FilterChainMatch{}
			chainName := string(oc.u.ID)
			if p > 0 {
				match.DestinationPort = wrapUint32(uint32(p)) //nolint:gosec // a service port, 1-65535
				chainName += ":" + strconv.Itoa(p)
			}
			for _, ip := range byPort[p] {
				if r, ok := hostPrefix(ip); ok {
					match.PrefixRanges = append(match.PrefixRanges, r)
				}
			}
			l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
				Name:             chainName,
				FilterChainMatch: match,
				Filters:          []*listenerv3.Filter{oc.filter},
			})
		}
	}
	if m := b.snap.MeshConfig; m == nil || !m.TransparentProxy.MeshDestinationsOnly {
		// A part of its own: the cluster never changes, and keeping it out
		// of the listener's (rebuilt with every endpoint change) lets the
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

// upstreamDestinations lists the IP destinations of an upstream's targets,
// sorted: every instance address on the port its service listens on, and
// virtual IPs. A terminating gateway standing for a target is not where
// the application dials (it dials the service's own address, which only
// a virtual IP stands for, as in Consul), and every service behind the
// same gateway would claim its addresses: they are left out.
func upstreamDestinations(u *proxycfg.UpstreamSnapshot) []dest {
	set := map[dest]bool{}
	for _, tid := range sortedKeys(u.Endpoints) {
		for i := range u.Endpoints[tid] {
			n := &u.Endpoints[tid][i]
			if n.Service == nil || n.Service.Kind == structs.ServiceKindTerminatingGateway {
				continue
			}
			for _, tag := range virtualAddressTags {
				if ta, ok := n.Service.TaggedAddresses[tag]; ok {
					if _, isIP := hostPrefix(ta.Address); isIP {
						set[dest{ip: ta.Address, port: ta.Port}] = true
					}
				}
			}
			addr, _ := instanceAddress(n, addrService)
			if _, isIP := hostPrefix(addr); isIP {
				set[dest{ip: addr, port: appPort(n.Service)}] = true
			}
		}
	}
	out := make([]dest, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b dest) int { return cmp.Or(cmp.Compare(a.ip, b.ip), cmp.Compare(a.port, b.port)) })
	return out
}

// appPort is the port the application behind a Connect endpoint listens
// on: a sidecar's local service port (0 when unknown: any port).
func appPort(svc *structs.NodeService) int {
	if svc.Kind == structs.ServiceKindConnectProxy {
		return svc.Proxy.LocalServicePort
	}
	return svc.Port // Connect-native: the service itself
}
