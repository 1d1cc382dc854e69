package gen

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// Expose paths are Consul's Proxy.Expose.Paths: single HTTP paths of the
// local application that a sidecar serves on listeners of their own,
// in plain text, without mTLS or intentions, so that what lives outside
// the mesh (Kubernetes probes, Nomad or Consul checks) reaches them.
// Generation follows Consul's agent/xds:
//
//   - Which paths: Consul's agent merges the central configuration into
//     the registration with mergo.Merge (no override): the registration's
//     Paths when it lists any, else the resolved service config's
//     (service-defaults' when set there, else proxy-defaults'; the server
//     resolves that). Paths are not appended to each other. Checks is
//     ORed, but only Paths are generated here (see below).
//   - A listener per path, "exposed_path_<path>:<addr>:<ListenerPort>",
//     where <path> is the path with everything but ASCII letters and
//     digits removed, bound where the public listener binds:
//     bind_address, else the proxy's address, else 0.0.0.0 (bind_port
//     does not apply). Inbound, no TLS, one filter chain: an HTTP
//     connection manager with stat prefix
//     "exposed_path_filter_<path>_<ListenerPort>" and an inline route
//     configuration and virtual host of that name, whose one route
//     matches the exact path (query string aside) and goes to the path's
//     cluster. Anything else gets a 404. Protocol http2 makes it accept
//     HTTP/2 (gRPC health checks).
//   - The cluster is local_app when LocalPathPort is the local service
//     port, else a static "exposed_cluster_<LocalPathPort>" on the local
//     service address (127.0.0.1 by default), with local_app's connect
//     timeout (local_connect_timeout_ms) and HTTP/2 toward the
//     application when the path's protocol is http2: the path's protocol
//     decides, not the service's (Consul's "grpc service, http1 expose
//     path" case). Unlike Consul, an envoy_local_cluster_json does not
//     replace exposed_cluster_*: Consul gives them the override's name,
//     which leaves the route's cluster missing; and a path on the local
//     service port goes to exposed_cluster_<port> when there is no
//     cluster named local_app (a renamed override, or no local service
//     port).
//
// Consul's agent refuses at registration an empty path, a listener port
// outside 1-65535, two paths on one listener port and a protocol other
// than http and http2 (agent/local/validate.go does the same), but not
// what the config entries say. What cannot be served as asked is left
// out here, the rest of the proxy staying as it is: a path that is empty
// or does not start with "/" (it matches no request: Consul would bind a
// listener that answers 404 to everything), a listener or local port
// outside 1-65535, an unknown protocol (Consul falls back to a tcp_proxy,
// which would expose the whole port in plain text), and a path whose
// listener address is taken, by the public listener or by an earlier
// path (Envoy cannot bind it twice; Consul sends both and Envoy rejects
// one). Being in the public part, an exposed listener comes before the
// upstreams' in assemble's "first listener on an address wins".
//
// Expose.Checks (exposing every HTTP and gRPC check of the service) is
// not generated: it needs the agent to rewrite the checks to go through
// the proxy, and the checks in the snapshot.
//
// The listeners and clusters belong to the sidecar's public part: their
// inputs are the registration (*NodeService) and the resolved service
// config, both in the part's key (publicKey), which proxycfg replaces
// when they change.

// Names of the exposed resources (Consul's).
const (
	exposedPathPrefix    = "exposed_path_"
	exposedFilterPrefix  = "exposed_path_filter_"
	exposedClusterPrefix = "exposed_cluster_"
	defaultExposeProto   = "http"
)

// exposePaths is what a sidecar exposes: the registration's paths when it
// has any, else the central configuration's (Consul's agent-side merge).
func exposePaths(svc *structs.NodeService, sc *structs.ServiceConfigResponse) []structs.ExposePath {
	if len(svc.Proxy.Expose.Paths) > 0 || sc == nil {
		return svc.Proxy.Expose.Paths
	}
	return sc.Expose.Paths
}

// exposeProtocol is a path's protocol, lower case, http when unset; ok is
// false for a protocol an exposed path cannot have.
func exposeProtocol(p structs.ExposePath) (string, bool) {
	proto := strings.ToLower(p.Protocol)
	switch proto {
	case "":
		return defaultExposeProto, true
	case "http", "http2":
		return proto, true
	}
	return "", false
}

// exposable reports whether a path can be served as asked (see above).
func exposable(p structs.ExposePath) bool {
	_, ok := exposeProtocol(p)
	return ok && strings.HasPrefix(p.Path, "/") &&
		p.ListenerPort > 0 && p.ListenerPort <= 65535 &&
		p.LocalPathPort > 0 && p.LocalPathPort <= 65535
}

// stripPath keeps a path's ASCII letters and digits, for names.
func stripPath(path string) string {
	var b strings.Builder
	for _, r := range path {
		if r < 0x80 && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// exposedPaths adds the exposed paths' listeners and clusters to the
// current part, after the public listener and local_app; cfg is the
// sidecar's merged opaque config (sidecarConfig).
func (b *builder) exposedPaths(cp *proxycfg.ConnectProxySnapshot, cfg map[string]any) {
	svc := b.snap.Service
	paths := exposePaths(svc, cp.ServiceConfig)
	if len(paths) == 0 {
		return
	}
	addr := structs.OpaqueString(cfg, cfgBindAddress)
	if addr == "" {
		addr = svc.Address
	}
	if addr == "" {
		addr = "0.0.0.0"
	}
	localAddr := svc.Proxy.LocalServiceAddress
	if localAddr == "" {
		localAddr = "127.0.0.1"
	}
	taken, haveLocalApp := b.curListenersAndLocalApp()
	clusters := map[string]bool{}
	for _, p := range paths {
		if !exposable(p) {
			continue
		}
		key := listenerAddr{addr: addr, port: uint32(p.ListenerPort)} //nolint:gosec // exposable checked 1-65535
		if taken[key] {
			continue
		}
		taken[key] = true
		proto, _ := exposeProtocol(p)
		cluster := localAppCluster
		if p.LocalPathPort != svc.Proxy.LocalServicePort || !haveLocalApp {
			cluster = fmt.Sprintf("%s%d", exposedClusterPrefix, p.LocalPathPort)
			if !clusters[cluster] {
				// Two paths to one local port share the cluster: the
				// first one's protocol makes it.
				clusters[cluster] = true
				b.add(ClusterType, cluster, b.staticCluster(clusterOpts{
					name:           cluster,
					connectTimeout: opaqueMillis(cfg, cfgLocalConnectTimeout),
					http2:          proto == "http2",
				}, localAddr, p.LocalPathPort))
			}
		}
		stripped := stripPath(p.Path)
		filterName := fmt.Sprintf("%s%s_%d", exposedFilterPrefix, stripped, p.ListenerPort)
		rc := routeConfiguration(filterName, &routev3.VirtualHost{
			Name:    filterName,
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: p.Path}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}},
			}},
		})
		b.addListener(&listenerv3.Listener{
			Name:    listenerName(exposedPathPrefix+stripped, addr, p.ListenerPort),
			Address: socketAddress(addr, p.ListenerPort),
			FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{b.httpConnectionManager(hcmOpts{
				statPrefix:  filterName,
				routeConfig: rc,
				http2:       proto == "http2",
				accessLogs:  b.filterAccessLogs(),
			})}}},
			TrafficDirection: corev3.TrafficDirection_INBOUND,
			AccessLog:        b.listenerAccessLogs(),
		})
	}
}

// curListenersAndLocalApp reports the addresses the current part's
// listeners bind and whether it has a cluster named local_app (generated
// or an envoy_local_cluster_json of that name).
func (b *builder) curListenersAndLocalApp() (map[listenerAddr]bool, bool) {
	taken := map[listenerAddr]bool{}
	localApp := false
	if b.cur == nil {
		return taken, false
	}
	for _, r := range b.cur.resources {
		if l, ok := r.msg.(*listenerv3.Listener); ok {
			sa := l.GetAddress().GetSocketAddress()
			taken[listenerAddr{addr: sa.GetAddress(), port: sa.GetPortValue()}] = true
		}
		if resourceTypes[r.typeIdx] == ClusterType && r.name == localAppCluster {
			localApp = true
		}
	}
	return taken, localApp
}
