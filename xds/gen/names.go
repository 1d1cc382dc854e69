package gen

import (
	"fmt"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Names Envoy sees. They are Consul's (agent/xds), so that dashboards,
// alerts and runbooks written against Consul-managed Envoys carry over.
const (
	localAppCluster       = "local_app"
	publicListenerPrefix  = "public_listener"
	outboundListenerName  = "outbound_listener"
	originalDstCluster    = "original-destination"
	gatewayListenerPrefix = "default"
	// connectAuthzStatPrefix is the network RBAC filter's stat prefix.
	connectAuthzStatPrefix = "connect_authz"
	// aggregateClusterType is the extension name of aggregate clusters.
	aggregateClusterType = "envoy.clusters.aggregate"
	// httpProtocolOptionsKey is where a cluster's upstream HTTP options go.
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	defaultNamespace       = "default"
	defaultPartition       = "default"
	// defaultTransparentPort is the outbound port of a transparent proxy
	// that sets none (Consul's and consul-k8s's 15001).
	defaultTransparentPort = 15001
)

// listenerName is "<prefix>:<addr>:<port>".
func listenerName(prefix, addr string, port int) string {
	return fmt.Sprintf("%s:%s:%d", prefix, addr, port)
}

// clusterName is the cluster of a chain target: its SNI, prefixed with the
// chain's customization hash when request overrides changed the chain (so
// that a customized and a plain chain to one service never share a name).
func clusterName(chain *structs.CompiledDiscoveryChain, t *structs.DiscoveryTarget) string {
	name := t.SNI
	if name == "" {
		name = t.Name
	}
	if chain.CustomizationHash != "" {
		return chain.CustomizationHash + "~" + name
	}
	return name
}

// failoverClusterName names the n-th member of an aggregate failover
// cluster.
func failoverClusterName(n int, aggregate string) string {
	return fmt.Sprintf("failover-target~%d~%s", n, aggregate)
}

// upstreamStatPrefix is the stat prefix of traffic to a service through
// its chain: "upstream.<svc>.default.default.<dc>".
func upstreamStatPrefix(service, dc string) string {
	return "upstream." + service + "." + defaultNamespace + "." + defaultPartition + "." + dc
}

// serviceSNI is the SNI (and cluster name) of a service or one of its
// subsets in a datacenter: "[<subset>.]<svc>.default.<dc>.internal.<td>".
func serviceSNI(service, subset, dc, trustDomain string) string {
	parts := []string{service, defaultNamespace, dc, "internal", trustDomain}
	if subset != "" {
		parts = append([]string{subset}, parts...)
	}
	return strings.Join(parts, ".")
}

// datacenterSNI is the SNI suffix (and cluster name) of a whole
// datacenter: "<dc>.internal.<td>". Mesh gateways route "*.<dc>.internal.<td>"
// to the datacenter's gateways.
func datacenterSNI(dc, trustDomain string) string {
	return dc + ".internal." + trustDomain
}

// spiffeID is a service's identity in a datacenter.
func spiffeID(trustDomain, dc, service string) string {
	return fmt.Sprintf("spiffe://%s/ns/%s/dc/%s/svc/%s", trustDomain, defaultNamespace, dc, service)
}

// targetSpiffeID is the identity a target's instances present: the chain's
// own, else computed from the trust domain.
func targetSpiffeID(t *structs.DiscoveryTarget, trustDomain string) string {
	if t.SpiffeID != "" {
		return t.SpiffeID
	}
	if trustDomain == "" {
		return ""
	}
	return spiffeID(trustDomain, t.Datacenter, t.Service)
}
