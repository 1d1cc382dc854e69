package structs

import (
	"errors"
	"fmt"
	"strings"
)

// IngressGatewayConfigEntry (kind ingress-gateway) configures the listeners
// of the ingress gateway service named Name and the services each exposes.
type IngressGatewayConfigEntry struct {
	Kind string
	Name string
	// TLS is always present in JSON, as in Consul.
	TLS       GatewayTLSConfig
	Listeners []IngressListener
	Defaults  *IngressServiceConfig `json:",omitempty"`
	Meta      map[string]string     `json:",omitempty"`
	RaftIndex
}

// IngressServiceConfig holds the default limits of an ingress gateway's
// upstreams. The limits are plain numbers, always present in JSON (0 for
// unset), as Consul stores and answers them.
type IngressServiceConfig struct {
	MaxConnections        uint32              `alias:"max_connections"`
	MaxPendingRequests    uint32              `alias:"max_pending_requests"`
	MaxConcurrentRequests uint32              `alias:"max_concurrent_requests"`
	PassiveHealthCheck    *PassiveHealthCheck `json:",omitempty" alias:"passive_health_check"`
}

// IngressListener is one port of an ingress gateway.
type IngressListener struct {
	Port     int
	Protocol string
	TLS      *GatewayTLSConfig `json:",omitempty"`
	Services []IngressService
}

// IngressService is one service exposed on a listener.
type IngressService struct {
	Name                  string
	Hosts                 []string
	Namespace             string                   `json:",omitempty"`
	Partition             string                   `json:",omitempty"`
	TLS                   *GatewayServiceTLSConfig `json:",omitempty"`
	RequestHeaders        *HTTPHeaderModifiers     `json:",omitempty" alias:"request_headers"`
	ResponseHeaders       *HTTPHeaderModifiers     `json:",omitempty" alias:"response_headers"`
	MaxConnections        *uint32                  `json:",omitempty" alias:"max_connections"`
	MaxPendingRequests    *uint32                  `json:",omitempty" alias:"max_pending_requests"`
	MaxConcurrentRequests *uint32                  `json:",omitempty" alias:"max_concurrent_requests"`
	PassiveHealthCheck    *PassiveHealthCheck      `json:",omitempty" alias:"passive_health_check"`
	Meta                  map[string]string        `json:",omitempty"`
}

// GatewayTLSConfig configures TLS on a gateway or one of its listeners.
type GatewayTLSConfig struct {
	Enabled       bool
	SDS           *GatewayTLSSDSConfig `json:",omitempty"`
	TLSMinVersion string               `json:",omitempty" alias:"tls_min_version"`
	TLSMaxVersion string               `json:",omitempty" alias:"tls_max_version"`
	CipherSuites  []string             `json:",omitempty" alias:"cipher_suites"`
}

// GatewayServiceTLSConfig configures TLS for one exposed service.
type GatewayServiceTLSConfig struct {
	SDS *GatewayTLSSDSConfig `json:",omitempty"`
}

// GatewayTLSSDSConfig names certificates served over SDS.
type GatewayTLSSDSConfig struct {
	ClusterName  string `json:",omitempty" alias:"cluster_name"`
	CertResource string `json:",omitempty" alias:"cert_resource"`
}

// GetKind implements ConfigEntry.
func (e *IngressGatewayConfigEntry) GetKind() string { return IngressGateway }

// GetName implements ConfigEntry.
func (e *IngressGatewayConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *IngressGatewayConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *IngressGatewayConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: listener protocols default to tcp and
// are lowercased.
func (e *IngressGatewayConfigEntry) Normalize() error {
	e.Kind = IngressGateway
	for i := range e.Listeners {
		l := &e.Listeners[i]
		if l.Protocol == "" {
			l.Protocol = "tcp"
		}
		l.Protocol = strings.ToLower(l.Protocol)
	}
	return nil
}

// Validate implements ConfigEntry with Consul's messages.
func (e *IngressGatewayConfigEntry) Validate() error {
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	if err := validateTLSVersions(e.TLS.TLSMinVersion, e.TLS.TLSMaxVersion); err != nil {
		return err
	}
	validProtocols := map[string]bool{"tcp": true, "http": true, "http2": true, "grpc": true}
	ports := make(map[int]bool)
	for _, l := range e.Listeners {
		if ports[l.Port] {
			return fmt.Errorf("port %d declared on two listeners", l.Port)
		}
		ports[l.Port] = true
		if !validProtocols[l.Protocol] {
			return fmt.Errorf("protocol must be 'tcp', 'http', 'http2', or 'grpc'. '%s' is an unsupported protocol", l.Protocol)
		}
		if len(l.Services) == 0 {
			return fmt.Errorf("No service declared for listener with port %d", l.Port)
		}
		if !IsProtocolHTTPLike(l.Protocol) && len(l.Services) > 1 {
			return fmt.Errorf("Multiple services per listener are only supported for L7 protocols, 'http', 'grpc' and 'http2' (listener on port %d)", l.Port)
		}
		if l.TLS != nil {
			if err := validateTLSVersions(l.TLS.TLSMinVersion, l.TLS.TLSMaxVersion); err != nil {
				return err
			}
		}
		hosts := make(map[string]bool)
		names := make(map[string]bool)
		for _, s := range l.Services {
			for what, m := range map[string]*HTTPHeaderModifiers{"request": s.RequestHeaders, "response": s.ResponseHeaders} {
				if !m.IsZero() && !IsProtocolHTTPLike(l.Protocol) {
					return fmt.Errorf("%s headers only valid for http, http2 and grpc protocols (service %q on listener on port %d)", what, s.Name, l.Port)
				}
			}
			if l.Protocol == "tcp" {
				if s.Name == WildcardSpecifier {
					return fmt.Errorf("Wildcard service name is only valid for protocol = 'http' (listener on port %d)", l.Port)
				}
				if len(s.Hosts) != 0 {
					return fmt.Errorf("Associating hosts to a service is not supported for the %s protocol (listener on port %d)", l.Protocol, l.Port)
				}
			}
			if s.Name == "" {
				return fmt.Errorf("Service name cannot be blank (listener on port %d)", l.Port)
			}
			if s.Name == WildcardSpecifier && len(s.Hosts) != 0 {
				return fmt.Errorf("Associating hosts to a wildcard service is not supported (listener on port %d)", l.Port)
			}
			if names[s.Name] {
				return fmt.Errorf("Service %s cannot be added multiple times (listener on port %d)", s.Name, l.Port)
			}
			names[s.Name] = true
			for _, h := range s.Hosts {
				if hosts[h] {
					return fmt.Errorf("Hosts must be unique within a specific listener (listener on port %d)", l.Port)
				}
				hosts[h] = true
				if err := validateIngressHost(e.TLS.Enabled, h); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func validateIngressHost(tlsEnabled bool, host string) error {
	if host == "*" {
		if tlsEnabled {
			return errors.New("Host '*' is not allowed when TLS is enabled, all hosts must be valid DNS records to add as a DNSSAN")
		}
		return nil
	}
	if !isDomainName(host) {
		return fmt.Errorf("Host %q must be a valid DNS hostname", host)
	}
	if strings.ContainsRune(strings.TrimPrefix(host, "*."), '*') {
		return fmt.Errorf("Host %q is not valid, a wildcard specifier is only allowed as the leftmost label", host)
	}
	return nil
}

// ListRelatedServices lists the services the gateway exposes by name
// (wildcards excluded).
func (e *IngressGatewayConfigEntry) ListRelatedServices() []string {
	found := map[string]bool{}
	for _, l := range e.Listeners {
		for _, s := range l.Services {
			if s.Name != WildcardSpecifier && s.Name != "" {
				found[s.Name] = true
			}
		}
	}
	return sortedKeys(found)
}

// TerminatingGatewayConfigEntry (kind terminating-gateway) links services
// outside the mesh to the terminating gateway named Name.
type TerminatingGatewayConfigEntry struct {
	Kind     string
	Name     string
	Services []LinkedService   `json:",omitempty"`
	Meta     map[string]string `json:",omitempty"`
	RaftIndex
}

// LinkedService is a service a terminating gateway represents, with the
// TLS material to reach it.
type LinkedService struct {
	Name                   string `json:",omitempty"`
	Namespace              string `json:",omitempty"`
	CAFile                 string `json:",omitempty" alias:"ca_file"`
	CertFile               string `json:",omitempty" alias:"cert_file"`
	KeyFile                string `json:",omitempty" alias:"key_file"`
	SNI                    string `json:",omitempty"`
	DisableAutoHostRewrite bool   `json:",omitempty"`
}

// GetKind implements ConfigEntry.
func (e *TerminatingGatewayConfigEntry) GetKind() string { return TerminatingGateway }

// GetName implements ConfigEntry.
func (e *TerminatingGatewayConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *TerminatingGatewayConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *TerminatingGatewayConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry.
func (e *TerminatingGatewayConfigEntry) Normalize() error {
	e.Kind = TerminatingGateway
	return nil
}

// Validate implements ConfigEntry with Consul's messages.
func (e *TerminatingGatewayConfigEntry) Validate() error {
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	seen := make(map[string]bool)
	for _, s := range e.Services {
		if s.Name == "" {
			return errors.New("Service name cannot be blank.")
		}
		if s.Namespace == WildcardSpecifier {
			return errors.New("Wildcard namespace is not supported for terminating gateway services")
		}
		if seen[s.Name] {
			return fmt.Errorf("Service %q was specified more than once within a namespace", s.Name)
		}
		seen[s.Name] = true
		if (s.CertFile != "" || s.KeyFile != "") && !(s.CAFile != "" && s.CertFile != "" && s.KeyFile != "") {
			return fmt.Errorf("Service %q must have a CertFile, CAFile, and KeyFile specified for TLS origination", s.Name)
		}
	}
	return nil
}
