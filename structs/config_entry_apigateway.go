package structs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// API gateway entries (api-gateway, http-route, inline-certificate) are
// stored, validated and served as Consul's API promises, but Trellis
// configures no Envoy for them yet: no API gateway listens, routes or
// terminates TLS, and no controller fills their Status (it stays empty,
// whatever a write carries, rather than claim an acceptance that did not
// happen).

// APIGatewayConfigEntry (kind api-gateway) declares the listeners of the
// API gateway service named Name.
type APIGatewayConfigEntry struct {
	Kind string
	Name string
	// TLS is always present in JSON, as in Consul.
	TLS       GatewayTLSConfig
	Meta      map[string]string `json:",omitempty"`
	Listeners []APIGatewayListener
	Defaults  *UpstreamLimits     `json:",omitempty"`
	ExtAuthz  *APIGatewayExtAuthz `json:",omitempty"`
	// Status is written by Consul's gateway controller; Trellis has none,
	// so it is always empty.
	Status ConfigEntryStatus
	RaftIndex
}

// APIGatewayExtAuthz turns on external authorization for the gateway.
type APIGatewayExtAuthz struct {
	Enabled bool
}

// APIGatewayListener is one port of an API gateway.
type APIGatewayListener struct {
	Name     string
	Hostname string
	Port     int
	// Protocol is "tcp" or "http" (lowercased on write).
	Protocol string
	TLS      APIGatewayTLSConfiguration
	Override *APIGatewayPolicy `json:",omitempty"`
	Default  *APIGatewayPolicy `json:",omitempty"`
	// MaxRequestHeadersKB bounds the size of request headers.
	MaxRequestHeadersKB *uint32 `json:",omitempty"`
}

// APIGatewayTLSConfiguration is a listener's TLS: the certificates it
// serves, by reference to certificate entries.
type APIGatewayTLSConfiguration struct {
	Certificates []ResourceReference
	SDS          *GatewayTLSSDSConfig `json:",omitempty"`
	MaxVersion   string               `json:",omitempty" alias:"tls_max_version"`
	MinVersion   string               `json:",omitempty" alias:"tls_min_version"`
	CipherSuites []string             `json:",omitempty" alias:"cipher_suites"`
}

// APIGatewayPolicy holds the JWT requirements of a listener.
type APIGatewayPolicy struct {
	JWT *IntentionJWTRequirement `json:",omitempty"`
}

// ResourceReference names another config entry (a listener's certificate,
// a route's parent gateway), optionally one section of it (a listener).
type ResourceReference struct {
	Kind        string
	Name        string
	SectionName string
	Partition   string `json:",omitempty"`
	Namespace   string `json:",omitempty"`
}

// ConfigEntryStatus is the status a controller reports on an entry.
type ConfigEntryStatus struct {
	Conditions []Condition
}

// Condition is one observation of a controller, in Kubernetes Gateway API
// style ("Accepted", "ResolvedRefs", ...).
type Condition struct {
	Type               string
	Status             string
	Reason             string
	Message            string
	Resource           *ResourceReference
	LastTransitionTime *time.Time
}

// The listener protocols and the kinds of certificate entries an API
// gateway may reference, Consul's.
var (
	apiGatewayProtocols        = []string{"tcp", "http"}
	apiGatewayCertificateKinds = []string{InlineCertificate, FileSystemCertificate}
)

// GetKind implements ConfigEntry.
func (e *APIGatewayConfigEntry) GetKind() string { return APIGateway }

// GetName implements ConfigEntry.
func (e *APIGatewayConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *APIGatewayConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *APIGatewayConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: listener protocols are lowercased,
// certificate references without a kind are inline certificates, and the
// Status a client sent is dropped (see the comment at the top of the file).
func (e *APIGatewayConfigEntry) Normalize() error {
	e.Kind = APIGateway
	e.Status = ConfigEntryStatus{}
	for i := range e.Listeners {
		l := &e.Listeners[i]
		l.Protocol = strings.ToLower(l.Protocol)
		for j := range l.TLS.Certificates {
			if l.TLS.Certificates[j].Kind == "" {
				l.TLS.Certificates[j].Kind = InlineCertificate
			}
		}
	}
	return nil
}

// Validate implements ConfigEntry.
func (e *APIGatewayConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	if err := validateTLSVersions(e.TLS.TLSMinVersion, e.TLS.TLSMaxVersion); err != nil {
		return err
	}
	names := map[string]bool{}
	for i, l := range e.Listeners {
		at := fmt.Sprintf("Listeners[%d]", i)
		if names[l.Name] {
			return fmt.Errorf("%s: listener name %q is used by more than one listener", at, l.Name)
		}
		names[l.Name] = true
		if !slices.Contains(apiGatewayProtocols, l.Protocol) {
			return fmt.Errorf("%s: unsupported listener protocol %q, must be one of 'tcp' or 'http'", at, l.Protocol)
		}
		if l.Port < 1 || l.Port > 65535 {
			return fmt.Errorf("%s: listener port %d is not in the range 1 to 65535", at, l.Port)
		}
		if l.Hostname != "" {
			if err := validateWildcardHost(l.Hostname); err != nil {
				return fmt.Errorf("%s.Hostname: %w", at, err)
			}
		}
		if err := validateTLSVersions(l.TLS.MinVersion, l.TLS.MaxVersion); err != nil {
			return fmt.Errorf("%s.TLS: %w", at, err)
		}
		for j, c := range l.TLS.Certificates {
			if !slices.Contains(apiGatewayCertificateKinds, c.Kind) {
				return fmt.Errorf("%s.TLS.Certificates[%d]: unsupported certificate kind %q, must be %q or %q",
					at, j, c.Kind, InlineCertificate, FileSystemCertificate)
			}
			if c.Name == "" {
				return fmt.Errorf("%s.TLS.Certificates[%d]: Name is required", at, j)
			}
		}
		for what, p := range map[string]*APIGatewayPolicy{"Override": l.Override, "Default": l.Default} {
			if p != nil && p.JWT != nil {
				if err := validateJWTProviderRefs(p.JWT.Providers); err != nil {
					return fmt.Errorf("%s.%s.JWT: %w", at, what, err)
				}
			}
		}
	}
	return nil
}

// validateWildcardHost accepts a DNS hostname whose leftmost label may be
// the wildcard "*".
func validateWildcardHost(host string) error {
	if !isDomainName(strings.TrimPrefix(host, "*.")) {
		return fmt.Errorf("host %q must be a valid DNS hostname", host)
	}
	return nil
}

// validateJWTProviderRefs checks the provider references of a JWT
// requirement on their own (that the providers exist is not checked: an
// API gateway reports unknown providers in its Status).
func validateJWTProviderRefs(providers []*IntentionJWTProvider) error {
	for i, p := range providers {
		if p == nil || p.Name == "" {
			return fmt.Errorf("Providers[%d]: Name is required", i)
		}
	}
	return nil
}
