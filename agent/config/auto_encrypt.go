package config

import (
	"net"
	"strings"
)

// AutoEncrypt is Consul's auto_encrypt block: servers with AllowTLS sign
// client agents' TLS certificates with the Connect CA; a client with TLS
// asks them for its certificate over the server port before it joins.
type AutoEncrypt struct {
	// TLS (clients): get the agent certificate from the servers.
	TLS bool
	// AllowTLS (servers): answer AutoEncrypt.Sign, and trust the Connect
	// CA's roots for client certificates on the server port.
	AllowTLS bool
	// DNSSAN and IPSAN are added to the client certificate's SANs, after
	// Consul's localhost, 127.0.0.1 and ::1.
	DNSSAN []string
	IPSAN  []net.IP
}

// autoEncryptSource is the auto_encrypt block of one layer.
type autoEncryptSource struct {
	TLS      *bool    `json:"tls"`
	AllowTLS *bool    `json:"allow_tls"`
	DNSSAN   []string `json:"dns_san"`
	IPSAN    []string `json:"ip_san"`
}

// buildAutoEncrypt applies Consul's rules: tls only on clients, allow_tls
// only on servers, and a warning for allow_tls without verify_incoming.
// Trellis also refuses a client that could not verify the servers it
// sends its key's CSR to: auto_encrypt.tls needs a CA (Consul would fall
// back to trusting any server).
func buildAutoEncrypt(s autoEncryptSource, rc *RuntimeConfig, p *problems) []string {
	ae := AutoEncrypt{TLS: isTrue(s.TLS), AllowTLS: isTrue(s.AllowTLS)}
	for _, n := range s.DNSSAN {
		if n = strings.TrimSpace(n); n != "" {
			ae.DNSSAN = append(ae.DNSSAN, n)
		}
	}
	for _, a := range s.IPSAN {
		ip := net.ParseIP(strings.TrimSpace(a))
		if ip == nil {
			p.add("auto_encrypt.ip_san: %q is not an IP address", a)
			continue
		}
		ae.IPSAN = append(ae.IPSAN, ip)
	}
	rc.AutoEncrypt = ae
	var warnings []string
	if ae.TLS && rc.ServerMode {
		p.add("auto_encrypt.tls can only be used on a client.")
	}
	if ae.AllowTLS && !rc.ServerMode {
		p.add("auto_encrypt.allow_tls can only be used on a server.")
	}
	if ae.TLS && !rc.ServerMode && rc.TLS.InternalRPC.CAFile == "" && rc.TLS.InternalRPC.CAPath == "" {
		p.add("auto_encrypt.tls needs tls.defaults.ca_file or tls.defaults.ca_path: the agent verifies the servers it asks for a certificate with that CA")
	}
	if ae.AllowTLS && rc.ServerMode && !rc.TLS.InternalRPC.VerifyIncoming {
		warnings = append(warnings, "if auto_encrypt.allow_tls is turned on, tls.internal_rpc.verify_incoming should be enabled (either explicitly or via tls.defaults.verify_incoming). It is necessary to turn it off during a migration to TLS, but it should definitely be turned on afterwards.")
	}
	if ae.AllowTLS && rc.ServerMode && !rc.Connect.Enabled {
		p.add("auto_encrypt.allow_tls needs connect.enabled: the certificates are signed by the Connect CA")
	}
	return warnings
}

// HTTPSHasCert reports whether the HTTPS API has a certificate: its own
// cert_file, or an auto_encrypt client's certificate, which Consul also
// serves HTTPS with.
func (c *RuntimeConfig) HTTPSHasCert() bool {
	return c.TLS.HTTPS.CertFile != "" || c.AutoEncrypt.TLS
}

// GRPCTLSHasCert reports whether the gRPC-TLS listener has a certificate:
// its own cert_file, or the auto_encrypt certificate with
// tls.grpc.use_auto_cert.
func (c *RuntimeConfig) GRPCTLSHasCert() bool {
	return c.TLS.GRPC.CertFile != "" || c.AutoEncrypt.TLS && c.TLS.GRPCUseAutoCert
}

// isTrue is a boolean setting that is set and true.
func isTrue(b *bool) bool { return b != nil && *b }
