package gen

import (
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/trellis-mesh/trellis/structs"
)

// TestPublicListenerHTTP checks what Consul sets on the HTTP connection
// manager and the TLS context of a sidecar's public listener, by protocol
// and mesh entry.
func TestPublicListenerHTTP(t *testing.T) {
	const listener = "public_listener:10.0.0.1:21000"
	xfcc := []string{"envoy.filters.http.rbac", "envoy.filters.http.header_to_metadata", "envoy.filters.http.router"}
	noXFCC := []string{"envoy.filters.http.rbac", "envoy.filters.http.router"}
	normalization := func(rn structs.RequestNormalizationMeshConfig) *structs.MeshConfigEntry {
		return &structs.MeshConfigEntry{HTTP: &structs.MeshHTTPConfig{
			Incoming: &structs.MeshDirectionalHTTPConfig{RequestNormalization: &rn},
		}}
	}
	cases := []struct {
		name     string
		protocol string
		mesh     *structs.MeshConfigEntry
		// want
		alpn        []string
		filters     []string
		forward     bool
		normalize   bool
		merge       bool
		escaped     hcmv3.HttpConnectionManager_PathWithEscapedSlashesAction
		underscores corev3.HttpProtocolOptions_HeadersWithUnderscoresAction
	}{
		{name: "http, no mesh entry", protocol: "http", alpn: []string{"http/1.1"}, filters: xfcc, forward: true, normalize: true},
		{name: "http2", protocol: "http2", alpn: []string{"h2", "http/1.1"}, filters: xfcc, forward: true, normalize: true},
		{name: "grpc", protocol: "grpc", alpn: []string{"h2", "http/1.1"}, filters: xfcc, forward: true, normalize: true},
		{
			name: "sanitized XFCC", protocol: "http",
			mesh: &structs.MeshConfigEntry{HTTP: &structs.MeshHTTPConfig{SanitizeXForwardedClientCert: true}},
			alpn: []string{"http/1.1"}, filters: noXFCC, normalize: true,
		},
		{
			name: "every normalization option", protocol: "http",
			mesh: normalization(structs.RequestNormalizationMeshConfig{
				MergeSlashes: true, PathWithEscapedSlashesAction: "UNESCAPE_AND_FORWARD", HeadersWithUnderscoresAction: "REJECT_REQUEST",
			}),
			alpn: []string{"http/1.1"}, filters: xfcc, forward: true, normalize: true, merge: true,
			escaped:     hcmv3.HttpConnectionManager_UNESCAPE_AND_FORWARD,
			underscores: corev3.HttpProtocolOptions_REJECT_REQUEST,
		},
		{
			name: "path normalization disabled", protocol: "http",
			mesh: normalization(structs.RequestNormalizationMeshConfig{InsecureDisablePathNormalization: true, MergeSlashes: true}),
			alpn: []string{"http/1.1"}, filters: xfcc, forward: true, merge: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.entries = []structs.ConfigEntry{&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: tc.protocol}}
			if tc.mesh != nil {
				w.entries = append(w.entries, tc.mesh)
			}
			res, err := Generate(snapshot(t, w, sidecar("web"), 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(res); err != nil {
				t.Fatal(err)
			}
			hcm, alpn := publicHCM(t, res, listener)
			if !slices.Equal(alpn, tc.alpn) {
				t.Errorf("ALPN %q, want %q", alpn, tc.alpn)
			}
			if got := httpFilterNames(hcm); !slices.Equal(got, tc.filters) {
				t.Errorf("HTTP filters %s, want %s", strings.Join(got, " "), strings.Join(tc.filters, " "))
			}
			wantForward := hcmv3.HttpConnectionManager_SANITIZE
			if tc.forward {
				wantForward = hcmv3.HttpConnectionManager_APPEND_FORWARD
			}
			if got := hcm.GetForwardClientCertDetails(); got != wantForward {
				t.Errorf("forward_client_cert_details %v, want %v", got, wantForward)
			}
			if cd := hcm.GetSetCurrentClientCertDetails(); tc.forward != (cd != nil) ||
				cd != nil && !(cd.GetSubject().GetValue() && cd.GetCert() && cd.GetChain() && cd.GetDns() && cd.GetUri()) {
				t.Errorf("set_current_client_cert_details %v", cd)
			}
			if got := hcm.GetNormalizePath().GetValue(); got != tc.normalize {
				t.Errorf("normalize_path %v, want %v", got, tc.normalize)
			}
			if hcm.GetMergeSlashes() != tc.merge {
				t.Errorf("merge_slashes %v, want %v", hcm.GetMergeSlashes(), tc.merge)
			}
			if got := hcm.GetPathWithEscapedSlashesAction(); got != tc.escaped {
				t.Errorf("path_with_escaped_slashes_action %v, want %v", got, tc.escaped)
			}
			if got := hcm.GetCommonHttpProtocolOptions().GetHeadersWithUnderscoresAction(); got != tc.underscores {
				t.Errorf("headers_with_underscores_action %v, want %v", got, tc.underscores)
			}
		})
	}
}

// TestPublicListenerTCPHasNoALPN: a TCP service's public listener offers
// no application protocol, as Consul's.
func TestPublicListenerTCPHasNoALPN(t *testing.T) {
	res, err := Generate(snapshot(t, newWorld(), sidecar("web"), 0))
	if err != nil {
		t.Fatal(err)
	}
	l := res[ListenerType]["public_listener:10.0.0.1:21000"]
	if l == nil {
		t.Fatal("no public listener")
	}
	if got := goldenJSON(t, Resources{ListenerType: {"l": l}}); strings.Contains(string(got), "alpnProtocols") {
		t.Errorf("TCP public listener offers ALPN:\n%s", got)
	}
}
