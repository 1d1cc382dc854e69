package structs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// MutualTLSMode says whether a proxy also accepts non-mTLS traffic.
type MutualTLSMode string

// Mutual TLS modes.
const (
	MutualTLSModeDefault    MutualTLSMode = ""
	MutualTLSModeStrict     MutualTLSMode = "strict"
	MutualTLSModePermissive MutualTLSMode = "permissive"
)

func (m MutualTLSMode) validate() error {
	switch m {
	case MutualTLSModeDefault, MutualTLSModeStrict, MutualTLSModePermissive:
		return nil
	}
	return fmt.Errorf("Invalid MutualTLSMode %q. Must be one of %q, %q, or %q.", m,
		MutualTLSModeDefault, MutualTLSModeStrict, MutualTLSModePermissive)
}

// connectionExactBalance is the one non-default connection balance mode.
const connectionExactBalance = "exact_balance"

// ServiceConfigEntry (kind service-defaults) holds the defaults of one
// service across the cluster, most importantly its protocol, which decides
// whether L7 features (routers, splitters, L7 intentions) apply to it.
type ServiceConfigEntry struct {
	Kind                      string
	Name                      string
	Protocol                  string
	Mode                      ProxyMode              `json:",omitempty"`
	TransparentProxy          TransparentProxyConfig `json:",omitempty" alias:"transparent_proxy"`
	MutualTLSMode             MutualTLSMode          `json:",omitempty" alias:"mutual_tls_mode"`
	MeshGateway               MeshGatewayConfig      `json:",omitempty" alias:"mesh_gateway"`
	Expose                    ExposeConfig           `json:",omitempty"`
	ExternalSNI               string                 `json:",omitempty" alias:"external_sni"`
	UpstreamConfig            *UpstreamConfiguration `json:",omitempty" alias:"upstream_config"`
	Destination               *DestinationConfig     `json:",omitempty"`
	MaxInboundConnections     int                    `json:",omitempty" alias:"max_inbound_connections"`
	LocalConnectTimeoutMs     int                    `json:",omitempty" alias:"local_connect_timeout_ms"`
	LocalRequestTimeoutMs     int                    `json:",omitempty" alias:"local_request_timeout_ms"`
	BalanceInboundConnections string                 `json:",omitempty" alias:"balance_inbound_connections"`
	// RateLimits and EnvoyExtensions are stored and served as given; Trellis
	// does not act on them yet.
	RateLimits          map[string]interface{} `json:",omitempty" alias:"rate_limits"`
	EnvoyExtensions     []EnvoyExtension       `json:",omitempty" alias:"envoy_extensions"`
	MaxRequestHeadersKB *uint32                `json:",omitempty" alias:"max_request_headers_kb"`
	Meta                map[string]string      `json:",omitempty"`
	RaftIndex
}

// EnvoyExtension configures an extension that patches Envoy resources.
type EnvoyExtension struct {
	Name          string
	Required      bool
	Arguments     map[string]interface{}
	ConsulVersion string
	EnvoyVersion  string
}

// UpstreamConfiguration is the centrally managed configuration of a
// service's upstreams: per-upstream overrides and defaults for all.
type UpstreamConfiguration struct {
	Overrides []*UpstreamConfig `json:",omitempty"`
	Defaults  *UpstreamConfig   `json:",omitempty"`
}

// UpstreamConfig configures the connection to one upstream (or, without a
// Name, to every upstream).
type UpstreamConfig struct {
	Name                       string              `json:",omitempty"`
	Namespace                  string              `json:",omitempty"`
	Partition                  string              `json:",omitempty"`
	Peer                       string              `json:",omitempty"`
	EnvoyListenerJSON          string              `json:",omitempty" alias:"envoy_listener_json"`
	EnvoyClusterJSON           string              `json:",omitempty" alias:"envoy_cluster_json"`
	Protocol                   string              `json:",omitempty"`
	ConnectTimeoutMs           int                 `json:",omitempty" alias:"connect_timeout_ms"`
	Limits                     *UpstreamLimits     `json:",omitempty"`
	PassiveHealthCheck         *PassiveHealthCheck `json:",omitempty" alias:"passive_health_check"`
	MeshGateway                MeshGatewayConfig   `json:",omitempty" alias:"mesh_gateway"`
	BalanceOutboundConnections string              `json:",omitempty" alias:"balance_outbound_connections"`
}

// UpstreamLimits bounds the connections and requests to an upstream.
type UpstreamLimits struct {
	MaxConnections        *int                `json:",omitempty" alias:"max_connections"`
	MaxPendingRequests    *int                `json:",omitempty" alias:"max_pending_requests"`
	MaxConcurrentRequests *int                `json:",omitempty" alias:"max_concurrent_requests"`
	PassiveHealthCheck    *PassiveHealthCheck `json:",omitempty" alias:"passive_health_check"`
}

// PassiveHealthCheck configures outlier detection. Interval is a number
// of nanoseconds in JSON, as in Consul; a duration string is accepted too.
type PassiveHealthCheck struct {
	Interval                           time.Duration  `json:",omitempty"`
	MaxFailures                        uint32         `alias:"max_failures"`
	EnforcingConsecutive5xx            *uint32        `json:",omitempty" alias:"enforcing_consecutive_5xx"`
	EnforcingConsecutiveGatewayFailure *uint32        `json:",omitempty" alias:"enforcing_consecutive_gateway_failure"`
	Consecutive5xx                     *uint32        `json:",omitempty" alias:"consecutive_5xx"`
	ConsecutiveGatewayFailure          *uint32        `json:",omitempty" alias:"consecutive_gateway_failure"`
	MaxEjectionPercent                 *uint32        `json:",omitempty" alias:"max_ejection_percent"`
	BaseEjectionTime                   *time.Duration `json:",omitempty" alias:"base_ejection_time"`
}

// DestinationConfig turns a service-defaults entry into a virtual service
// outside the mesh, reached through a terminating gateway.
type DestinationConfig struct {
	Addresses []string `json:",omitempty"`
	Port      int      `json:",omitempty"`
}

// GetKind implements ConfigEntry.
func (e *ServiceConfigEntry) GetKind() string { return ServiceDefaults }

// GetName implements ConfigEntry.
func (e *ServiceConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *ServiceConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *ServiceConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: the protocol is lowercased.
func (e *ServiceConfigEntry) Normalize() error {
	e.Kind = ServiceDefaults
	e.Protocol = strings.ToLower(e.Protocol)
	if e.UpstreamConfig != nil {
		for _, o := range e.UpstreamConfig.Overrides {
			if o != nil {
				o.normalize()
			}
		}
		if e.UpstreamConfig.Defaults != nil {
			e.UpstreamConfig.Defaults.normalize()
		}
	}
	return nil
}

// Validate implements ConfigEntry with Consul's messages; several problems
// are reported together, in Consul's multi-error format.
func (e *ServiceConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if e.Name == WildcardSpecifier {
		return errors.New("service-defaults name must be the name of a service, and not a wildcard")
	}
	var errs []error
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		errs = append(errs, err)
	}
	if e.BalanceInboundConnections != "" && e.BalanceInboundConnections != connectionExactBalance {
		errs = append(errs, fmt.Errorf("invalid value for balance_inbound_connections: %v", e.BalanceInboundConnections))
	}
	if err := e.MutualTLSMode.validate(); err != nil {
		errs = append(errs, err)
	}
	if e.UpstreamConfig != nil && e.Destination != nil {
		errs = append(errs, errors.New("UpstreamConfig and Destination are mutually exclusive for service defaults"))
		return multiError(errs)
	}
	if e.UpstreamConfig != nil {
		for _, o := range e.UpstreamConfig.Overrides {
			if o == nil {
				continue
			}
			if err := o.validate(true); err != nil {
				errs = append(errs, fmt.Errorf("error in upstream override for %s: %w", o.Name, err))
			}
		}
		if d := e.UpstreamConfig.Defaults; d != nil {
			if err := d.validate(false); err != nil {
				errs = append(errs, fmt.Errorf("error in upstream defaults: %w", err))
			}
		}
	}
	if d := e.Destination; d != nil {
		if len(d.Addresses) == 0 {
			errs = append(errs, errors.New("Destination must contain at least one valid address"))
		}
		seen := make(map[string]bool, len(d.Addresses))
		for _, a := range d.Addresses {
			if seen[a] {
				errs = append(errs, fmt.Errorf("Duplicate address '%s' is not allowed", a))
				continue
			}
			seen[a] = true
			if !validEndpointAddress(a) {
				errs = append(errs, fmt.Errorf("Destination address '%s' is invalid Could not validate address %s as an IP or Hostname", a, a))
			}
		}
		if d.Port < 1 || d.Port > 65535 {
			errs = append(errs, fmt.Errorf("Invalid Port number %d", d.Port))
		}
	}
	return multiError(errs)
}

// validEndpointAddress accepts an IP address or a DNS name without
// wildcards.
func validEndpointAddress(a string) bool {
	if net.ParseIP(a) != nil {
		return true
	}
	return !strings.Contains(a, "*") && isDomainName(a)
}

// isDomainName is a light DNS name check: 1..253 octets, labels of 1..63
// characters.
func isDomainName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
	}
	return true
}

func (u *UpstreamConfig) normalize() {
	u.Protocol = strings.ToLower(u.Protocol)
	if u.ConnectTimeoutMs < 0 {
		u.ConnectTimeoutMs = 0
	}
}

func (u *UpstreamConfig) validate(named bool) error {
	if named {
		if u.Name == "" {
			return errors.New("Name is required")
		}
		if u.Name == WildcardSpecifier {
			return errors.New("Wildcard name is not supported")
		}
	} else {
		if u.Name != "" {
			return errors.New("Name must be empty")
		}
		if u.Namespace != "" {
			return errors.New("Namespace must be empty")
		}
		if u.Partition != "" {
			return errors.New("Partition must be empty")
		}
	}
	var errs []error
	if u.PassiveHealthCheck != nil && u.PassiveHealthCheck.Interval < 0 {
		errs = append(errs, errors.New("passive health check interval cannot be negative"))
	}
	if l := u.Limits; l != nil {
		switch {
		case l.MaxConnections != nil && *l.MaxConnections < 0:
			errs = append(errs, errors.New("max connections cannot be negative"))
		case l.MaxPendingRequests != nil && *l.MaxPendingRequests < 0:
			errs = append(errs, errors.New("max pending requests cannot be negative"))
		case l.MaxConcurrentRequests != nil && *l.MaxConcurrentRequests < 0:
			errs = append(errs, errors.New("max concurrent requests cannot be negative"))
		}
	}
	if u.BalanceOutboundConnections != "" && u.BalanceOutboundConnections != connectionExactBalance {
		errs = append(errs, fmt.Errorf("invalid value for balance_outbound_connections: %v", u.BalanceOutboundConnections))
	}
	return multiError(errs)
}

// ProxyConfigEntry (kind proxy-defaults, name "global") holds the defaults
// of every proxy. Config is opaque proxy configuration; its "protocol" key
// is the default protocol of every service.
type ProxyConfigEntry struct {
	Kind                 string
	Name                 string
	Config               map[string]interface{}
	Mode                 ProxyMode                            `json:",omitempty"`
	TransparentProxy     TransparentProxyConfig               `json:",omitempty" alias:"transparent_proxy"`
	MutualTLSMode        MutualTLSMode                        `json:",omitempty" alias:"mutual_tls_mode"`
	MeshGateway          MeshGatewayConfig                    `json:",omitempty" alias:"mesh_gateway"`
	Expose               ExposeConfig                         `json:",omitempty"`
	AccessLogs           AccessLogsConfig                     `json:",omitempty" alias:"access_logs"`
	EnvoyExtensions      []EnvoyExtension                     `json:",omitempty" alias:"envoy_extensions"`
	FailoverPolicy       *ServiceResolverFailoverPolicy       `json:",omitempty" alias:"failover_policy"`
	PrioritizeByLocality *ServiceResolverPrioritizeByLocality `json:",omitempty" alias:"prioritize_by_locality"`
	Meta                 map[string]string                    `json:",omitempty"`
	RaftIndex
}

// GetKind implements ConfigEntry.
func (e *ProxyConfigEntry) GetKind() string { return ProxyDefaults }

// GetName implements ConfigEntry.
func (e *ProxyConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *ProxyConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *ProxyConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: an empty name becomes "global"; any
// other name is refused here already, because deletes only normalize.
func (e *ProxyConfigEntry) Normalize() error {
	e.Kind = ProxyDefaults
	if e.Name != "" && e.Name != ProxyConfigGlobal {
		return fmt.Errorf("invalid name (%q), only %q is supported", e.Name, ProxyConfigGlobal)
	}
	e.Name = ProxyConfigGlobal
	return nil
}

// Validate implements ConfigEntry.
func (e *ProxyConfigEntry) Validate() error {
	if e.Name != ProxyConfigGlobal {
		return fmt.Errorf("invalid name (%q), only %q is supported", e.Name, ProxyConfigGlobal)
	}
	// Checked first, as Consul does: a bad access-log setting is what the
	// writer hears about even when Meta is wrong too.
	if err := e.AccessLogs.Validate(); err != nil {
		return err
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	return e.MutualTLSMode.validate()
}

// Protocol returns the default protocol the entry's opaque Config sets
// ("" when none). The key is matched case-insensitively and any scalar is
// taken as its string form, as Consul's weak decoding does.
func (e *ProxyConfigEntry) Protocol() string {
	for k, v := range e.Config {
		if strings.EqualFold(k, "protocol") && v != nil {
			return strings.ToLower(fmt.Sprint(v))
		}
	}
	return ""
}

// LogSinkType is where a proxy writes its access logs.
type LogSinkType string

// Access-log sinks, with Consul's names. The default ("") is stdout.
const (
	DefaultLogSinkType LogSinkType = ""
	FileLogSinkType    LogSinkType = "file"
	StdErrLogSinkType  LogSinkType = "stderr"
	StdOutLogSinkType  LogSinkType = "stdout"
)

// AccessLogsConfig is proxy-defaults' AccessLogs: whether every proxy
// logs the connections and requests through it, where, and in which
// format. The zero value logs nothing. It is comparable, so that
// generators can key reuse on its value.
type AccessLogsConfig struct {
	// Enabled turns access logging on for every proxy.
	Enabled bool `json:",omitempty"`
	// DisableListenerLogs turns off the listener-level logs only: those of
	// connections that match no filter chain of a listener.
	DisableListenerLogs bool `json:",omitempty" alias:"disable_listener_logs"`
	// Type is the sink: stdout (the default), stderr or file.
	Type LogSinkType `json:",omitempty"`
	// Path is the file written to; only with Type file, where it is
	// required.
	Path string `json:",omitempty"`
	// JSONFormat (a JSON object of Envoy format strings) and TextFormat
	// (an Envoy format string) choose the log line's encoding; at most
	// one may be set. With neither, Consul's default JSON format is used.
	JSONFormat string `json:",omitempty" alias:"json_format"`
	TextFormat string `json:",omitempty" alias:"text_format"`
}

// Validate rejects what Consul rejects when the proxy-defaults entry is
// written, with Consul's messages: an unknown sink, a file sink without a
// path, a path for another sink, both formats, and a JSON format that is
// not JSON. It does not require Enabled: a disabled configuration is
// checked all the same, as in Consul. A JSON format that is valid JSON
// but not an object passes here, as in Consul; generation then leaves the
// logs out.
func (c *AccessLogsConfig) Validate() error {
	switch c.Type {
	case DefaultLogSinkType, StdOutLogSinkType, StdErrLogSinkType:
	case FileLogSinkType:
		if c.Path == "" {
			return errors.New("path must be specified when using file type access logs")
		}
	default:
		return fmt.Errorf("invalid access log type: %s", c.Type)
	}
	if c.JSONFormat != "" && c.TextFormat != "" {
		return errors.New("cannot specify both access log JSONFormat and TextFormat")
	}
	if c.Type != FileLogSinkType && c.Path != "" {
		return errors.New("path is only valid for file type access logs")
	}
	if c.JSONFormat != "" {
		var msg json.RawMessage
		if err := json.Unmarshal([]byte(c.JSONFormat), &msg); err != nil {
			return fmt.Errorf("invalid access log json for JSON format: %w", err)
		}
	}
	return nil
}

// MeshConfigEntry (kind mesh, always named "mesh") holds mesh-wide
// settings.
type MeshConfigEntry struct {
	TransparentProxy                 TransparentProxyMeshConfig `alias:"transparent_proxy"`
	AllowEnablingPermissiveMutualTLS bool                       `json:",omitempty" alias:"allow_enabling_permissive_mutual_tls"`
	ValidateClusters                 bool                       `json:",omitempty" alias:"validate_clusters"`
	TLS                              *MeshTLSConfig             `json:",omitempty"`
	HTTP                             *MeshHTTPConfig            `json:",omitempty"`
	Peering                          *PeeringMeshConfig         `json:",omitempty"`
	Meta                             map[string]string          `json:",omitempty"`
	RaftIndex
}

// TransparentProxyMeshConfig restricts transparent proxies to mesh
// destinations.
type TransparentProxyMeshConfig struct {
	MeshDestinationsOnly bool `alias:"mesh_destinations_only"`
}

// MeshTLSConfig sets the TLS parameters of mesh traffic.
type MeshTLSConfig struct {
	Incoming *MeshDirectionalTLSConfig `json:",omitempty"`
	Outgoing *MeshDirectionalTLSConfig `json:",omitempty"`
}

// MeshDirectionalTLSConfig is one direction's TLS parameters.
type MeshDirectionalTLSConfig struct {
	TLSMinVersion string   `json:",omitempty" alias:"tls_min_version"`
	TLSMaxVersion string   `json:",omitempty" alias:"tls_max_version"`
	CipherSuites  []string `json:",omitempty" alias:"cipher_suites"`
}

// PeeringMeshConfig holds mesh-wide peering settings.
type PeeringMeshConfig struct {
	PeerThroughMeshGateways bool `json:",omitempty" alias:"peer_through_mesh_gateways"`
}

// GetKind implements ConfigEntry.
func (e *MeshConfigEntry) GetKind() string { return MeshConfig }

// GetName implements ConfigEntry.
func (e *MeshConfigEntry) GetName() string { return MeshConfigMesh }

// GetMeta implements ConfigEntry.
func (e *MeshConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *MeshConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry.
func (e *MeshConfigEntry) Normalize() error { return nil }

// Validate implements ConfigEntry.
func (e *MeshConfigEntry) Validate() error {
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	if e.TLS != nil {
		for dir, t := range map[string]*MeshDirectionalTLSConfig{"incoming": e.TLS.Incoming, "outgoing": e.TLS.Outgoing} {
			if t == nil {
				continue
			}
			if err := validateTLSVersions(t.TLSMinVersion, t.TLSMaxVersion); err != nil {
				return fmt.Errorf("error in %s TLS configuration: %w", dir, err)
			}
		}
	}
	return e.HTTP.validate()
}

// tlsVersionOrder ranks the TLS version names Consul accepts.
var tlsVersionOrder = map[string]int{"TLS_AUTO": 0, "TLSv1_0": 1, "TLSv1_1": 2, "TLSv1_2": 3, "TLSv1_3": 4}

func validateTLSVersions(min, max string) error {
	for _, v := range []string{min, max} {
		if _, ok := tlsVersionOrder[v]; v != "" && !ok {
			return fmt.Errorf("TLS version %q is not valid", v)
		}
	}
	if min != "" && max != "" && min != "TLS_AUTO" && max != "TLS_AUTO" && tlsVersionOrder[min] > tlsVersionOrder[max] {
		return fmt.Errorf("configuring max version %s less than the configured min version %s is invalid", max, min)
	}
	return nil
}

// MarshalJSON adds the Kind, which the type does not store (there is one
// mesh entry), as Consul's JSON has it.
func (e *MeshConfigEntry) MarshalJSON() ([]byte, error) {
	type alias MeshConfigEntry
	return json.Marshal(struct {
		Kind string
		*alias
	}{Kind: MeshConfig, alias: (*alias)(e)})
}
