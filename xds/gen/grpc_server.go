package gen

import (
	"fmt"
	"net"
	"strconv"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
)

// grpcInboundRoute names the inline route configuration of a gRPC server
// listener.
const grpcInboundRoute = "inbound"

// grpcServerListener adds the listener an xds.NewGRPCServer asks for as
// name, listening on addr (host:port): nothing unless the port is the
// service's own, so a server listener is never answered for an address
// the registration does not claim.
//
// grpc-go's server side takes: a socket address equal to its own, no
// listener filters, filter chains with only the HTTP connection manager
// (routes inline or over ADS), a DownstreamTlsContext naming
// certificate-provider instances (no inline material, no tls_params, no
// SAN matchers), HTTP filters it implements server-side (RBAC) ending in
// the router, and routes whose action is non_forwarding_action.
func (b *builder) grpcServerListener(name, addr string) error {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil //nolint:nilerr // not an address: not a listener of ours
	}
	port, err := strconv.Atoi(portText)
	svc := b.snap.Service
	own := svc.Proxy.LocalServicePort
	if own == 0 {
		own = svc.Port
	}
	if err != nil || port != own || port <= 0 {
		return nil //nolint:nilerr // another address's listener
	}
	cp := b.snap.ConnectProxy
	rc := &routev3.RouteConfiguration{
		Name: grpcInboundRoute,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    grpcInboundRoute,
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match:  prefixMatch("/"),
				Action: &routev3.Route_NonForwardingAction{NonForwardingAction: &routev3.NonForwardingAction{}},
			}},
		}},
	}
	hcm := b.httpConnectionManager(hcmOpts{
		statPrefix:  "public_listener",
		routeConfig: rc,
		filters:     []*hcmv3.HttpFilter{b.httpRBAC(cp.Intentions, b.snap.IntentionDefaultAllow)},
	})
	tls := b.transportSocket(&tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateProviderInstance: grpcProvider(),
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				CaCertificateProviderInstance: grpcProvider(),
			}},
		},
		RequireClientCertificate: wrapBool(true),
	})
	b.addListener(&listenerv3.Listener{
		Name:    name,
		Address: socketAddress(host, port),
		FilterChains: []*listenerv3.FilterChain{{
			Name:            fmt.Sprintf("%s:%d", host, port),
			Filters:         []*listenerv3.Filter{hcm},
			TransportSocket: tls,
		}},
	})
	return nil
}
