package structs

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// JWTProviderConfigEntry (kind jwt-provider) describes an issuer of JWTs
// and where its keys are. Trellis stores and serves providers but does
// not verify JWTs: a service-intentions entry that requires one is
// refused (see ServiceIntentionsConfigEntry.Validate), so that no request
// Consul would reject is let through.
type JWTProviderConfigEntry struct {
	Kind             string
	Name             string
	JSONWebKeySet    *JSONWebKeySet       `json:",omitempty" alias:"json_web_key_set"`
	Issuer           string               `json:",omitempty"`
	Audiences        []string             `json:",omitempty"`
	Locations        []*JWTLocation       `json:",omitempty"`
	Forwarding       *JWTForwardingConfig `json:",omitempty"`
	ClockSkewSeconds int                  `json:",omitempty" alias:"clock_skew_seconds"`
	CacheConfig      *JWTCacheConfig      `json:",omitempty" alias:"cache_config"`
	Meta             map[string]string    `json:",omitempty"`
	RaftIndex
}

// JWTLocation is one place a JWT may be found in a request; exactly one
// field is set.
type JWTLocation struct {
	Header     *JWTLocationHeader     `json:",omitempty"`
	QueryParam *JWTLocationQueryParam `json:",omitempty" alias:"query_param"`
	Cookie     *JWTLocationCookie     `json:",omitempty"`
}

// JWTLocationHeader is a request header carrying the JWT.
type JWTLocationHeader struct {
	Name        string `json:",omitempty"`
	ValuePrefix string `json:",omitempty" alias:"value_prefix"`
	Forward     bool   `json:",omitempty"`
}

// JWTLocationQueryParam is a query parameter carrying the JWT.
type JWTLocationQueryParam struct {
	Name string `json:",omitempty"`
}

// JWTLocationCookie is a cookie carrying the JWT.
type JWTLocationCookie struct {
	Name string `json:",omitempty"`
}

// JWTForwardingConfig forwards the verified payload in a header.
type JWTForwardingConfig struct {
	HeaderName              string `json:",omitempty" alias:"header_name"`
	PadForwardPayloadHeader bool   `json:",omitempty" alias:"pad_forward_payload_header"`
}

// JSONWebKeySet is where the provider's keys are: exactly one of Local
// and Remote.
type JSONWebKeySet struct {
	Local  *LocalJWKS  `json:",omitempty"`
	Remote *RemoteJWKS `json:",omitempty"`
}

// LocalJWKS is a key set given inline (base64) or as a file; exactly one.
type LocalJWKS struct {
	JWKS     string `json:",omitempty"`
	Filename string `json:",omitempty"`
}

// RemoteJWKS is a key set fetched over HTTP(S).
type RemoteJWKS struct {
	URI                 string           `json:",omitempty"`
	RequestTimeoutMs    int              `json:",omitempty" alias:"request_timeout_ms"`
	CacheDuration       time.Duration    `json:",omitempty" alias:"cache_duration"`
	FetchAsynchronously bool             `json:",omitempty" alias:"fetch_asynchronously"`
	UseSNI              bool             `json:",omitempty" alias:"use_sni"`
	RetryPolicy         *JWKSRetryPolicy `json:",omitempty" alias:"retry_policy"`
	JWKSCluster         *JWKSCluster     `json:",omitempty" alias:"jwks_cluster"`
}

// JWKSCluster is how Envoy reaches the key set's server.
type JWKSCluster struct {
	DiscoveryType   string              `json:",omitempty" alias:"discovery_type"`
	TLSCertificates *JWKSTLSCertificate `json:",omitempty" alias:"tls_certificates"`
	ConnectTimeout  time.Duration       `json:",omitempty" alias:"connect_timeout"`
}

// JWKSTLSCertificate is the CA the key set's server is verified with;
// exactly one field is set.
type JWKSTLSCertificate struct {
	CaCertificateProviderInstance *JWKSTLSCertProviderInstance `json:",omitempty" alias:"ca_certificate_provider_instance"`
	TrustedCA                     *JWKSTLSCertTrustedCA        `json:",omitempty" alias:"trusted_ca"`
}

// JWKSTLSCertTrustedCA is a CA bundle; exactly one field is set.
type JWKSTLSCertTrustedCA struct {
	Filename            string `json:",omitempty" alias:"filename"`
	EnvironmentVariable string `json:",omitempty" alias:"environment_variable"`
	InlineString        string `json:",omitempty" alias:"inline_string"`
	InlineBytes         []byte `json:",omitempty" alias:"inline_bytes"`
}

// JWKSTLSCertProviderInstance names an Envoy certificate provider.
type JWKSTLSCertProviderInstance struct {
	InstanceName    string `json:",omitempty" alias:"instance_name"`
	CertificateName string `json:",omitempty" alias:"certificate_name"`
}

// JWKSRetryPolicy retries failed key set fetches.
type JWKSRetryPolicy struct {
	NumRetries         int                 `json:",omitempty" alias:"num_retries"`
	RetryPolicyBackOff *RetryPolicyBackOff `json:",omitempty" alias:"retry_policy_back_off"`
}

// RetryPolicyBackOff is the back-off between fetch retries.
type RetryPolicyBackOff struct {
	BaseInterval time.Duration `json:",omitempty" alias:"base_interval"`
	MaxInterval  time.Duration `json:",omitempty" alias:"max_interval"`
}

// JWTCacheConfig sizes the cache of verified tokens.
type JWTCacheConfig struct {
	Size int `json:",omitempty"`
}

// jwksDiscoveryTypes are Envoy's cluster discovery types, as Consul lists
// them for a JWKS cluster.
var jwksDiscoveryTypes = []string{"STRICT_DNS", "STATIC", "LOGICAL_DNS", "EDS", "ORIGINAL_DST"}

// GetKind implements ConfigEntry.
func (e *JWTProviderConfigEntry) GetKind() string { return JWTProvider }

// GetName implements ConfigEntry.
func (e *JWTProviderConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *JWTProviderConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *JWTProviderConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry.
func (e *JWTProviderConfigEntry) Normalize() error {
	e.Kind = JWTProvider
	return nil
}

// Validate implements ConfigEntry.
func (e *JWTProviderConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	if err := e.JSONWebKeySet.validate(); err != nil {
		return fmt.Errorf("JSONWebKeySet: %w", err)
	}
	for i, l := range e.Locations {
		if l == nil || countTrue(l.Header != nil, l.QueryParam != nil, l.Cookie != nil) != 1 {
			return fmt.Errorf("Locations[%d]: must set exactly one of Header, QueryParam or Cookie", i)
		}
	}
	if e.Forwarding != nil && e.Forwarding.HeaderName == "" {
		return errors.New("Forwarding.HeaderName is required")
	}
	if e.ClockSkewSeconds < 0 {
		return errors.New("ClockSkewSeconds must not be negative")
	}
	if e.CacheConfig != nil && e.CacheConfig.Size < 0 {
		return errors.New("CacheConfig.Size must not be negative")
	}
	return nil
}

func (ks *JSONWebKeySet) validate() error {
	if ks == nil {
		return errors.New("is required")
	}
	if countTrue(ks.Local != nil, ks.Remote != nil) != 1 {
		return errors.New("must set exactly one of Local or Remote")
	}
	if l := ks.Local; l != nil {
		if countTrue(l.JWKS != "", l.Filename != "") != 1 {
			return errors.New("Local: must set exactly one of JWKS or Filename")
		}
		if l.JWKS != "" {
			if _, err := base64.StdEncoding.DecodeString(l.JWKS); err != nil {
				return fmt.Errorf("Local.JWKS: must be base64 encoded: %w", err)
			}
		}
		return nil
	}
	return ks.Remote.validate()
}

func (r *RemoteJWKS) validate() error {
	if r.URI == "" {
		return errors.New("Remote.URI is required")
	}
	if u, err := url.ParseRequestURI(r.URI); err != nil || u.Host == "" {
		return fmt.Errorf("Remote.URI: %q is not a valid URL", r.URI)
	}
	if r.RequestTimeoutMs < 0 || r.CacheDuration < 0 {
		return errors.New("Remote: RequestTimeoutMs and CacheDuration must not be negative")
	}
	if p := r.RetryPolicy; p != nil {
		if p.NumRetries < 0 {
			return errors.New("Remote.RetryPolicy.NumRetries must not be negative")
		}
		if b := p.RetryPolicyBackOff; b != nil && b.MaxInterval != 0 && b.MaxInterval < b.BaseInterval {
			return errors.New("Remote.RetryPolicy.RetryPolicyBackOff: MaxInterval must not be less than BaseInterval")
		}
	}
	c := r.JWKSCluster
	if c == nil {
		return nil
	}
	if c.DiscoveryType != "" && !slices.Contains(jwksDiscoveryTypes, c.DiscoveryType) {
		return fmt.Errorf("Remote.JWKSCluster.DiscoveryType: %q must be one of %v", c.DiscoveryType, jwksDiscoveryTypes)
	}
	if c.ConnectTimeout < 0 {
		return errors.New("Remote.JWKSCluster.ConnectTimeout must not be negative")
	}
	if t := c.TLSCertificates; t != nil {
		if countTrue(t.CaCertificateProviderInstance != nil, t.TrustedCA != nil) != 1 {
			return errors.New("Remote.JWKSCluster.TLSCertificates: must set exactly one of CaCertificateProviderInstance or TrustedCA")
		}
		if ca := t.TrustedCA; ca != nil && countTrue(ca.Filename != "", ca.EnvironmentVariable != "", ca.InlineString != "", len(ca.InlineBytes) > 0) != 1 {
			return errors.New("Remote.JWKSCluster.TLSCertificates.TrustedCA: must set exactly one of Filename, EnvironmentVariable, InlineString or InlineBytes")
		}
	}
	return nil
}

// countTrue counts the conditions that hold ("exactly one of" checks).
func countTrue(conds ...bool) int {
	n := 0
	for _, c := range conds {
		if c {
			n++
		}
	}
	return n
}
