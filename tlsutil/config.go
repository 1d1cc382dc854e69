// Package tlsutil builds every tls.Config of an agent from Consul's tls
// settings: the HTTPS API, the gRPC-TLS (xDS) listener and the server RPC
// port, incoming and outgoing. Certificates and CAs are read once at New and
// again on Reload; the tls.Configs it hands out look the material up at
// each handshake (GetConfigForClient, GetClientCertificate,
// VerifyConnection), so a reload changes new connections and leaves
// established ones alone.
package tlsutil

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"

	"github.com/trellis-mesh/trellis/agent/config"
)

// Sentinel errors of the package.
var (
	// ErrInvalidMaterial: a certificate, key or CA named by the
	// configuration cannot be used (missing, unreadable, mismatched,
	// expired, or not valid for the server name). The message names the
	// config key and the file.
	ErrInvalidMaterial = errors.New("invalid TLS material")
	// ErrInvalidConfig: the TLS settings contradict each other (verify
	// without a CA, a certificate without its key, an unknown version).
	ErrInvalidConfig = errors.New("invalid TLS configuration")
)

// ProtocolConfig is one protocol's settings, as agent/config resolves
// them (tls.defaults under tls.internal_rpc, tls.https or tls.grpc, and the
// deprecated top-level keys, as Consul merges them).
type ProtocolConfig = config.TLSProtocol

// Keys name the config keys a ProtocolConfig's values came from.
type Keys = config.TLSKeys

// Config is the TLS configuration of one agent.
type Config struct {
	InternalRPC ProtocolConfig
	HTTPS       ProtocolConfig
	GRPC        ProtocolConfig
	// ServerName is server.<datacenter>.<domain without its dot>: the name
	// a server's RPC certificate must carry and clients check when
	// VerifyServerHostname is set.
	ServerName string
	// ServerMode: this agent serves the RPC port, so internal_rpc's
	// verify_incoming needs a certificate of its own.
	ServerMode bool
	// AutoEncryptTLS (a client's auto_encrypt.tls): the agent's
	// certificate comes from the servers (SetAutoEncryptCert) and serves
	// every protocol without a cert_file of its own (gRPC-TLS only with
	// GRPCUseAutoCert); its connections to servers are always TLS.
	AutoEncryptTLS  bool
	GRPCUseAutoCert bool
	// AutoEncryptAllowTLS (a server's auto_encrypt.allow_tls): client
	// certificates signed by the Connect CA (SetConnectCARoots) are
	// accepted on the server port, and a connection without one may
	// still ask for a certificate (the server port restricts what it may
	// call).
	AutoEncryptAllowTLS bool
}

// versions maps Consul's tls_min_version names to Go's constants.
func versions() map[string]uint16 {
	return map[string]uint16{
		"tlsv1_0": tls.VersionTLS10, "tls10": tls.VersionTLS10,
		"tlsv1_1": tls.VersionTLS11, "tls11": tls.VersionTLS11,
		"tlsv1_2": tls.VersionTLS12, "tls12": tls.VersionTLS12,
		"tlsv1_3": tls.VersionTLS13, "tls13": tls.VersionTLS13,
	}
}

// key returns the name of a setting for messages.
func keyName(proto, explicit, name string) string {
	if explicit != "" {
		return explicit
	}
	return "tls." + proto + "." + name
}

// parseVersion resolves tls_min_version.
func parseVersion(p *ProtocolConfig, proto string) (uint16, error) {
	if p.TLSMinVersion == "" {
		return tls.VersionTLS12, nil
	}
	v, ok := versions()[strings.ToLower(p.TLSMinVersion)]
	if !ok {
		return 0, fmt.Errorf("%w: %s: unknown TLS version %q (use TLSv1_0, TLSv1_1, TLSv1_2 or TLSv1_3)",
			ErrInvalidConfig, keyName(proto, p.Keys.TLSMinVersion, "tls_min_version"), p.TLSMinVersion)
	}
	return v, nil
}

// parseSuites resolves tls_cipher_suites against Go's suites; Consul
// refuses them with TLS 1.3, whose suites are not configurable.
func parseSuites(p *ProtocolConfig, proto string, minVersion uint16) ([]uint16, error) {
	if len(p.TLSCipherSuites) == 0 {
		return nil, nil
	}
	k := keyName(proto, p.Keys.TLSCipherSuites, "tls_cipher_suites")
	if minVersion == tls.VersionTLS13 {
		return nil, fmt.Errorf("%w: %s cannot be set with tls_min_version TLSv1_3: TLS 1.3 cipher suites are not configurable", ErrInvalidConfig, k)
	}
	byName := map[string]uint16{}
	for _, s := range tls.CipherSuites() {
		byName[s.Name] = s.ID
	}
	out := make([]uint16, 0, len(p.TLSCipherSuites))
	for _, name := range p.TLSCipherSuites {
		id, ok := byName[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("%w: %s: unsupported cipher suite %q", ErrInvalidConfig, k, name)
		}
		out = append(out, id)
	}
	return out, nil
}

// FromRuntime is the TLS configuration of the agent rc describes.
func FromRuntime(rc *config.RuntimeConfig) Config {
	return Config{
		InternalRPC: rc.TLS.InternalRPC,
		HTTPS:       rc.TLS.HTTPS,
		GRPC:        rc.TLS.GRPC,
		ServerName:  rc.TLS.ServerName,
		ServerMode:  rc.ServerMode,

		AutoEncryptTLS:      rc.AutoEncrypt.TLS && !rc.ServerMode,
		GRPCUseAutoCert:     rc.TLS.GRPCUseAutoCert,
		AutoEncryptAllowTLS: rc.AutoEncrypt.AllowTLS && rc.ServerMode,
	}
}
