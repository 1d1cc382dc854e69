package bootstrap

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Names of the readiness listener's pieces, as in Consul.
const (
	ReadyListenerName = "envoy_ready_listener"
	selfAdminCluster  = "self_admin"
	selfAdminRoute    = "self_admin_route"
	readyPath         = "/ready"
	hcmFilterName     = "envoy.filters.network.http_connection_manager"
	routerFilterName  = "envoy.filters.http.router"
	selfAdminTimeout  = 5 * time.Second
)

// buildReadyListener returns the static listener that answers GET /ready on
// ReadyBindAddr from Envoy's admin server, and the self_admin cluster it
// routes to. An ingress gateway needs it: its registered address and port
// are what its health check probes, but its real listeners come from the
// ingress-gateway config entry and may use other ports or none yet.
func buildReadyListener(cfg Config) (*listenerv3.Listener, *clusterv3.Cluster, error) {
	addr, err := socketAddress("ready bind address", cfg.ReadyBindAddr)
	if err != nil {
		return nil, nil, err
	}
	admin, err := socketAddress("admin bind address", cfg.AdminBind)
	if err != nil {
		return nil, nil, err
	}
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, nil, fmt.Errorf("packing router filter: %w", err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: "envoy_ready",
		CodecType:  hcmv3.HttpConnectionManager_HTTP1,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: selfAdminRoute,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    selfAdminCluster,
				Domains: []string{"*"},
				Routes: []*routev3.Route{
					{
						Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: readyPath}},
						Action: &routev3.Route_Route{Route: &routev3.RouteAction{
							ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: selfAdminCluster},
							PrefixRewrite:    readyPath,
						}},
					},
					{
						// Only /ready: the rest of the admin API stays off
						// this (possibly public) address.
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
		return nil, nil, fmt.Errorf("packing ready listener: %w", err)
	}
	l := &listenerv3.Listener{
		Name:    ReadyListenerName,
		Address: addr,
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       hcmFilterName,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
			}},
		}},
	}
	c := &clusterv3.Cluster{
		Name:                 selfAdminCluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(selfAdminTimeout),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: selfAdminCluster,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: admin}},
				}},
			}},
		},
	}
	return l, c, nil
}
