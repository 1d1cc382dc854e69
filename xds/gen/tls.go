package gen

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-mesh/trellis/structs"
)

// TLS material is inlined into listeners and clusters, as Consul does: a
// leaf renewal or root rotation is a new snapshot, hence new resources,
// and no SDS round trip can leave a listener without its certificate.

// rootsPEM is every trusted root certificate, active or not, so that
// leaves signed by a root being rotated out stay trusted.
func rootsPEM(roots *structs.IndexedCARoots) string {
	var b strings.Builder
	for _, r := range roots.Roots {
		if r == nil || r.RootCert == "" {
			continue
		}
		b.WriteString(strings.TrimSpace(r.RootCert))
		b.WriteString("\n")
	}
	return b.String()
}

func inlineString(s string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
}

func fileSource(path string) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: path}}
}

// leafCertificate is the certificate (with its intermediates) and key a
// proxy presents.
func leafCertificate(leaf *structs.IssuedCert) *tlsv3.TlsCertificate {
	return &tlsv3.TlsCertificate{
		CertificateChain: inlineString(leaf.CertPEM),
		PrivateKey:       inlineString(leaf.PrivateKeyPEM),
	}
}

// tlsVersions maps the mesh entry's version names to Envoy's.
var tlsVersions = map[string]tlsv3.TlsParameters_TlsProtocol{
	"TLS_AUTO": tlsv3.TlsParameters_TLS_AUTO,
	"TLSv1_0":  tlsv3.TlsParameters_TLSv1_0,
	"TLSv1_1":  tlsv3.TlsParameters_TLSv1_1,
	"TLSv1_2":  tlsv3.TlsParameters_TLSv1_2,
	"TLSv1_3":  tlsv3.TlsParameters_TLSv1_3,
}

// tlsParams applies the mesh entry's TLS versions for one direction
// (incoming: the public listener; outgoing: upstream clusters).
func (b *builder) tlsParams(incoming bool) *tlsv3.TlsParameters {
	p := &tlsv3.TlsParameters{}
	m := b.snap.MeshConfig
	if m == nil || m.TLS == nil {
		return p
	}
	d := m.TLS.Outgoing
	if incoming {
		d = m.TLS.Incoming
	}
	if d == nil {
		return p
	}
	p.TlsMinimumProtocolVersion = tlsVersions[d.TLSMinVersion]
	p.TlsMaximumProtocolVersion = tlsVersions[d.TLSMaxVersion]
	return p
}

// meshDownstreamTLS is the server side of mesh mTLS: present leaf, require
// a client certificate signed by one of the roots and carrying a SPIFFE ID
// of this trust domain, offering alpn (none for TCP). Which identity may
// do what is the RBAC filter's business.
func (b *builder) meshDownstreamTLS(leaf *structs.IssuedCert, alpn ...string) *corev3.TransportSocket {
	vc := &tlsv3.CertificateValidationContext{TrustedCa: inlineString(b.trustedCA())}
	if b.td != "" {
		vc.MatchTypedSubjectAltNames = []*tlsv3.SubjectAltNameMatcher{{
			SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "spiffe://" + b.td + "/"}},
		}}
	}
	ctx := &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:             b.tlsParams(true),
			TlsCertificates:       []*tlsv3.TlsCertificate{leafCertificate(leaf)},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc},
			AlpnProtocols:         alpn,
		},
		RequireClientCertificate: wrapBool(true),
	}
	return b.transportSocket(ctx)
}

// gatewayDownstreamTLS is one-way TLS for ingress listeners: the gateway
// presents its leaf, clients are not asked for a certificate.
func (b *builder) gatewayDownstreamTLS(leaf *structs.IssuedCert, http bool) *corev3.TransportSocket {
	common := &tlsv3.CommonTlsContext{
		TlsParams:       b.tlsParams(true),
		TlsCertificates: []*tlsv3.TlsCertificate{leafCertificate(leaf)},
	}
	if http {
		common.AlpnProtocols = []string{"h2", "http/1.1"}
	}
	return b.transportSocket(&tlsv3.DownstreamTlsContext{CommonTlsContext: common, RequireClientCertificate: wrapBool(false)})
}

// meshUpstreamTLS is the client side of mesh mTLS to one target: present
// leaf, send sni, and accept only a server whose certificate carries
// exactly one of spiffeIDs.
func (b *builder) meshUpstreamTLS(leaf *structs.IssuedCert, sni string, spiffeIDs ...string) *corev3.TransportSocket {
	vc := &tlsv3.CertificateValidationContext{TrustedCa: inlineString(b.trustedCA())}
	for _, id := range spiffeIDs {
		if id == "" {
			continue
		}
		vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{
			SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: id}},
		})
	}
	ctx := &tlsv3.UpstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:             b.tlsParams(false),
			TlsCertificates:       []*tlsv3.TlsCertificate{leafCertificate(leaf)},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc},
		},
		Sni: sni,
	}
	return b.transportSocket(ctx)
}

// originationTLS is a terminating gateway's TLS towards a linked service
// outside the mesh, with the files its config entry names.
func (b *builder) originationTLS(link linkTLS) *corev3.TransportSocket {
	common := &tlsv3.CommonTlsContext{
		TlsParams: &tlsv3.TlsParameters{},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
			ValidationContext: &tlsv3.CertificateValidationContext{TrustedCa: fileSource(link.CAFile)},
		},
	}
	if link.CertFile != "" && link.KeyFile != "" {
		common.TlsCertificates = []*tlsv3.TlsCertificate{{
			CertificateChain: fileSource(link.CertFile),
			PrivateKey:       fileSource(link.KeyFile),
		}}
	}
	return b.transportSocket(&tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: link.SNI})
}

// linkTLS is the TLS origination part of a terminating gateway's link.
type linkTLS struct {
	CAFile, CertFile, KeyFile, SNI string
}

// transportSocket wraps a TLS context.
func (b *builder) transportSocket(ctx proto.Message) *corev3.TransportSocket {
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTls,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: b.any(ctx)},
	}
}
