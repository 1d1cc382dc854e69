package bootstrap

import (
	"fmt"
	"net"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// Names of the static listeners that expose a slice of Envoy's admin API,
// and of the cluster they route to, as Consul names them: dashboards,
// alerts and scripts written against Consul's Envoys look for these.
const (
	// ReadyListenerName is the listener of Config.ReadyBindAddr.
	ReadyListenerName = "envoy_ready_listener"
	// PrometheusListenerName is the listener of Config.PrometheusBindAddr
	// (Consul's envoy_prometheus_bind_addr).
	PrometheusListenerName = "envoy_prometheus_metrics_listener"
	// StatsListenerName is the listener of Config.StatsBindAddr (Consul's
	// envoy_stats_bind_addr).
	StatsListenerName = "envoy_metrics_listener"
	// SelfAdminClusterName names the static cluster of Envoy's own admin
	// server that those listeners route to. Like LocalAgentClusterName, the
	// xDS generators must never emit a cluster of this name.
	SelfAdminClusterName = "self_admin"
)

// Config keys of a proxy's opaque config (Proxy.Config, or the global
// proxy-defaults entry's Config) that ask for an admin listener. Errors
// about the matching Config fields name these keys, since that is where
// the user wrote the bad value.
const (
	// PrometheusBindAddrKey sets Config.PrometheusBindAddr.
	PrometheusBindAddrKey = "envoy_prometheus_bind_addr"
	// StatsBindAddrKey sets Config.StatsBindAddr.
	StatsBindAddrKey = "envoy_stats_bind_addr"
)

const (
	selfAdminRoute   = "self_admin_route"
	hcmFilterName    = "envoy.filters.network.http_connection_manager"
	routerFilterName = "envoy.filters.http.router"
	selfAdminTimeout = 5 * time.Second
)

// adminListener is a static listener that forwards one path (or path
// prefix) to Envoy's admin server and answers 404 to everything else, so
// that a read-only piece of the admin API can be reached from the network
// while the rest of it, which controls the proxy, stays on loopback.
type adminListener struct {
	what       string // how errors name the address: a config key, or a description
	name       string // listener name
	statPrefix string // connection manager stat prefix
	bind       string // ip:port
	prefix     bool   // match by path prefix rather than exact path
	match      string // the path or prefix exposed
	rewrite    string // what the matched part becomes on the admin server
}

// adminListeners returns the admin listeners cfg asks for, in Consul's
// order (prometheus, stats, ready), so that output diffs against Consul's
// stay small.
func adminListeners(cfg Config) []adminListener {
	var out []adminListener
	if cfg.PrometheusBindAddr != "" {
		out = append(out, adminListener{
			what: PrometheusBindAddrKey, name: PrometheusListenerName, statPrefix: "envoy_prometheus_metrics",
			bind: cfg.PrometheusBindAddr, match: "/metrics", rewrite: "/stats/prometheus",
		})
	}
	if cfg.StatsBindAddr != "" {
		out = append(out, adminListener{
			what: StatsBindAddrKey, name: StatsListenerName, statPrefix: "envoy_metrics",
			bind: cfg.StatsBindAddr, prefix: true, match: "/stats", rewrite: "/stats",
		})
	}
	if cfg.ReadyBindAddr != "" {
		out = append(out, adminListener{
			what: "ready bind address", name: ReadyListenerName, statPrefix: "envoy_ready",
			bind: cfg.ReadyBindAddr, match: "/ready", rewrite: "/ready",
		})
	}
	return out
}

// buildAdminListeners returns the listeners cfg asks for and the one
// self_admin cluster they share (nil when there are none): Envoy refuses
// a bootstrap that defines a cluster name twice.
func buildAdminListeners(cfg Config) ([]*listenerv3.Listener, *clusterv3.Cluster, error) {
	specs := adminListeners(cfg)
	if len(specs) == 0 {
		return nil, nil, nil
	}
	// Envoy fails at start-up when two listeners, or a listener and the
	// admin server, bind the same address; say which keys collide instead.
	taken := map[string]string{}
	if admin, err := canonicalHostPort(cfg.AdminBind); err == nil {
		taken[admin] = "admin bind address"
	}
	var listeners []*listenerv3.Listener
	for _, s := range specs {
		l, err := s.build()
		if err != nil {
			return nil, nil, err
		}
		key, _ := canonicalHostPort(s.bind) // build has parsed it already
		if other, ok := taken[key]; ok {
			return nil, nil, fmt.Errorf("%w: %s %q is also the %s", ErrInvalidConfig, s.what, s.bind, other)
		}
		taken[key] = s.what
		listeners = append(listeners, l)
	}
	c, err := buildSelfAdminCluster(cfg)
	if err != nil {
		return nil, nil, err
	}
	return listeners, c, nil
}

// canonicalHostPort spells an ip:port one way, so that 127.0.0.1:80 and
// [::ffff:127.0.0.1]:80 compare equal.
func canonicalHostPort(hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return "", fmt.Errorf("%q is not an IP address", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip.String(), strconv.FormatUint(p, 10)), nil
}

func (s adminListener) build() (*listenerv3.Listener, error) {
	addr, err := socketAddress(s.what, s.bind)
	if err != nil {
		return nil, err
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, fmt.Errorf("packing router filter: %w", err)
	}
	match := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: s.match}}
	if s.prefix {
		match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: s.match}}
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: s.statPrefix,
		CodecType:  hcmv3.HttpConnectionManager_HTTP1,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: selfAdminRoute,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    SelfAdminClusterName,
				Domains: []string{"*"},
				Routes: []*routev3.Route{
					{
						Match: match,
						Action: &routev3.Route_Route{Route: &routev3.RouteAction{
							ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: SelfAdminClusterName},
							PrefixRewrite:    s.rewrite,
						}},
					},
					{
						// The listener may be on a public address: nothing
						// but the one path reaches the admin server.
						Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
						Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 404}},
					},
				},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       routerFilterName,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("packing %s: %w", s.name, err)
	}
	return &listenerv3.Listener{
		Name:    s.name,
		Address: addr,
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       hcmFilterName,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
			}},
		}},
	}, nil
}

// buildSelfAdminCluster returns the static cluster of Envoy's own admin
// server.
func buildSelfAdminCluster(cfg Config) (*clusterv3.Cluster, error) {
	admin, err := socketAddress("admin bind address", cfg.AdminBind)
	if err != nil {
		return nil, err
	}
	// An admin server bound to every address is reached on loopback: a
	// wildcard is a fine address to listen on but not one to connect to on
	// every platform.
	sa := admin.GetSocketAddress()
	if ip := net.ParseIP(sa.GetAddress()); ip.IsUnspecified() {
		if ip.To4() != nil {
			sa.Address = "127.0.0.1"
		} else {
			sa.Address = "::1"
		}
	}
	return staticCluster(SelfAdminClusterName, selfAdminTimeout, admin), nil
}
