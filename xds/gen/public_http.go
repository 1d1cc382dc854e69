package gen

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	headertometav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/trellis-mesh/trellis/structs"
)

// The HTTP handling of a sidecar's public listener beyond routing to the
// application, as Consul sets it: the caller's identity forwarded in the
// x-forwarded-client-cert header and copied into dynamic metadata (where
// extensions and access logs read it), request paths normalized before
// the intentions' RBAC filter sees them, and ALPN on the mTLS handshake.

// xfccHeader is the header Envoy writes the caller's certificate details
// to.
const xfccHeader = "x-forwarded-client-cert"

// xfccIdentityRegex picks the parts of the caller's SPIFFE ID out of the
// XFCC header: trust domain, partition (absent in Consul CE IDs),
// namespace, datacenter, service.
const xfccIdentityRegex = `.*URI=spiffe://([^/]+.[^/]+)(?:/ap/([^/]+))?/ns/([^/]+)/dc/([^/]+)/svc/([^/;,]+).*`

// xfccMetadataKeys are the metadata keys of the "consul" namespace, in the
// order of xfccIdentityRegex's groups.
var xfccMetadataKeys = []string{"trust-domain", "partition", "namespace", "datacenter", "service"}

// xfccMetadataFilter is the header_to_metadata filter that copies the
// caller's identity from the XFCC header into the "consul" metadata
// namespace.
func (b *builder) xfccMetadataFilter() *hcmv3.HttpFilter {
	rules := make([]*headertometav3.Config_Rule, 0, len(xfccMetadataKeys))
	for i, key := range xfccMetadataKeys {
		rules = append(rules, &headertometav3.Config_Rule{
			Header: xfccHeader,
			OnHeaderPresent: &headertometav3.Config_KeyValuePair{
				MetadataNamespace: "consul",
				Key:               key,
				RegexValueRewrite: &matcherv3.RegexMatchAndSubstitute{
					Pattern:      &matcherv3.RegexMatcher{Regex: xfccIdentityRegex},
					Substitution: `\` + string(rune('1'+i)),
				},
			},
		})
	}
	return b.httpFilter("envoy.filters.http.header_to_metadata", &headertometav3.Config{RequestRules: rules})
}

// forwardsClientCert reports whether public listeners pass the caller's
// identity to the application: unless the mesh entry sanitizes XFCC.
func (b *builder) forwardsClientCert() bool {
	m := b.snap.MeshConfig
	return m == nil || m.HTTP == nil || !m.HTTP.SanitizeXForwardedClientCert
}

// normalizeRequests applies the mesh entry's request normalization (none
// set: paths normalized, slashes kept as they are) to a public listener's
// connection manager.
func normalizeRequests(hcm *hcmv3.HttpConnectionManager, rn *structs.RequestNormalizationMeshConfig) {
	if rn == nil {
		rn = &structs.RequestNormalizationMeshConfig{}
	}
	if !rn.InsecureDisablePathNormalization {
		hcm.NormalizePath = wrapBool(true)
	}
	hcm.MergeSlashes = rn.MergeSlashes
	if a, ok := hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction_value[rn.PathWithEscapedSlashesAction]; ok {
		hcm.PathWithEscapedSlashesAction = hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction(a)
	}
	if a, ok := corev3.HttpProtocolOptions_HeadersWithUnderscoresAction_value[rn.HeadersWithUnderscoresAction]; ok && a != 0 {
		hcm.CommonHttpProtocolOptions = &corev3.HttpProtocolOptions{HeadersWithUnderscoresAction: corev3.HttpProtocolOptions_HeadersWithUnderscoresAction(a)}
	}
}

// publicALPN is what the public listener offers in its TLS handshake for
// the service's protocol: HTTP/2 first when the application speaks it.
// TCP listeners offer nothing.
func publicALPN(protocol string) []string {
	switch {
	case isHTTP2Protocol(protocol):
		return []string{"h2", "http/1.1"}
	case isHTTPProtocol(protocol):
		return []string{"http/1.1"}
	}
	return nil
}
