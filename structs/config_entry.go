package structs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Config entry kinds, as Consul names them. The kind is part of every
// entry's identity (kind, name) and selects its Go type (MakeConfigEntry).
const (
	ServiceDefaults    = "service-defaults"
	ProxyDefaults      = "proxy-defaults"
	ServiceRouter      = "service-router"
	ServiceSplitter    = "service-splitter"
	ServiceResolver    = "service-resolver"
	ServiceIntentions  = "service-intentions"
	MeshConfig         = "mesh"
	IngressGateway     = "ingress-gateway"
	TerminatingGateway = "terminating-gateway"
	ExportedServices   = "exported-services"
	APIGateway         = "api-gateway"
	InlineCertificate  = "inline-certificate"
	HTTPRoute          = "http-route"
	JWTProvider        = "jwt-provider"

	// FileSystemCertificate is a kind of certificate entry an API gateway
	// listener may reference. Trellis does not store it.
	FileSystemCertificate = "file-system-certificate"

	// ProxyConfigGlobal is the only name a proxy-defaults entry may have.
	ProxyConfigGlobal = "global"
	// MeshConfigMesh is the name of the one mesh entry.
	MeshConfigMesh = "mesh"
	// DefaultPartitionName is Trellis's only admin partition, and so the
	// only name an exported-services entry may have.
	DefaultPartitionName = "default"

	// WildcardSpecifier stands for "any service" in intentions and gateway
	// service lists.
	WildcardSpecifier = "*"

	// DefaultServiceProtocol is the protocol of a service that no
	// service-defaults or proxy-defaults entry configures.
	DefaultServiceProtocol = "tcp"

	// IntentionDefaultNamespace is the only namespace Trellis has; it is
	// what Consul's community edition reports everywhere.
	IntentionDefaultNamespace = "default"
)

// Limits on the Meta map of config entries and intentions, Consul's.
const (
	metaMaxKeyPairs    = 64
	metaKeyMaxLength   = 128
	metaValueMaxLength = 512
)

// ConfigEntryKinds lists every kind Trellis stores, in Consul's order.
var ConfigEntryKinds = []string{
	ServiceDefaults, ProxyDefaults, ServiceRouter, ServiceSplitter, ServiceResolver,
	IngressGateway, TerminatingGateway, ServiceIntentions, MeshConfig,
	ExportedServices, APIGateway, InlineCertificate, HTTPRoute, JWTProvider,
}

// ErrInvalidConfigEntryKind is returned for a kind Trellis does not know.
// Its text (with the kind appended) is Consul's.
var ErrInvalidConfigEntryKind = errors.New("invalid config entry kind")

// ConfigEntry is one piece of centralized configuration, stored through
// Raft and addressed by (kind, name). Each kind is its own Go type; the
// interface is what the store, the RPC layer and the HTTP API share.
type ConfigEntry interface {
	GetKind() string
	GetName() string
	// Normalize applies defaults and canonical forms (lowercased protocols,
	// uppercased methods, ...). It is called before Validate on every write,
	// and must be deterministic: the leader normalizes before Raft and every
	// replica stores the result as is.
	Normalize() error
	// Validate checks the entry on its own, with Consul's error texts.
	// Checks that involve other entries (protocols, redirect loops) happen
	// in the state store when the write is applied.
	Validate() error
	GetMeta() map[string]string
	GetRaftIndex() *RaftIndex
}

// MakeConfigEntry returns an empty entry of the given kind, named name.
func MakeConfigEntry(kind, name string) (ConfigEntry, error) {
	switch kind {
	case ServiceDefaults:
		return &ServiceConfigEntry{Kind: kind, Name: name}, nil
	case ProxyDefaults:
		return &ProxyConfigEntry{Kind: kind, Name: name}, nil
	case ServiceRouter:
		return &ServiceRouterConfigEntry{Kind: kind, Name: name}, nil
	case ServiceSplitter:
		return &ServiceSplitterConfigEntry{Kind: kind, Name: name}, nil
	case ServiceResolver:
		return &ServiceResolverConfigEntry{Kind: kind, Name: name}, nil
	case ServiceIntentions:
		return &ServiceIntentionsConfigEntry{Kind: kind, Name: name}, nil
	case MeshConfig:
		return &MeshConfigEntry{}, nil
	case IngressGateway:
		return &IngressGatewayConfigEntry{Kind: kind, Name: name}, nil
	case TerminatingGateway:
		return &TerminatingGatewayConfigEntry{Kind: kind, Name: name}, nil
	case ExportedServices:
		return &ExportedServicesConfigEntry{Kind: kind, Name: name}, nil
	case APIGateway:
		return &APIGatewayConfigEntry{Kind: kind, Name: name}, nil
	case InlineCertificate:
		return &InlineCertificateConfigEntry{Kind: kind, Name: name}, nil
	case HTTPRoute:
		return &HTTPRouteConfigEntry{Kind: kind, Name: name}, nil
	case JWTProvider:
		return &JWTProviderConfigEntry{Kind: kind, Name: name}, nil
	}
	return nil, &kindError{kind: kind}
}

// kindError is ErrInvalidConfigEntryKind with Consul's full message.
type kindError struct{ kind string }

func (e *kindError) Error() string { return fmt.Sprintf("invalid config entry kind: %s", e.kind) }
func (e *kindError) Unwrap() error { return ErrInvalidConfigEntryKind }

// ValidConfigEntryKind reports whether kind is one Trellis stores.
func ValidConfigEntryKind(kind string) bool {
	_, err := MakeConfigEntry(kind, "")
	return err == nil
}

// ConfigEntryOp is a config entry write verb.
type ConfigEntryOp string

// Config entry verbs. The CAS variants compare the stored entry's
// ModifyIndex with the one carried by the request's entry (0 meaning "only
// if it does not exist" for upsert-cas).
const (
	ConfigEntryUpsert    ConfigEntryOp = "upsert"
	ConfigEntryUpsertCAS ConfigEntryOp = "upsert-cas"
	ConfigEntryDelete    ConfigEntryOp = "delete"
	ConfigEntryDeleteCAS ConfigEntryOp = "delete-cas"
)

// ConfigEntryRequest writes or deletes one entry: the argument of
// ConfigEntry.Apply and ConfigEntry.Delete and the ConfigEntry Raft command.
// For the CAS verbs the expected index travels in Entry's ModifyIndex.
type ConfigEntryRequest struct {
	Op    ConfigEntryOp
	Entry ConfigEntry
	WriteRequest
}

// ConfigEntryQuery reads one entry (Kind and Name) or every entry of a kind
// (Name empty; Kind empty lists all kinds).
type ConfigEntryQuery struct {
	Kind string
	Name string
	QueryOptions
}

// ConfigEntryResponse is a read result of one entry; Entry is nil when it
// does not exist.
type ConfigEntryResponse struct {
	Entry ConfigEntry
	QueryMeta
}

// IndexedConfigEntries is a read result of several entries, in (kind, name)
// order.
type IndexedConfigEntries struct {
	Kind    string
	Entries []ConfigEntry
	QueryMeta
}

// ConfigEntryDeleteResponse says whether a delete happened (always true
// without CAS).
type ConfigEntryDeleteResponse struct {
	Deleted bool
}

// ConfigEntryKindName identifies an entry.
type ConfigEntryKindName struct {
	Kind string
	Name string
}

// NewConfigEntryKindName returns the identity of e.
func NewConfigEntryKindName(e ConfigEntry) ConfigEntryKindName {
	return ConfigEntryKindName{Kind: e.GetKind(), Name: e.GetName()}
}

// validateConfigEntryMeta applies Consul's limits on Meta, reporting every
// violation at once in Consul's multi-error format.
func validateConfigEntryMeta(meta map[string]string) error {
	var errs []error
	if len(meta) > metaMaxKeyPairs {
		errs = append(errs, fmt.Errorf("Meta exceeds maximum element count %d", metaMaxKeyPairs))
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(k) > metaKeyMaxLength {
			errs = append(errs, fmt.Errorf("Meta key %q exceeds maximum length %d", k, metaKeyMaxLength))
		}
		if len(meta[k]) > metaValueMaxLength {
			errs = append(errs, fmt.Errorf("Meta value for key %q exceeds maximum length %d", k, metaValueMaxLength))
		}
	}
	return multiError(errs)
}

// multiError joins errors in the format of hashicorp/go-multierror, which
// Consul uses for several validation messages that clients see verbatim.
// It returns nil for no errors.
func multiError(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return &multiErr{errs: errs}
}

type multiErr struct{ errs []error }

func (m *multiErr) Error() string {
	var b strings.Builder
	if len(m.errs) == 1 {
		b.WriteString("1 error occurred:\n")
	} else {
		fmt.Fprintf(&b, "%d errors occurred:\n", len(m.errs))
	}
	for _, e := range m.errs {
		fmt.Fprintf(&b, "\t* %s\n", e)
	}
	b.WriteString("\n")
	return b.String()
}

func (m *multiErr) Unwrap() []error { return m.errs }

// IsProtocolHTTPLike reports whether protocol allows L7 features (routers,
// splitters, L7 intentions).
func IsProtocolHTTPLike(protocol string) bool {
	switch protocol {
	case "http", "http2", "grpc":
		return true
	}
	return false
}

func defaultIfEmpty(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
