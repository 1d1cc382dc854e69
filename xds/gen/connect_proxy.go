package gen

import (
	"fmt"
	"maps"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// connectProxy generates a sidecar: the local_app cluster and the mTLS
// public listener in front of it (with the plain-text listeners of its
// exposed paths, expose.go), then per upstream its clusters,
// endpoints, routes and outbound listener, and in transparent mode the
// outbound listener that catches redirected traffic.
func (b *builder) connectProxy() error {
	cp := b.snap.ConnectProxy
	if cp == nil {
		return fmt.Errorf("%w: connect-proxy snapshot without its ConnectProxy part", ErrInvalidSnapshot)
	}
	if cp.Leaf == nil {
		return fmt.Errorf("%w: connect-proxy snapshot without a leaf certificate", ErrInvalidSnapshot)
	}
	if _, err := reuse(b, partID{kind: partPublic}, b.publicKey(cp), func() (*listenerv3.Filter, error) {
		cfg := sidecarConfig(b.snap.Service, cp.ServiceConfig)
		if err := b.publicListener(cp, cfg); err != nil {
			return nil, err
		}
		b.exposedPaths(cp, cfg) // expose.go
		return nil, nil
	}); err != nil {
		return err
	}

	transparent := cp.Mode == structs.ProxyModeTransparent
	var outbound []outboundChain // for the transparent listener only
	// By ID, so that "first wins" is deterministic.
	for _, u := range cp.Upstreams {
		if u == nil || u.Chain == nil || u.Upstream == nil {
			continue // not known yet: leave it out until it is
		}
		up, err := reusePart(b, partID{kind: partUpstream, upstream: u.ID}, b.upstreamKey(u, cp.Leaf), func() (*listenerv3.Filter, error) {
			return b.connectUpstream(u, cp.Leaf)
		})
		if err != nil {
			return fmt.Errorf("upstream %q: %w", u.ID, err)
		}
		// Endpoints are a part of their own: an endpoint change, the most
		// frequent one, rebuilds them alone, not the upstream's clusters
		// (with their TLS contexts) and listener.
		if _, err := reuse(b, partID{kind: partEndpoints, upstream: u.ID}, b.endpointsKey(u), func() (*listenerv3.Filter, error) {
			return nil, b.connectUpstreamEndpoints(u, up)
		}); err != nil {
			return fmt.Errorf("upstream %q: %w", u.ID, err)
		}
		// An upstream whose listener is its envoy_listener_json has no
		// filter: its traffic goes where that listener says.
		if transparent && up.filter != nil {
			outbound = append(outbound, outboundChain{u: u, filter: up.filter})
		}
	}
	if transparent {
		b.transparentListener(cp, outbound)
	}
	return nil
}

// connectUpstream adds an upstream's clusters and routes and its listener
// on its local bind address, and returns its network filter. Its
// endpoints are added separately (connectUpstreamEndpoints). The
// upstream's escape hatches replace its cluster and listener (then
// without a filter), see upstreamOverrides.
func (b *builder) connectUpstream(u *proxycfg.UpstreamSnapshot, leaf *structs.IssuedCert) (*listenerv3.Filter, error) {
	cluster, listener, err := upstreamOverrides(u)
	if err != nil {
		return nil, err
	}
	if cluster != nil {
		err = b.addClusterOverride(u, leaf, cluster, listener == nil)
	} else {
		var clusters []chainCluster
		clusters, err = b.addUpstreamClusters(u, leaf)
		if b.cur != nil { // the upstream's part, whose endpoints part reads them
			b.cur.clusters = clusters
		}
	}
	if err != nil {
		return nil, err
	}
	if listener != nil {
		// Nothing of ours sends traffic into the chain: no filter, and no
		// route configuration (Consul has none for default chains).
		return nil, b.addOverride(cfgListenerJSON, ListenerType, listener.GetName(), listener)
	}
	filter, err := b.upstreamFilter(u)
	if err != nil {
		return nil, err
	}
	if def := u.Upstream; !def.CentrallyConfigured && def.LocalBindPort > 0 {
		addr := def.LocalBindAddress
		if addr == "" {
			addr = "127.0.0.1"
		}
		b.addListener(&listenerv3.Listener{
			Name:             listenerName(string(u.ID), addr, def.LocalBindPort),
			Address:          socketAddress(addr, def.LocalBindPort),
			FilterChains:     []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{filter}}},
			TrafficDirection: corev3.TrafficDirection_OUTBOUND,
			AccessLog:        b.listenerAccessLogs(),
		})
	}
	return filter, nil
}

// sidecarConfig is a sidecar's opaque config as Consul's agent merges it
// into the registration: the global proxy-defaults' Config (in the
// resolved service config) with the registration's own keys over it.
// Only the public listener's part reads it, so merging when both have
// keys costs an allocation per change of that part, not per generation.
func sidecarConfig(svc *structs.NodeService, sc *structs.ServiceConfigResponse) map[string]any {
	own := svc.Proxy.Config
	if sc == nil || len(sc.ProxyConfig) == 0 {
		return own
	}
	if len(own) == 0 {
		return sc.ProxyConfig
	}
	merged := maps.Clone(sc.ProxyConfig)
	maps.Copy(merged, own)
	return merged
}

// serviceProtocol is the proxied service's protocol: the registration's
// opaque config, else the central configuration, else tcp.
func serviceProtocol(svc *structs.NodeService, cfg *structs.ServiceConfigResponse) string {
	if p := strings.ToLower(structs.OpaqueString(svc.Proxy.Config, cfgProtocol)); p != "" {
		return p
	}
	if cfg != nil && cfg.Protocol != "" {
		return strings.ToLower(cfg.Protocol)
	}
	return structs.DefaultServiceProtocol
}

// publicListener adds local_app and the inbound listener: mTLS with the
// destination's leaf, then intentions (network RBAC for TCP, HTTP RBAC
// with L7 permissions for HTTP protocols), then the application. A proxy
// without a local service port has neither, unless escape hatches
// (addPublicOverrides) replace them. cfg is its merged opaque config
// (sidecarConfig).
func (b *builder) publicListener(cp *proxycfg.ConnectProxySnapshot, cfg map[string]any) error {
	svc := b.snap.Service
	pc := svc.Proxy
	localOverridden, publicOverridden, err := b.addPublicOverrides(cp, cfg)
	if err != nil || pc.LocalServicePort <= 0 {
		return err
	}
	protocol := serviceProtocol(svc, cp.ServiceConfig)
	http := isHTTPProtocol(protocol)
	localAddr := pc.LocalServiceAddress
	if localAddr == "" {
		localAddr = "127.0.0.1"
	}
	if !localOverridden {
		b.add(ClusterType, localAppCluster, b.staticCluster(clusterOpts{
			name:           localAppCluster,
			connectTimeout: opaqueMillis(cfg, cfgLocalConnectTimeout),
			http2:          isHTTP2Protocol(protocol),
		}, localAddr, pc.LocalServicePort))
	}
	if publicOverridden {
		return nil
	}

	addr := structs.OpaqueString(cfg, cfgBindAddress)
	if addr == "" {
		addr = svc.Address
	}
	if addr == "" {
		addr = "0.0.0.0"
	}
	port := svc.Port
	if p, ok := structs.OpaqueInt(cfg, cfgBindPort); ok && p > 0 {
		port = int(p)
	}
	if port <= 0 || port > 65535 {
		return nil
	}

	var filters []*listenerv3.Filter
	if http {
		action := &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: localAppCluster}}
		setTimeout(&action.Timeout, opaqueMillis(cfg, cfgLocalRequestTimeout))
		rc := routeConfiguration(publicListenerPrefix, &routev3.VirtualHost{
			Name:    publicListenerPrefix,
			Domains: []string{"*"},
			Routes:  []*routev3.Route{{Match: prefixMatch("/"), Action: &routev3.Route_Route{Route: action}}},
		})
		httpFilters := []*hcmv3.HttpFilter{b.httpRBAC(cp.Intentions, b.snap.IntentionDefaultAllow)}
		forward := b.forwardsClientCert()
		if forward {
			httpFilters = append(httpFilters, b.xfccMetadataFilter())
		}
		filters = append(filters, b.httpConnectionManager(hcmOpts{
			statPrefix:        publicListenerPrefix,
			routeConfig:       rc,
			filters:           httpFilters,
			http2:             isHTTP2Protocol(protocol),
			forwardClientCert: forward,
			normalize:         true,
			normalization:     b.snap.MeshConfig.RequestNormalization(),
			// Consul lets websockets through every HTTP listener.
			websocket:  true,
			accessLogs: b.filterAccessLogs(),
		}))
	} else {
		filters = append(filters,
			b.networkRBAC(cp.Intentions, b.snap.IntentionDefaultAllow),
			b.tcpProxy(publicListenerPrefix, localAppCluster, b.filterAccessLogs()...))
	}
	name := listenerName(publicListenerPrefix, addr, port)
	b.addListener(&listenerv3.Listener{
		Name:    name,
		Address: socketAddress(addr, port),
		FilterChains: []*listenerv3.FilterChain{{
			Filters:         filters,
			TransportSocket: b.meshDownstreamTLS(cp.Leaf, publicALPN(protocol)...),
		}},
		TrafficDirection: corev3.TrafficDirection_INBOUND,
		AccessLog:        b.listenerAccessLogs(),
	})
	return nil
}

// upstreamFilter is the network filter that sends an upstream's traffic
// into its chain: an HTTP connection manager with RDS (adding the route
// configuration named after the upstream) for HTTP chains, a tcp_proxy
// otherwise.
func (b *builder) upstreamFilter(u *proxycfg.UpstreamSnapshot) (*listenerv3.Filter, error) {
	chain := u.Chain
	if isHTTPProtocol(chain.Protocol) {
		name := string(u.ID)
		vh, err := chainVirtualHost(chain, name, []string{"*"})
		if err != nil {
			return nil, err
		}
		b.add(RouteType, name, routeConfiguration(name, vh))
		return b.httpConnectionManager(hcmOpts{
			statPrefix: chainStatPrefix(chain),
			rds:        name,
			http2:      isHTTP2Protocol(chain.Protocol),
			websocket:  true,
			accessLogs: b.filterAccessLogs(),
		}), nil
	}
	cluster, weighted, err := chainTCPDestination(chain)
	if err != nil {
		return nil, err
	}
	if weighted != nil {
		return b.tcpProxyWeighted(chainStatPrefix(chain), weighted, b.filterAccessLogs()...), nil
	}
	return b.tcpProxy(chainStatPrefix(chain), cluster, b.filterAccessLogs()...), nil
}
