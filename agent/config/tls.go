package config

import (
	"strings"
)

// TLS is the agent's TLS configuration, resolved: each protocol's settings
// with tls.defaults and the deprecated top-level keys merged in, as Consul
// merges them. tlsutil reads the files they name.
type TLS struct {
	InternalRPC TLSProtocol
	HTTPS       TLSProtocol
	GRPC        TLSProtocol
	// ServerName is server.<datacenter>.<domain>: what a server's RPC
	// certificate must be valid for when verify_server_hostname is set.
	ServerName string
	// GRPCUseAutoCert (tls.grpc.use_auto_cert) serves gRPC-TLS with the
	// auto_encrypt certificate when tls.grpc has no cert_file.
	GRPCUseAutoCert bool
}

// TLSProtocol is one protocol's TLS settings (tls.internal_rpc, tls.https
// or tls.grpc). Consul's documentation of the tls block says what each does.
type TLSProtocol struct {
	CAFile   string
	CAPath   string
	CertFile string
	KeyFile  string
	// VerifyIncoming requires and verifies a client certificate signed by
	// the CA.
	VerifyIncoming bool
	// VerifyOutgoing makes this agent's connections of the protocol TLS,
	// verifying the peer's certificate against the CA (internal RPC only).
	VerifyOutgoing bool
	// VerifyServerHostname additionally requires servers' certificates to
	// be valid for server.<datacenter>.<domain> (internal RPC only); it
	// implies VerifyOutgoing, as in Consul.
	VerifyServerHostname bool
	// TLSMinVersion is Consul's name: "TLSv1_0" .. "TLSv1_3" (or the
	// deprecated "tls10" .. "tls13"); empty means TLSv1_2.
	TLSMinVersion string
	// TLSCipherSuites are IANA cipher suite names (TLS 1.2 and below).
	TLSCipherSuites []string
	// Keys name the config keys the values came from, for error messages.
	Keys TLSKeys
}

// TLSKeys are the config keys a TLSProtocol's values came from, so that an
// error names what the operator wrote ("tls.https.cert_file", or the
// deprecated top-level "cert_file"). Empty entries mean
// "tls.<protocol>.<key>".
type TLSKeys struct {
	CAFile, CAPath, CertFile, KeyFile                    string
	VerifyIncoming, VerifyOutgoing, VerifyServerHostname string
	TLSMinVersion, TLSCipherSuites                       string
}

// Enabled reports whether any TLS setting is configured for the protocol.
func (p TLSProtocol) Enabled() bool {
	return p.CertFile != "" || p.VerifyIncoming || p.VerifyOutgoing
}

// tlsSource is Consul's tls block.
type tlsSource struct {
	Defaults    tlsProtocolSource `json:"defaults"`
	InternalRPC tlsProtocolSource `json:"internal_rpc"`
	HTTPS       tlsProtocolSource `json:"https"`
	GRPC        grpcTLSSource     `json:"grpc"`
}

// tlsProtocolSource is one block of tls; verify_outgoing and
// verify_server_hostname are read for internal_rpc (and defaults) only.
type tlsProtocolSource struct {
	CAFile               *string `json:"ca_file"`
	CAPath               *string `json:"ca_path"`
	CertFile             *string `json:"cert_file"`
	KeyFile              *string `json:"key_file"`
	VerifyIncoming       *bool   `json:"verify_incoming"`
	VerifyOutgoing       *bool   `json:"verify_outgoing"`
	VerifyServerHostname *bool   `json:"verify_server_hostname"`
	TLSMinVersion        *string `json:"tls_min_version"`
	TLSCipherSuites      *string `json:"tls_cipher_suites"`
}

// grpcTLSSource is tls.grpc, which alone may use the auto_encrypt
// certificate.
type grpcTLSSource struct {
	tlsProtocolSource
	UseAutoCert *bool `json:"use_auto_cert"`
}

// deprecatedTLSSource holds the top-level forms Consul still reads.
type deprecatedTLSSource struct {
	CAFile               *string `json:"ca_file"`
	CAPath               *string `json:"ca_path"`
	CertFile             *string `json:"cert_file"`
	KeyFile              *string `json:"key_file"`
	VerifyIncoming       *bool   `json:"verify_incoming"`
	VerifyIncomingRPC    *bool   `json:"verify_incoming_rpc"`
	VerifyIncomingHTTPS  *bool   `json:"verify_incoming_https"`
	VerifyOutgoing       *bool   `json:"verify_outgoing"`
	VerifyServerHostname *bool   `json:"verify_server_hostname"`
	TLSMinVersion        *string `json:"tls_min_version"`
	TLSCipherSuites      *string `json:"tls_cipher_suites"`
}

// candidate is one place a setting may come from, by precedence.
type candidate[T any] struct {
	v   *T
	key string
}

// first returns the first set candidate's value and key.
func first[T any](cs ...candidate[T]) (T, string) {
	for _, c := range cs {
		if c.v != nil {
			return *c.v, c.key
		}
	}
	var zero T
	return zero, ""
}

// buildTLS resolves the tls block: a protocol's own key wins, then
// tls.defaults, then the deprecated top-level form (a protocol-specific
// one such as verify_incoming_rpc before a general one), as in Consul.
func buildTLS(s *source, rc *RuntimeConfig) {
	d, dep := s.TLS.Defaults, s.deprecatedTLSSource
	proto := func(name string, own tlsProtocolSource, depIncoming *bool, depIncomingKey string, rpc bool) TLSProtocol {
		var p TLSProtocol
		k := &p.Keys
		str := func(ownV, defV, depV *string, key string) (string, string) {
			return first(candidate[string]{ownV, "tls." + name + "." + key},
				candidate[string]{defV, "tls.defaults." + key}, candidate[string]{depV, key})
		}
		p.CAFile, k.CAFile = str(own.CAFile, d.CAFile, dep.CAFile, "ca_file")
		p.CAPath, k.CAPath = str(own.CAPath, d.CAPath, dep.CAPath, "ca_path")
		p.CertFile, k.CertFile = str(own.CertFile, d.CertFile, dep.CertFile, "cert_file")
		p.KeyFile, k.KeyFile = str(own.KeyFile, d.KeyFile, dep.KeyFile, "key_file")
		p.TLSMinVersion, k.TLSMinVersion = str(own.TLSMinVersion, d.TLSMinVersion, dep.TLSMinVersion, "tls_min_version")
		var suites string
		suites, k.TLSCipherSuites = str(own.TLSCipherSuites, d.TLSCipherSuites, dep.TLSCipherSuites, "tls_cipher_suites")
		for _, c := range strings.Split(suites, ",") {
			if c = strings.TrimSpace(c); c != "" {
				p.TLSCipherSuites = append(p.TLSCipherSuites, c)
			}
		}
		p.VerifyIncoming, k.VerifyIncoming = first(candidate[bool]{own.VerifyIncoming, "tls." + name + ".verify_incoming"},
			candidate[bool]{depIncoming, depIncomingKey},
			candidate[bool]{d.VerifyIncoming, "tls.defaults.verify_incoming"},
			candidate[bool]{dep.VerifyIncoming, "verify_incoming"})
		if rpc {
			p.VerifyOutgoing, k.VerifyOutgoing = first(candidate[bool]{own.VerifyOutgoing, "tls.internal_rpc.verify_outgoing"},
				candidate[bool]{d.VerifyOutgoing, "tls.defaults.verify_outgoing"},
				candidate[bool]{dep.VerifyOutgoing, "verify_outgoing"})
			p.VerifyServerHostname, k.VerifyServerHostname = first(candidate[bool]{own.VerifyServerHostname, "tls.internal_rpc.verify_server_hostname"},
				candidate[bool]{dep.VerifyServerHostname, "verify_server_hostname"})
		}
		return p
	}
	rc.TLS = TLS{
		InternalRPC:     proto("internal_rpc", s.TLS.InternalRPC, dep.VerifyIncomingRPC, "verify_incoming_rpc", true),
		HTTPS:           proto("https", s.TLS.HTTPS, dep.VerifyIncomingHTTPS, "verify_incoming_https", false),
		GRPC:            proto("grpc", s.TLS.GRPC.tlsProtocolSource, nil, "", false),
		ServerName:      "server." + rc.Datacenter + "." + strings.TrimSuffix(rc.DNS.Domain, "."),
		GRPCUseAutoCert: isTrue(s.TLS.GRPC.UseAutoCert),
	}
}

// tlsPortWarnings names TLS ports that are set without a certificate to
// serve. Consul opens nothing usable there either (sdk/testutil sets both
// ports without TLS), so they are left closed rather than refused; nothing
// listens in plaintext in their place.
func tlsPortWarnings(rc *RuntimeConfig) []string {
	var out []string
	if rc.Ports.HTTPS > 0 && !rc.HTTPSHasCert() {
		out = append(out, "ports.https is set but tls.https has no cert_file: the HTTPS API is not served")
	}
	if rc.Ports.GRPCTLS > 0 && !rc.GRPCTLSHasCert() {
		out = append(out, "ports.grpc_tls is set but tls.grpc has no cert_file: the gRPC-TLS port is not served")
	}
	return out
}
