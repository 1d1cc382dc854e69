package gen

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/trellis-mesh/trellis/structs"
)

// defaultConnectTimeout is the connect timeout of clusters nothing
// configures (Consul's).
const defaultConnectTimeout = 5 * time.Second

// clusterOpts describes an EDS (or static) cluster.
type clusterOpts struct {
	name           string
	connectTimeout time.Duration
	tls            *corev3.TransportSocket
	lb             *structs.LoadBalancer
	// http2 makes Envoy speak HTTP/2 to the cluster's hosts (http2, grpc).
	http2 bool
	// upstream is the central configuration of the upstream the cluster
	// serves (limits, passive health checks), nil when none.
	upstream *structs.UpstreamConfig
}

// edsCluster is a cluster whose endpoints come over ADS, as the
// ClusterLoadAssignment named like the cluster.
func (b *builder) edsCluster(o clusterOpts) *clusterv3.Cluster {
	c := b.baseCluster(o)
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	c.EdsClusterConfig = &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource()}
	return c
}

// staticCluster is a cluster with one fixed address (local_app).
func (b *builder) staticCluster(o clusterOpts, addr string, port int) *clusterv3.Cluster {
	c := b.baseCluster(o)
	c.ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
	c.LoadAssignment = staticAssignment(o.name, addr, port)
	return c
}

func (b *builder) baseCluster(o clusterOpts) *clusterv3.Cluster {
	timeout := o.connectTimeout
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	c := &clusterv3.Cluster{
		Name:            o.name,
		ConnectTimeout:  duration(timeout),
		TransportSocket: o.tls,
	}
	applyLB(c, o.lb)
	applyUpstreamConfig(c, o.upstream)
	if o.http2 {
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: b.any(http2Options())}
	}
	return c
}

func http2Options() *httpv3.HttpProtocolOptions {
	return &httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	}
}

// aggregateCluster tries its member clusters in order: each takes the
// traffic while the ones before it have no healthy host (failover).
func (b *builder) aggregateCluster(name string, timeout time.Duration, members []string) *clusterv3.Cluster {
	if timeout <= 0 {
		timeout = defaultConnectTimeout
	}
	return &clusterv3.Cluster{
		Name:           name,
		AltStatName:    name,
		ConnectTimeout: duration(timeout),
		LbPolicy:       clusterv3.Cluster_CLUSTER_PROVIDED,
		ClusterDiscoveryType: &clusterv3.Cluster_ClusterType{ClusterType: &clusterv3.Cluster_CustomClusterType{
			Name:        aggregateClusterType,
			TypedConfig: b.any(&aggregatev3.ClusterConfig{Clusters: members}),
		}},
	}
}

// originalDstCluster passes a transparent proxy's traffic for destinations
// outside the mesh to where the application sent it.
func (b *builder) originalDestinationCluster() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 originalDstCluster,
		ConnectTimeout:       duration(defaultConnectTimeout),
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
	}
}

// applyLB sets a resolver's load-balancing policy. Hash policies belong to
// routes (see hashPolicies).
func applyLB(c *clusterv3.Cluster, lb *structs.LoadBalancer) {
	if lb == nil {
		return
	}
	switch lb.Policy {
	case "random":
		c.LbPolicy = clusterv3.Cluster_RANDOM
	case "round_robin":
		c.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	case "least_request":
		c.LbPolicy = clusterv3.Cluster_LEAST_REQUEST
		if cfg := lb.LeastRequestConfig; cfg != nil && cfg.ChoiceCount >= 2 {
			c.LbConfig = &clusterv3.Cluster_LeastRequestLbConfig_{LeastRequestLbConfig: &clusterv3.Cluster_LeastRequestLbConfig{
				ChoiceCount: wrapperspb.UInt32(cfg.ChoiceCount),
			}}
		}
	case "ring_hash":
		c.LbPolicy = clusterv3.Cluster_RING_HASH
		if cfg := lb.RingHashConfig; cfg != nil {
			rh := &clusterv3.Cluster_RingHashLbConfig{}
			if cfg.MinimumRingSize > 0 {
				rh.MinimumRingSize = wrapperspb.UInt64(cfg.MinimumRingSize)
			}
			if cfg.MaximumRingSize > 0 {
				rh.MaximumRingSize = wrapperspb.UInt64(cfg.MaximumRingSize)
			}
			c.LbConfig = &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: rh}
		}
	case "maglev":
		c.LbPolicy = clusterv3.Cluster_MAGLEV
	}
}

// applyUpstreamConfig applies an upstream's central limits (circuit
// breakers) and passive health check (outlier detection).
func applyUpstreamConfig(c *clusterv3.Cluster, cfg *structs.UpstreamConfig) {
	if cfg == nil {
		return
	}
	phc := cfg.PassiveHealthCheck
	if l := cfg.Limits; l != nil {
		th := &clusterv3.CircuitBreakers_Thresholds{}
		limit := func(v *int) *wrapperspb.UInt32Value {
			if v == nil || *v < 0 {
				return nil
			}
			return wrapperspb.UInt32(uint32(*v)) //nolint:gosec // non-negative; a limit above MaxUint32 is meaningless to Envoy
		}
		th.MaxConnections = limit(l.MaxConnections)
		th.MaxPendingRequests = limit(l.MaxPendingRequests)
		th.MaxRequests = limit(l.MaxConcurrentRequests)
		if th.MaxConnections != nil || th.MaxPendingRequests != nil || th.MaxRequests != nil {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{th}}
		}
		if phc == nil {
			phc = l.PassiveHealthCheck
		}
	}
	if phc == nil {
		return
	}
	od := &clusterv3.OutlierDetection{}
	if phc.Interval > 0 {
		od.Interval = duration(phc.Interval)
	}
	if phc.MaxFailures > 0 {
		od.Consecutive_5Xx = wrapperspb.UInt32(phc.MaxFailures)
	}
	if v := phc.Consecutive5xx; v != nil {
		od.Consecutive_5Xx = wrapperspb.UInt32(*v)
	}
	if v := phc.EnforcingConsecutive5xx; v != nil {
		od.EnforcingConsecutive_5Xx = wrapperspb.UInt32(*v)
	}
	if v := phc.ConsecutiveGatewayFailure; v != nil {
		od.ConsecutiveGatewayFailure = wrapperspb.UInt32(*v)
	}
	if v := phc.EnforcingConsecutiveGatewayFailure; v != nil {
		od.EnforcingConsecutiveGatewayFailure = wrapperspb.UInt32(*v)
	}
	if v := phc.MaxEjectionPercent; v != nil {
		od.MaxEjectionPercent = wrapperspb.UInt32(*v)
	}
	if v := phc.BaseEjectionTime; v != nil && *v > 0 {
		od.BaseEjectionTime = duration(*v)
	}
	c.OutlierDetection = od
}
