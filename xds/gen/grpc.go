package gen

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// The gRPC flavour: what a gRPC library's own xDS client (grpc-go's
// google.golang.org/grpc/xds, grpc-java, grpc-js-xds ...) accepts, for a
// Connect-native application with no Envoy beside it. It differs from the
// Envoy resources where gRPC's validation (gRFC A27, A28, A29, A36) does:
//   - a client listener is an api_listener named after what the
//     application dials (xds:///api asks for "api"), wrapping an HTTP
//     connection manager with RDS over ADS and the router last;
//   - TLS contexts name the certificate-provider instance of the client's
//     bootstrap (GRPCCertProviderInstance) instead of inlining PEM, and set
//     no tls_params (gRPC refuses them);
//   - every locality of an endpoint set carries a load-balancing weight
//     (gRPC's weighted-locality balancer drops localities without one);
//   - routes time out with max_stream_duration and retry on gRPC status
//     names; what gRPC ignores (header rewriting, Envoy retry conditions)
//     is left out;
//   - the server listener of an xds.NewGRPCServer is a socket listener
//     whose routes use non_forwarding_action.
// Cluster and endpoint-set names are the Envoy generator's, so both kinds
// of client share names (and the ADS server's endpoint sets).

// GRPCCertProviderInstance is the certificate-provider instance the gRPC
// resources' TLS contexts name, for the identity (the service's leaf and
// key) and for the roots: a gRPC client's bootstrap must define it in its
// certificate_providers (the file_watcher plugin over the certificate
// files the agent keeps for the service).
const GRPCCertProviderInstance = "trellis"

// GRPCServerListenerPrefix is grpc-go's default
// server_listener_resource_name_template up to its "%s", which an
// xds.NewGRPCServer fills with its listening address (host:port).
const GRPCServerListenerPrefix = "grpc/server?xds.resource.listening_address="

// GRPCTarget returns the service a gRPC client listener name stands for:
// the name itself ("api"), or "<service>.default.<dc>" in datacenter dc,
// either with a port (xds:///api:8080 asks for "api:8080"; the port is
// the target's to decide, so it is ignored). Server listener names are
// not targets.
func GRPCTarget(name, dc string) (string, bool) {
	if strings.HasPrefix(name, GRPCServerListenerPrefix) {
		return "", false
	}
	if host, port, err := net.SplitHostPort(name); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return "", false
		}
		name = host
	}
	if name == "" || strings.ContainsAny(name, "/:?[]") {
		return "", false
	}
	if svc, ok := strings.CutSuffix(name, "."+defaultNamespace+"."+dc); ok && svc != "" && !strings.Contains(svc, ".") {
		return svc, true
	}
	if strings.Contains(name, ".") {
		return "", false
	}
	return name, true
}

// GenerateGRPC returns the gRPC flavour of resources for a Connect-native
// application, from a connect-proxy snapshot of its service whose
// upstreams are the services it dials, and the listener names its client
// subscribes to:
//   - a client listener name (GRPCTarget) of a known upstream, once the
//     endpoints of its every target have been read, gets its
//     listener, route configuration (of the same name), clusters and
//     endpoint sets; a service nothing is known of (a default chain whose
//     every target has no instance) gets none, so that gRPC reports the
//     resource does not exist rather than dialling nowhere;
//   - a server listener name (GRPCServerListenerPrefix) on the service's
//     port gets the inbound listener, authorized by the intentions.
func GenerateGRPC(snap *proxycfg.ConfigSnapshot, listeners []string) (Resources, error) {
	switch {
	case snap == nil:
		return nil, fmt.Errorf("%w: nil snapshot", ErrInvalidSnapshot)
	case snap.Kind != structs.ServiceKindConnectProxy || snap.ConnectProxy == nil:
		return nil, fmt.Errorf("%w: gRPC resources for %q", ErrUnsupportedKind, snap.Kind)
	case snap.Service == nil:
		return nil, fmt.Errorf("%w: %s has no service", ErrInvalidSnapshot, snap.ProxyID)
	}
	b := newBuilder(snap)
	for _, name := range listeners {
		var err error
		if addr, ok := strings.CutPrefix(name, GRPCServerListenerPrefix); ok {
			err = b.grpcServerListener(name, addr)
		} else if svc, ok := GRPCTarget(name, snap.Datacenter); ok {
			err = b.grpcClientListener(name, snap.ConnectProxy.Upstreams.Get(proxycfg.UpstreamID(svc)))
		}
		if err != nil {
			return nil, fmt.Errorf("gen: %s: listener %q: %w", snap.ProxyID, name, err)
		}
	}
	if b.err != nil {
		return nil, fmt.Errorf("gen: %s: %w", snap.ProxyID, b.err)
	}
	res, _, _ := b.assemble(nil, nil)
	return res, nil
}

// loadedUpstream reports whether the endpoints of every target of an
// upstream's chain have been read. Until then its resources would carry
// empty endpoint sets, which a gRPC client applies at once: an agent
// that has just restarted would turn its clients' working configuration
// into "no targets to pick from" for as long as its first reads take.
// Sent nothing instead, a client keeps what it has (its bootstrap asks
// it to ignore resource deletions) or waits for the first complete set.
func loadedUpstream(u *proxycfg.UpstreamSnapshot) bool {
	for id := range u.Chain.Targets {
		if _, ok := u.Endpoints[id]; !ok {
			return false
		}
	}
	return true
}

// knownUpstream reports whether a loaded upstream's service exists as far
// as the snapshot can tell: its chain is configured, or a target has an
// instance.
func knownUpstream(u *proxycfg.UpstreamSnapshot) bool {
	if !u.Chain.Default {
		return true
	}
	for id := range u.Chain.Targets {
		if len(u.Endpoints[id]) > 0 {
			return true
		}
	}
	return false
}

// grpcClientListener adds the api_listener name for upstream u with its
// routes, clusters and endpoint sets; nothing while u, its chain or its
// endpoints are not known yet, or its service does not exist.
func (b *builder) grpcClientListener(name string, u *proxycfg.UpstreamSnapshot) error {
	if u == nil || u.Chain == nil || !loadedUpstream(u) || !knownUpstream(u) {
		return nil
	}
	vh, err := chainVirtualHost(u.Chain, name, []string{"*"})
	if err != nil {
		return err
	}
	for _, r := range vh.Routes {
		grpcRoute(r)
	}
	b.add(RouteType, name, &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{vh}})
	clusters, err := chainClusters(u.Chain)
	if err != nil {
		return err
	}
	for _, cc := range clusters {
		b.add(ClusterType, cc.name, b.grpcCluster(cc))
		if cc.target != nil {
			b.add(EndpointType, cc.name, grpcAssignment(b.targetAssignment(cc.name, u, cc.target), cc.target.Datacenter))
		}
	}
	hcm := b.httpConnectionManager(hcmOpts{statPrefix: chainStatPrefix(u.Chain), rds: name})
	b.addListener(&listenerv3.Listener{
		Name:        name,
		ApiListener: &listenerv3.ApiListener{ApiListener: hcm.GetTypedConfig()},
	})
	return nil
}

// grpcRoute drops from an Envoy route what gRPC ignores and moves what it
// reads differently: the request timeout is the stream's maximum
// duration, and retries name gRPC status codes.
func grpcRoute(r *routev3.Route) {
	r.RequestHeadersToAdd, r.RequestHeadersToRemove = nil, nil
	r.ResponseHeadersToAdd, r.ResponseHeadersToRemove = nil, nil
	a := r.GetRoute()
	if a == nil {
		return
	}
	if t := a.GetTimeout(); t != nil {
		a.MaxStreamDuration = &routev3.RouteAction_MaxStreamDuration{MaxStreamDuration: t}
	}
	a.Timeout, a.IdleTimeout, a.PrefixRewrite = nil, nil, ""
	a.HashPolicy = slices.DeleteFunc(a.HashPolicy, func(p *routev3.RouteAction_HashPolicy) bool { return p.GetHeader() == nil })
	for _, c := range a.GetWeightedClusters().GetClusters() {
		c.RequestHeadersToAdd, c.RequestHeadersToRemove = nil, nil
		c.ResponseHeadersToAdd, c.ResponseHeadersToRemove = nil, nil
	}
	if rp := a.GetRetryPolicy(); rp != nil {
		on := grpcRetryOn(rp.GetRetryOn())
		if on == "" {
			a.RetryPolicy = nil
			return
		}
		a.RetryPolicy = &routev3.RetryPolicy{RetryOn: on, NumRetries: rp.GetNumRetries()}
	}
}

// grpcRetryOn maps Envoy retry conditions (a service-router's RetryOn,
// which also takes gRPC's names) to the gRPC status names gRPC retries on:
// a failure to connect or an HTTP 5xx is UNAVAILABLE to a gRPC client.
func grpcRetryOn(envoy string) string {
	var out []string
	for _, c := range strings.Split(envoy, ",") {
		switch c = strings.TrimSpace(c); c {
		case "connect-failure", "reset", "5xx", "gateway-error", "refused-stream":
			c = "unavailable"
		case "cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable":
		default:
			continue
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return strings.Join(out, ",")
}

// grpcCluster is a chain cluster as gRPC takes it: EDS over ADS (or an
// aggregate for failover) with a policy gRPC implements, and mTLS to the
// target through the bootstrap's certificate provider.
func (b *builder) grpcCluster(cc chainCluster) *clusterv3.Cluster {
	if cc.target == nil {
		return &clusterv3.Cluster{
			Name: cc.name,
			ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
				Name:        aggregateClusterType,
				TypedConfig: b.any(&aggregatev3.ClusterConfig{Clusters: cc.members}),
			}},
		}
	}
	c := &clusterv3.Cluster{
		Name:                 cc.name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource()},
		TransportSocket:      b.grpcUpstreamTLS(cc.target.SNI, targetSpiffeID(cc.target, b.td)),
	}
	applyLB(c, cc.node.LoadBalancer)
	switch c.LbPolicy {
	case clusterv3.Cluster_ROUND_ROBIN, clusterv3.Cluster_LEAST_REQUEST:
	case clusterv3.Cluster_RING_HASH:
		// gRPC's ring hash hashes with xxHash only, Envoy's default.
		if rh := c.GetRingHashLbConfig(); rh != nil {
			rh.HashFunction = clusterv3.Cluster_RingHashLbConfig_XX_HASH
		}
	default:
		// random and maglev: gRPC has neither.
		c.LbPolicy, c.LbConfig = clusterv3.Cluster_ROUND_ROBIN, nil
	}
	return c
}

// grpcUpstreamTLS is the client side of mesh mTLS for gRPC: the identity
// and the roots from the bootstrap's certificate provider, the server
// accepted only with the target's SPIFFE ID.
func (b *builder) grpcUpstreamTLS(sni, spiffeID string) *corev3.TransportSocket {
	vc := &tlsv3.CertificateValidationContext{
		CaCertificateProviderInstance: grpcProvider(),
	}
	if spiffeID != "" {
		vc.MatchSubjectAltNames = []*matcherv3.StringMatcher{{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: spiffeID}}} //nolint:staticcheck // gRPC reads only these untyped matchers (gRFC A29), not the typed ones Envoy prefers
	}
	return b.transportSocket(&tlsv3.UpstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateProviderInstance: grpcProvider(),
			ValidationContextType:          &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc},
		},
		Sni: sni,
	})
}

func grpcProvider() *tlsv3.CertificateProviderPluginInstance {
	return &tlsv3.CertificateProviderPluginInstance{InstanceName: GRPCCertProviderInstance}
}

// grpcAssignment is an endpoint set with a locality and a weight on every
// locality (gRPC refuses a locality without ID and drops one without
// weight); the locality is the target's datacenter. The Envoy set it
// comes from may be shared with other proxies, so it is wrapped, never
// modified; the endpoints themselves are shared.
func grpcAssignment(cla *endpointv3.ClusterLoadAssignment, dc string) *endpointv3.ClusterLoadAssignment {
	out := &endpointv3.ClusterLoadAssignment{ClusterName: cla.GetClusterName()}
	for _, l := range cla.GetEndpoints() {
		loc := l.GetLocality()
		if loc == nil {
			loc = &corev3.Locality{Region: dc}
		}
		out.Endpoints = append(out.Endpoints, &endpointv3.LocalityLbEndpoints{
			Locality:            loc,
			LbEndpoints:         l.GetLbEndpoints(),
			Priority:            l.GetPriority(),
			LoadBalancingWeight: wrapUint32(max(1, l.GetLoadBalancingWeight().GetValue())),
		})
	}
	return out
}
