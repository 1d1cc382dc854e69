package structs

import "encoding/json"

// ProxyMode says how traffic reaches a sidecar: through explicit upstream
// listeners, or redirected transparently.
type ProxyMode string

// Proxy modes.
const (
	ProxyModeDefault     ProxyMode = ""
	ProxyModeDirect      ProxyMode = "direct"
	ProxyModeTransparent ProxyMode = "transparent"
)

// MeshGatewayConfig says whether and how traffic to an upstream passes
// through mesh gateways ("", "none", "local", "remote").
type MeshGatewayConfig struct {
	Mode string `json:",omitempty"`
}

// TransparentProxyConfig configures a proxy in transparent mode.
type TransparentProxyConfig struct {
	OutboundListenerPort int  `json:",omitempty"`
	DialedDirectly       bool `json:",omitempty"`
}

// ExposePath publishes one non-mTLS path of the local service through the
// proxy (typically for health checks).
type ExposePath struct {
	ListenerPort  int    `json:",omitempty"`
	Path          string `json:",omitempty"`
	LocalPathPort int    `json:",omitempty"`
	Protocol      string `json:",omitempty"`
}

// ExposeConfig lists the paths a proxy exposes without mTLS.
type ExposeConfig struct {
	Checks bool         `json:",omitempty"`
	Paths  []ExposePath `json:",omitempty"`
}

// Upstream is one service a proxy connects to on the application's behalf,
// bound on a local address and port.
type Upstream struct {
	DestinationType      string `json:",omitempty"`
	DestinationNamespace string `json:",omitempty"`
	DestinationPartition string `json:",omitempty"`
	DestinationPeer      string `json:",omitempty"`
	DestinationName      string
	Datacenter           string `json:",omitempty"`
	LocalBindAddress     string `json:",omitempty"`
	LocalBindPort        int    `json:",omitempty"`
	LocalBindSocketPath  string `json:",omitempty"`
	LocalBindSocketMode  string `json:",omitempty"`
	// Config is opaque proxy configuration (protocol, connect_timeout_ms, ...).
	Config      map[string]interface{} `json:",omitempty" bexpr:"-"`
	MeshGateway MeshGatewayConfig      `json:",omitempty"`
	// CentrallyConfigured is true for upstreams implied by transparent
	// proxying rather than listed explicitly.
	CentrallyConfigured bool `json:",omitempty" bexpr:"-"`
}

// ConnectProxyConfig is the Proxy block of a connect-proxy or gateway
// registration.
type ConnectProxyConfig struct {
	DestinationServiceName string                 `json:",omitempty"`
	DestinationServiceID   string                 `json:",omitempty"`
	LocalServiceAddress    string                 `json:",omitempty"`
	LocalServicePort       int                    `json:",omitempty"`
	LocalServiceSocketPath string                 `json:",omitempty"`
	Mode                   ProxyMode              `json:",omitempty"`
	Config                 map[string]interface{} `json:",omitempty" bexpr:"-"`
	Upstreams              []Upstream             `json:",omitempty"`
	MeshGateway            MeshGatewayConfig      `json:",omitempty"`
	Expose                 ExposeConfig           `json:",omitempty"`
	TransparentProxy       TransparentProxyConfig `json:",omitempty"`
}

// MarshalJSON leaves out a zero TransparentProxy, as Consul's encoding
// does: a proxy without transparent-proxy settings shows none.
func (c ConnectProxyConfig) MarshalJSON() ([]byte, error) {
	type plain ConnectProxyConfig // without this method
	out := struct {
		plain
		TransparentProxy *TransparentProxyConfig `json:",omitempty"`
	}{plain: plain(c)}
	if c.TransparentProxy != (TransparentProxyConfig{}) {
		out.TransparentProxy = &c.TransparentProxy
	}
	return json.Marshal(out)
}
