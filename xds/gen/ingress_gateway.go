package gen

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// ingressGateway generates an ingress gateway: per exposed service its
// chain's clusters (mTLS with the gateway's leaf), and per listener of the
// config entry an Envoy listener named "<protocol>:<addr>:<port>". HTTP
// listeners route by Host through RDS (route configuration "<port>", one
// virtual host per service); a TCP listener forwards to its one service
// and is named after it, "<service>:<addr>:<port>". TLS, when the entry
// enables it for the gateway or the listener, presents the gateway's leaf.
// Listeners and their filters log as a sidecar's (access_logs.go; the TCP
// listener's filter is upstreamFilter's, which logs already).
func (b *builder) ingressGateway() error {
	ig := b.snap.IngressGateway
	if ig == nil {
		return fmt.Errorf("%w: ingress-gateway snapshot without its IngressGateway part", ErrInvalidSnapshot)
	}
	if ig.Leaf == nil {
		return fmt.Errorf("%w: ingress-gateway snapshot without a leaf certificate", ErrInvalidSnapshot)
	}
	for _, u := range ig.Upstreams {
		if u == nil || u.Chain == nil {
			continue
		}
		if err := b.addChainClusters(u, ig.Leaf); err != nil {
			return fmt.Errorf("upstream %q: %w", u.ID, err)
		}
	}
	addr := gatewayAddress(b.snap.Service)
	keys := make([]proxycfg.IngressListenerKey, 0, len(ig.Listeners))
	for k, l := range ig.Listeners {
		if l != nil {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b proxycfg.IngressListenerKey) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
	})
	for _, k := range keys {
		if k.Port <= 0 || k.Port > 65535 {
			continue
		}
		l := ig.Listeners[k]
		var err error
		if isHTTPProtocol(k.Protocol) {
			err = b.ingressHTTPListener(ig, l, addr)
		} else {
			err = b.ingressTCPListener(ig, l, addr)
		}
		if err != nil {
			return fmt.Errorf("ingress listener %s/%d: %w", k.Protocol, k.Port, err)
		}
	}
	return nil
}

// gatewayAddress is where a gateway listens: its registered address, else
// every interface.
func gatewayAddress(svc *structs.NodeService) string {
	if a := structs.OpaqueString(svc.Proxy.Config, cfgBindAddress); a != "" {
		return a
	}
	if svc.Address != "" {
		return svc.Address
	}
	return "0.0.0.0"
}

// ingressTLS reports whether the config entry enables TLS on a listener.
func ingressTLS(ig *proxycfg.IngressGatewaySnapshot, l *proxycfg.IngressListenerSnapshot) bool {
	if l.Config != nil && l.Config.TLS != nil && l.Config.TLS.Enabled {
		return true
	}
	return ig.Config != nil && ig.Config.TLS.Enabled
}

func (b *builder) ingressHTTPListener(ig *proxycfg.IngressGatewaySnapshot, l *proxycfg.IngressListenerSnapshot, addr string) error {
	port := l.Key.Port
	routeName := strconv.Itoa(port)
	claimed := map[string]bool{}
	var hosts []*routev3.VirtualHost
	for i, gs := range l.Services {
		if i >= len(l.Upstreams) || gs == nil {
			continue
		}
		u := ig.Upstreams.Get(l.Upstreams[i])
		if u == nil || u.Chain == nil {
			continue
		}
		// Envoy refuses a domain twice in one route configuration; the
		// entry's validation prevents it, this keeps a bad entry from
		// taking the whole listener down.
		var domains []string
		for _, d := range ingressDomains(gs, port) {
			if !claimed[d] {
				claimed[d] = true
				domains = append(domains, d)
			}
		}
		if len(domains) == 0 {
			continue
		}
		vh, err := chainVirtualHost(u.Chain, string(u.ID), domains)
		if err != nil {
			return err
		}
		if svc := ingressServiceConfig(l.Config, gs.Service); svc != nil {
			vh.RequestHeadersToAdd, vh.RequestHeadersToRemove = headerMods(svc.RequestHeaders)
			vh.ResponseHeadersToAdd, vh.ResponseHeadersToRemove = headerMods(svc.ResponseHeaders)
		}
		hosts = append(hosts, vh)
	}
	if len(hosts) == 0 {
		return nil // nothing routable yet
	}
	b.add(RouteType, routeName, routeConfiguration(routeName, hosts...))
	fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{b.httpConnectionManager(hcmOpts{
		statPrefix: "ingress_upstream_" + routeName,
		rds:        routeName,
		http2:      isHTTP2Protocol(l.Key.Protocol),
		websocket:  true,
		accessLogs: b.filterAccessLogs(),
	})}}
	if ingressTLS(ig, l) {
		fc.TransportSocket = b.gatewayDownstreamTLS(ig.Leaf, true)
	}
	name := listenerName(l.Key.Protocol, addr, port)
	b.addListener(&listenerv3.Listener{
		Name:             name,
		Address:          socketAddress(addr, port),
		FilterChains:     []*listenerv3.FilterChain{fc},
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		AccessLog:        b.listenerAccessLogs(),
	})
	return nil
}

func (b *builder) ingressTCPListener(ig *proxycfg.IngressGatewaySnapshot, l *proxycfg.IngressListenerSnapshot, addr string) error {
	if len(l.Upstreams) == 0 {
		return nil
	}
	u := ig.Upstreams.Get(l.Upstreams[0]) // TCP listeners expose exactly one service
	if u == nil || u.Chain == nil {
		return nil
	}
	filter, err := b.upstreamFilter(u)
	if err != nil {
		return err
	}
	fc := &listenerv3.FilterChain{Filters: []*listenerv3.Filter{filter}}
	if ingressTLS(ig, l) {
		fc.TransportSocket = b.gatewayDownstreamTLS(ig.Leaf, false)
	}
	name := listenerName(string(u.ID), addr, l.Key.Port)
	b.addListener(&listenerv3.Listener{
		Name:             name,
		Address:          socketAddress(addr, l.Key.Port),
		FilterChains:     []*listenerv3.FilterChain{fc},
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		AccessLog:        b.listenerAccessLogs(),
	})
	return nil
}

// ingressDomains are the Host values routed to a service: its configured
// hosts, else "<service>.ingress.*"; each also with ":<port>", since
// clients send the port in Host unless it is the scheme's default.
func ingressDomains(gs *structs.GatewayService, port int) []string {
	domains := slices.Clone(gs.Hosts)
	if len(domains) == 0 {
		domains = []string{gs.Service + ".ingress.*"}
	}
	have := map[string]bool{}
	for _, d := range domains {
		have[d] = true
	}
	out := slices.Clone(domains)
	for _, d := range domains {
		if _, _, err := net.SplitHostPort(d); err == nil || !strings.Contains(err.Error(), "missing port") {
			continue // already has a port
		}
		if withPort := d + ":" + strconv.Itoa(port); !have[withPort] {
			have[withPort] = true
			out = append(out, withPort)
		}
	}
	return out
}

// ingressServiceConfig is a service's entry on a listener (or the
// listener's wildcard entry).
func ingressServiceConfig(l *structs.IngressListener, service string) *structs.IngressService {
	if l == nil {
		return nil
	}
	var wildcard *structs.IngressService
	for i := range l.Services {
		switch l.Services[i].Name {
		case service:
			return &l.Services[i]
		case structs.WildcardSpecifier:
			wildcard = &l.Services[i]
		}
	}
	return wildcard
}
