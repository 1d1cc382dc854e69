package structs

import (
	"fmt"
	"slices"
	"strings"
)

// MeshHTTPConfig holds mesh-wide HTTP settings of the sidecars' public
// listeners.
type MeshHTTPConfig struct {
	// SanitizeXForwardedClientCert stops the public listener from telling
	// the application who called it: the x-forwarded-client-cert header is
	// dropped rather than set from the caller's certificate.
	SanitizeXForwardedClientCert bool                       `alias:"sanitize_x_forwarded_client_cert"`
	Incoming                     *MeshDirectionalHTTPConfig `json:",omitempty"`
}

// MeshDirectionalHTTPConfig is the HTTP handling of one direction
// (Consul has only Incoming: requests reaching a public listener).
type MeshDirectionalHTTPConfig struct {
	RequestNormalization *RequestNormalizationMeshConfig `json:",omitempty" alias:"request_normalization"`
}

// RequestNormalizationMeshConfig is how a public listener rewrites request
// paths and headers before intentions see them. Paths are normalized
// (RFC 3986) unless InsecureDisablePathNormalization: an L7 intention on
// "/admin" would otherwise miss "/./admin".
type RequestNormalizationMeshConfig struct {
	InsecureDisablePathNormalization bool `json:",omitempty" alias:"insecure_disable_path_normalization"`
	// MergeSlashes turns "//" into "/" in paths.
	MergeSlashes bool `json:",omitempty" alias:"merge_slashes"`
	// PathWithEscapedSlashesAction is Envoy's action for %2F and %5C in
	// paths: IMPLEMENTATION_SPECIFIC_DEFAULT (or empty), KEEP_UNCHANGED,
	// REJECT_REQUEST, UNESCAPE_AND_REDIRECT or UNESCAPE_AND_FORWARD.
	PathWithEscapedSlashesAction string `json:",omitempty" alias:"path_with_escaped_slashes_action"`
	// HeadersWithUnderscoresAction is Envoy's action for header names
	// with an underscore: ALLOW (or empty), REJECT_REQUEST or DROP_HEADER.
	HeadersWithUnderscoresAction string `json:",omitempty" alias:"headers_with_underscores_action"`
}

// PathWithEscapedSlashesActions are the values PathWithEscapedSlashesAction
// accepts besides "".
var PathWithEscapedSlashesActions = []string{
	"IMPLEMENTATION_SPECIFIC_DEFAULT", "KEEP_UNCHANGED", "REJECT_REQUEST", "UNESCAPE_AND_REDIRECT", "UNESCAPE_AND_FORWARD",
}

// HeadersWithUnderscoresActions are the values HeadersWithUnderscoresAction
// accepts besides "".
var HeadersWithUnderscoresActions = []string{"ALLOW", "REJECT_REQUEST", "DROP_HEADER"}

// RequestNormalization is the public listeners' request normalization,
// nil when the mesh entry sets none.
func (e *MeshConfigEntry) RequestNormalization() *RequestNormalizationMeshConfig {
	if e == nil || e.HTTP == nil || e.HTTP.Incoming == nil {
		return nil
	}
	return e.HTTP.Incoming.RequestNormalization
}

func (h *MeshHTTPConfig) validate() error {
	if h == nil || h.Incoming == nil || h.Incoming.RequestNormalization == nil {
		return nil
	}
	rn := h.Incoming.RequestNormalization
	for _, f := range []struct {
		name, value string
		allowed     []string
	}{
		{"PathWithEscapedSlashesAction", rn.PathWithEscapedSlashesAction, PathWithEscapedSlashesActions},
		{"HeadersWithUnderscoresAction", rn.HeadersWithUnderscoresAction, HeadersWithUnderscoresActions},
	} {
		if f.value != "" && !slices.Contains(f.allowed, f.value) {
			return fmt.Errorf("invalid HTTP.Incoming.RequestNormalization.%s %q: must be one of %s",
				f.name, f.value, strings.Join(f.allowed, ", "))
		}
	}
	return nil
}
