package gen

import (
	"net"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/trellis-mesh/trellis/structs"
)

func wrapBool(v bool) *wrapperspb.BoolValue         { return wrapperspb.Bool(v) }
func wrapUint32(v uint32) *wrapperspb.UInt32Value   { return wrapperspb.UInt32(v) }
func duration(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// adsSource is "fetch it over the same ADS stream".
func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
	}
}

// socketAddress is a TCP address.
func socketAddress(addr string, port int) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       addr,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)}, //nolint:gosec // a port, 0-65535
	}}}
}

// networkFilter packs a network filter.
func (b *builder) networkFilter(name string, cfg proto.Message) *listenerv3.Filter {
	return &listenerv3.Filter{Name: name, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: b.any(cfg)}}
}

// httpFilter packs an HTTP filter.
func (b *builder) httpFilter(name string, cfg proto.Message) *hcmv3.HttpFilter {
	return &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: b.any(cfg)}}
}

// routerFilter is the terminal HTTP filter every connection manager ends
// with.
func (b *builder) routerFilter() *hcmv3.HttpFilter {
	return b.httpFilter(wellknown.Router, &routerv3.Router{})
}

func (b *builder) tlsInspector() *listenerv3.ListenerFilter {
	return &listenerv3.ListenerFilter{
		Name:       wellknown.TlsInspector,
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: b.any(&tlsinspectorv3.TlsInspector{})},
	}
}

func (b *builder) originalDst() *listenerv3.ListenerFilter {
	return &listenerv3.ListenerFilter{
		Name:       wellknown.OriginalDestination,
		ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: b.any(&origdstv3.OriginalDst{})},
	}
}

// tcpProxy forwards a connection to one cluster, logging it with logs
// (access_logs.go).
func (b *builder) tcpProxy(statPrefix, cluster string, logs ...*accesslogv3.AccessLog) *listenerv3.Filter {
	return b.networkFilter(wellknown.TCPProxy, &tcpproxyv3.TcpProxy{
		StatPrefix:       statPrefix,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster},
		AccessLog:        logs,
	})
}

// tcpProxyWeighted forwards connections to weighted clusters, logging
// them with logs.
func (b *builder) tcpProxyWeighted(statPrefix string, clusters []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight, logs ...*accesslogv3.AccessLog) *listenerv3.Filter {
	return b.networkFilter(wellknown.TCPProxy, &tcpproxyv3.TcpProxy{
		StatPrefix:       statPrefix,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{Clusters: clusters}},
		AccessLog:        logs,
	})
}

// hcmOpts describes an HTTP connection manager.
type hcmOpts struct {
	statPrefix string
	// Exactly one of rds (a route configuration name) and routeConfig.
	rds         string
	routeConfig *routev3.RouteConfiguration
	// filters run before the router filter.
	filters []*hcmv3.HttpFilter
	// http2 accepts HTTP/2 (and gRPC) from downstream.
	http2 bool
	// forwardClientCert adds the mTLS client identity (XFCC) to requests:
	// the application learns who called it.
	forwardClientCert bool
	// normalize applies the mesh entry's request normalization (a public
	// listener's, see normalizeRequests).
	normalize     bool
	normalization *structs.RequestNormalizationMeshConfig
	websocket     bool
	// accessLogs log every request (access_logs.go).
	accessLogs []*accesslogv3.AccessLog
}

func (b *builder) httpConnectionManager(o hcmOpts) *listenerv3.Filter {
	hcm := &hcmv3.HttpConnectionManager{
		CodecType:   hcmv3.HttpConnectionManager_AUTO,
		StatPrefix:  o.statPrefix,
		HttpFilters: append(append([]*hcmv3.HttpFilter{}, o.filters...), b.routerFilter()),
		AccessLog:   o.accessLogs,
	}
	if o.routeConfig != nil {
		hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: o.routeConfig}
	} else {
		hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{ConfigSource: adsSource(), RouteConfigName: o.rds}}
	}
	if o.http2 {
		hcm.Http2ProtocolOptions = &corev3.Http2ProtocolOptions{}
	}
	if o.forwardClientCert {
		hcm.ForwardClientCertDetails = hcmv3.HttpConnectionManager_APPEND_FORWARD
		hcm.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{
			Subject: wrapBool(true), Cert: true, Chain: true, Dns: true, Uri: true,
		}
	}
	if o.normalize {
		normalizeRequests(hcm, o.normalization)
	}
	if o.websocket {
		hcm.UpgradeConfigs = []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}}
	}
	return b.networkFilter(wellknown.HTTPConnectionManager, hcm)
}

// hostPrefix is the single-address CIDR of an IP; ok is false for a host
// name.
func hostPrefix(addr string) (*corev3.CidrRange, bool) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return nil, false
	}
	bits := uint32(32)
	if ip.To4() == nil {
		bits = 128
	}
	return &corev3.CidrRange{AddressPrefix: ip.String(), PrefixLen: wrapUint32(bits)}, true
}
