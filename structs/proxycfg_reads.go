package structs

// Results of the reads behind proxycfg's data sources that servers also
// answer over RPC (ConfigEntry.ResolveServiceConfig, Internal.*): they live
// here so that the server and proxycfg share them without depending on
// each other. proxycfg re-exports them under the same names.

// ServiceNames is a list of service names with the index it was read at.
type ServiceNames struct {
	Services []string
	QueryMeta
}

// ServiceConfigRequest asks for the centrally configured settings of one
// service (Name) as its proxy sees them, and for those of the upstreams it
// names.
type ServiceConfigRequest struct {
	Name string
	// Upstreams are the upstream service names whose resolved settings
	// the response must include (explicit upstreams of the proxy).
	Upstreams []string
	QueryOptions
}

// ServiceConfigResponse is the merge of the global proxy-defaults entry
// and the service-defaults entries that apply to one proxied service and
// its upstreams. Fields the entries do not set are zero.
type ServiceConfigResponse struct {
	// ProxyConfig is proxy-defaults' opaque Config with "protocol"
	// replaced by the service's own protocol when service-defaults sets
	// one. Nil when neither entry says anything.
	ProxyConfig map[string]any
	// Protocol is the service's effective protocol: service-defaults,
	// else proxy-defaults' Config["protocol"], else "tcp".
	Protocol string
	// Mode, TransparentProxy, MutualTLSMode, MeshGateway and Expose:
	// service-defaults when set there, else proxy-defaults.
	Mode             ProxyMode
	TransparentProxy TransparentProxyConfig
	MutualTLSMode    MutualTLSMode
	MeshGateway      MeshGatewayConfig
	Expose           ExposeConfig
	// AccessLogs is proxy-defaults' AccessLogs (service-defaults has
	// none): every proxy's access logging.
	AccessLogs AccessLogsConfig
	// UpstreamConfigs holds, for each requested upstream name (and any
	// upstream the service's UpstreamConfig.Overrides name), the
	// service's UpstreamConfig.Defaults overlaid with its override for
	// that upstream. Absent when neither says anything. The upstream's
	// own protocol is not merged in: its discovery chain carries it, and
	// a Protocol here becomes the chain's OverrideProtocol.
	UpstreamConfigs map[string]*UpstreamConfig
	// UpstreamDefaults is the service's UpstreamConfig.Defaults alone:
	// what applies to an upstream not named in the request (transparent
	// proxies' implicit upstreams). Nil when unset.
	UpstreamDefaults *UpstreamConfig
	QueryMeta
}

// GatewayService is one service an ingress or terminating gateway routes
// to: an ingress listener's service, or a terminating gateway's linked
// service. A wildcard ("*") in the gateway's config entry is expanded by
// the source into one GatewayService per matching service, with
// FromWildcard set.
type GatewayService struct {
	// Gateway is the gateway's service name; Service the routed service.
	Gateway     string
	Service     string
	GatewayKind ServiceKind
	// Port, Protocol and Hosts: the ingress listener the service is
	// exposed on (ingress only).
	Port     int
	Protocol string
	Hosts    []string
	// CAFile, CertFile, KeyFile and SNI: TLS origination towards the
	// service (terminating only).
	CAFile       string
	CertFile     string
	KeyFile      string
	SNI          string
	FromWildcard bool
	// AutoHostRewrite (terminating only) is the linked service's
	// DisableAutoHostRewrite negated: the gateway rewrites the Host
	// header of HTTP requests to the service's address.
	AutoHostRewrite bool
}

// IndexedGatewayServices is the list of services of one gateway, in
// (port, service) order for ingress and service order for terminating.
type IndexedGatewayServices struct {
	Services []*GatewayService
	QueryMeta
}

// ServiceKindRequest asks for every instance of every service of one kind
// (mesh gateways, in practice) in a datacenter.
type ServiceKindRequest struct {
	Kind ServiceKind
	QueryOptions
}
