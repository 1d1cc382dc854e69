// Package bootstrap generates the Envoy v3 bootstrap configuration that
// starts a sidecar or gateway Envoy against a Trellis agent, as
// `consul connect envoy -bootstrap` does for Consul.
//
// The bootstrap only tells Envoy who it is (node id = proxy service ID, node
// cluster = service name, node metadata) and where to fetch everything else:
// a static cluster `local_agent` pointing at the agent's gRPC (xDS) port, and
// delta ADS over it for clusters and listeners. Everything else comes over
// xDS from the agent.
//
// Generation is pure: no I/O, no lookups. Names are resolved and files read by
// the caller (the `trellis connect envoy` command). Every generated bootstrap
// is checked with Validate before it is returned, so a bootstrap that Envoy
// would reject at start-up is an error here instead.
package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Defaults, as in Consul.
const (
	// DefaultAdminBind is where Envoy's admin server listens unless told
	// otherwise. It must stay on loopback: the admin API has full control
	// over the proxy, its secrets included.
	DefaultAdminBind = "127.0.0.1:19000"
	// DefaultAgentAddress is the agent's xDS gRPC address by default
	// (`-grpc-port` 8502).
	DefaultAgentAddress = "127.0.0.1:8502"
	// DefaultAdminAccessLogPath discards the admin server's access log.
	DefaultAdminAccessLogPath = "/dev/null"
	// LocalAgentClusterName names the static cluster of the agent's gRPC
	// server. The xDS generators must never emit a cluster of this name.
	LocalAgentClusterName = "local_agent"
	// TokenMetadataKey is the gRPC metadata key that carries the ACL token
	// on the ADS stream, as in Consul.
	TokenMetadataKey = "x-consul-token"
	// DefaultNamespace and DefaultPartition fill the node metadata that
	// Consul always sends; Trellis has only the default ones.
	DefaultNamespace = "default"
	DefaultPartition = "default"
)

// Names of the Envoy extensions the bootstrap uses.
const (
	http2OptionsKey     = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	tlsTransportSocket  = "envoy.transport_sockets.tls"
	fileAccessLoggerKey = "envoy.access_loggers.file"
	agentConnectTimeout = time.Second
)

// Sentinel errors. Errors returned by this package wrap one of them.
var (
	// ErrInvalidConfig means the Config cannot produce a bootstrap
	// (a missing proxy ID, an address that is not ip:port, ...).
	ErrInvalidConfig = errors.New("invalid bootstrap config")
	// ErrInvalidBootstrap means a bootstrap does not parse as an Envoy v3
	// bootstrap or fails its validation rules.
	ErrInvalidBootstrap = errors.New("invalid envoy bootstrap")
)

// Config is everything that goes into a bootstrap. Zero values take the
// documented defaults; ProxyID and ProxyCluster are required.
type Config struct {
	// ProxyID is the proxy's service ID on its agent. It becomes the Envoy
	// node ID, which is how the xDS server finds the proxy.
	ProxyID string
	// ProxyCluster is the Envoy node cluster: the service the proxy
	// represents (the destination service of a sidecar, the gateway's own
	// service name). It also becomes the local_cluster and
	// consul.source.service stats tags.
	ProxyCluster string
	// NodeName is the node the proxy is registered on, sent as the
	// node_name metadata. Empty means the agent Envoy connects to, and the
	// key is left out.
	NodeName string
	// Namespace and Partition are sent as node metadata and stats tags, as
	// Consul does. Empty means "default".
	Namespace string
	Partition string
	// Datacenter, when known, becomes the consul.source.datacenter tag.
	Datacenter string

	// AdminBind is the ip:port of Envoy's admin server (DefaultAdminBind
	// when empty). It must be an IP literal: Envoy does not resolve names
	// for listen addresses.
	AdminBind string
	// AdminAccessLogPath is the file the admin server logs its requests to
	// (DefaultAdminAccessLogPath when empty), unless AdminAccessLogs is set.
	AdminAccessLogPath string
	// AdminAccessLogs, when set, are the admin server's access logs
	// instead: what proxy-defaults' AccessLogs give every proxy (see
	// gen.AccessLogs), as Consul's `connect envoy` does.
	AdminAccessLogs []*accesslogv3.AccessLog

	// AgentAddress is the agent's gRPC ip:port (DefaultAgentAddress when
	// both it and AgentSocket are empty). An IP literal: the local_agent
	// cluster is STATIC, and Envoy resolves no names for those.
	AgentAddress string
	// AgentSocket is the path of the agent's gRPC unix socket, instead of
	// AgentAddress.
	AgentSocket string
	// AgentTLS makes Envoy speak TLS to the agent's gRPC port, verifying it
	// against AgentCAFile or AgentCAPEM when one is set.
	AgentTLS bool
	// AgentCAFile is the absolute path of the PEM bundle of CAs that
	// signed the agent's gRPC certificate. The bootstrap names the file
	// rather than inlining it, so that an operator who rotates the agent's
	// CA replaces one file and restarts Envoy, without regenerating the
	// bootstrap.
	AgentCAFile string
	// AgentCAPEM is the same bundle inlined, for an Envoy that cannot read
	// the agent's files. It excludes AgentCAFile.
	AgentCAPEM string

	// Token is the ACL token sent as x-consul-token metadata on the ADS
	// stream. Empty sends no metadata.
	Token string

	// ReadyBindAddr, when set, adds a static listener on that ip:port that
	// answers GET /ready from Envoy's admin server (Consul's
	// envoy_ready_listener), so that a gateway's health check passes before
	// it has any listener of its own on that address.
	ReadyBindAddr string
	// PrometheusBindAddr (the envoy_prometheus_bind_addr proxy config key),
	// when set, adds a static listener on that ip:port that serves GET
	// /metrics from the admin server's /stats/prometheus and 404s anything
	// else, so that Prometheus can scrape Envoy without the admin API, which
	// controls the proxy, being reachable.
	PrometheusBindAddr string
	// StatsBindAddr (the envoy_stats_bind_addr proxy config key), when set,
	// adds a static listener on that ip:port that serves the admin server's
	// /stats paths (/stats, /stats/prometheus, ...) and 404s anything else,
	// for agents such as Datadog's that poll /stats.
	StatsBindAddr string

	// OmitDeprecatedTags leaves out the pre-1.9 consul.<tag> stats tags
	// that Consul still emits next to the consul.destination.<tag> ones.
	OmitDeprecatedTags bool
}

// Generate returns the bootstrap for cfg as indented JSON (proto field
// names, as Envoy's documentation and Consul's output use), after checking
// that it parses back and validates.
func Generate(cfg Config) ([]byte, error) {
	b, err := Build(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encoding bootstrap: %w", err)
	}
	// protojson randomizes whitespace on purpose; re-indenting with
	// encoding/json drops it, so the output is stable byte for byte.
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indenting bootstrap: %w", err)
	}
	out.WriteByte('\n')
	// Round-trip: what Envoy will read is the JSON, not the message.
	if _, err := Parse(out.Bytes()); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Build returns the bootstrap for cfg as a validated message.
func Build(cfg Config) (*bootstrapv3.Bootstrap, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	node, err := buildNode(cfg)
	if err != nil {
		return nil, err
	}
	admin, err := buildAdmin(cfg)
	if err != nil {
		return nil, err
	}
	agent, err := buildAgentCluster(cfg)
	if err != nil {
		return nil, err
	}
	b := &bootstrapv3.Bootstrap{
		Node:  node,
		Admin: admin,
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters: []*clusterv3.Cluster{agent},
		},
		DynamicResources: buildDynamicResources(cfg),
		StatsConfig:      buildStatsConfig(cfg),
	}
	listeners, selfAdmin, err := buildAdminListeners(cfg)
	if err != nil {
		return nil, err
	}
	if selfAdmin != nil {
		b.StaticResources.Listeners = listeners
		b.StaticResources.Clusters = append(b.StaticResources.Clusters, selfAdmin)
	}
	if err := Validate(b); err != nil {
		return nil, err
	}
	return b, nil
}

func (c Config) withDefaults() Config {
	if c.AdminBind == "" {
		c.AdminBind = DefaultAdminBind
	}
	if c.AdminAccessLogPath == "" {
		c.AdminAccessLogPath = DefaultAdminAccessLogPath
	}
	if c.AgentAddress == "" && c.AgentSocket == "" {
		c.AgentAddress = DefaultAgentAddress
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if c.Partition == "" {
		c.Partition = DefaultPartition
	}
	return c
}

func (c Config) check() error {
	switch {
	case c.ProxyID == "":
		return fmt.Errorf("%w: a proxy ID is required", ErrInvalidConfig)
	case c.ProxyCluster == "":
		return fmt.Errorf("%w: a proxy cluster (service name) is required", ErrInvalidConfig)
	case c.AgentAddress != "" && c.AgentSocket != "":
		return fmt.Errorf("%w: agent address %q and agent socket %q are exclusive", ErrInvalidConfig, c.AgentAddress, c.AgentSocket)
	case (c.AgentCAPEM != "" || c.AgentCAFile != "") && !c.AgentTLS:
		return fmt.Errorf("%w: an agent CA is given but TLS to the agent is off", ErrInvalidConfig)
	case c.AgentCAPEM != "" && c.AgentCAFile != "":
		return fmt.Errorf("%w: agent CA file %q and an inline agent CA are exclusive", ErrInvalidConfig, c.AgentCAFile)
	case c.AgentCAFile != "" && !filepath.IsAbs(c.AgentCAFile):
		// Envoy resolves a relative name against its own working
		// directory, which need not be the one the bootstrap was made in.
		return fmt.Errorf("%w: agent CA file %q is not an absolute path", ErrInvalidConfig, c.AgentCAFile)
	}
	return nil
}

// socketAddress parses an ip:port into an Envoy address.
func socketAddress(what, hostport string) (*corev3.Address, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: %w", ErrInvalidConfig, what, hostport, err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("%w: %s %q: %q is not an IP address", ErrInvalidConfig, what, hostport, host)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("%w: %s %q: invalid port %q", ErrInvalidConfig, what, hostport, portStr)
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}, nil
}

func buildNode(cfg Config) (*corev3.Node, error) {
	meta := map[string]any{
		"namespace": cfg.Namespace,
		"partition": cfg.Partition,
	}
	if cfg.NodeName != "" {
		// The xDS server looks the proxy up on this node rather than on
		// the agent Envoy connects to.
		meta["node_name"] = cfg.NodeName
	}
	md, err := structpb.NewStruct(meta)
	if err != nil {
		return nil, fmt.Errorf("%w: node metadata: %w", ErrInvalidConfig, err)
	}
	return &corev3.Node{Id: cfg.ProxyID, Cluster: cfg.ProxyCluster, Metadata: md}, nil
}

func buildAdmin(cfg Config) (*bootstrapv3.Admin, error) {
	addr, err := socketAddress("admin bind address", cfg.AdminBind)
	if err != nil {
		return nil, err
	}
	if len(cfg.AdminAccessLogs) > 0 {
		return &bootstrapv3.Admin{Address: addr, AccessLog: cfg.AdminAccessLogs}, nil
	}
	// access_log (a file logger) rather than the deprecated
	// access_log_path, which Envoy warns about at every start.
	logger, err := anypb.New(&filev3.FileAccessLog{Path: cfg.AdminAccessLogPath})
	if err != nil {
		return nil, fmt.Errorf("packing admin access log: %w", err)
	}
	return &bootstrapv3.Admin{
		Address: addr,
		AccessLog: []*accesslogv3.AccessLog{{
			Name:       fileAccessLoggerKey,
			ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: logger},
		}},
	}, nil
}

func buildAgentCluster(cfg Config) (*clusterv3.Cluster, error) {
	var addr *corev3.Address
	if cfg.AgentSocket != "" {
		addr = &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: cfg.AgentSocket}}}
	} else {
		a, err := socketAddress("agent gRPC address", cfg.AgentAddress)
		if err != nil {
			return nil, err
		}
		addr = a
	}
	// gRPC needs HTTP/2 to the upstream; the typed protocol options replace
	// the cluster's deprecated http2_protocol_options.
	h2, err := anypb.New(&httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("packing HTTP/2 options: %w", err)
	}
	c := staticCluster(LocalAgentClusterName, agentConnectTimeout, addr)
	c.TypedExtensionProtocolOptions = map[string]*anypb.Any{http2OptionsKey: h2}
	if cfg.AgentTLS {
		ts, err := agentTransportSocket(cfg.AgentCAFile, cfg.AgentCAPEM)
		if err != nil {
			return nil, err
		}
		c.TransportSocket = ts
	}
	return c, nil
}

func agentTransportSocket(caFile, caPEM string) (*corev3.TransportSocket, error) {
	tlsCtx := &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{}}
	var trusted *corev3.DataSource
	switch {
	case caFile != "":
		trusted = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: caFile}}
	case caPEM != "":
		trusted = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: caPEM}}
	}
	if trusted != nil {
		tlsCtx.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: trusted},
		}
	}
	packed, err := anypb.New(tlsCtx)
	if err != nil {
		return nil, fmt.Errorf("packing agent TLS context: %w", err)
	}
	return &corev3.TransportSocket{
		Name:       tlsTransportSocket,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: packed},
	}, nil
}

func buildDynamicResources(cfg Config) *bootstrapv3.Bootstrap_DynamicResources {
	grpc := &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: LocalAgentClusterName},
		},
	}
	if cfg.Token != "" {
		grpc.InitialMetadata = []*corev3.HeaderValue{{Key: TokenMetadataKey, Value: cfg.Token}}
	}
	viaADS := func() *corev3.ConfigSource {
		return &corev3.ConfigSource{
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			ResourceApiVersion:    corev3.ApiVersion_V3,
		}
	}
	return &bootstrapv3.Bootstrap_DynamicResources{
		LdsConfig: viaADS(),
		CdsConfig: viaADS(),
		AdsConfig: &corev3.ApiConfigSource{
			ApiType:             corev3.ApiConfigSource_DELTA_GRPC,
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcServices:        []*corev3.GrpcService{grpc},
		},
	}
}

// staticCluster is a cluster of one fixed address (Envoy resolves no
// names for STATIC clusters).
func staticCluster(name string, connectTimeout time.Duration, addr *corev3.Address) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(connectTimeout),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: addr}},
				}},
			}},
		},
	}
}
