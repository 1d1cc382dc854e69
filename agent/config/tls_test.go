package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestLoadTLS: each protocol takes its own key, then tls.defaults, then the
// deprecated top-level form, as Consul merges them, and remembers which key
// each value came from.
func TestLoadTLS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		file  string
		check func(t *testing.T, tls TLS)
	}{
		{"defaults apply to every protocol", `{"tls": {"defaults": {"ca_file": "ca.pem", "cert_file": "c.pem", "key_file": "k.pem", "verify_incoming": true}}}`,
			func(t *testing.T, tls TLS) {
				for _, p := range []TLSProtocol{tls.InternalRPC, tls.HTTPS, tls.GRPC} {
					if p.CAFile != "ca.pem" || p.CertFile != "c.pem" || !p.VerifyIncoming || p.Keys.CertFile != "tls.defaults.cert_file" {
						t.Errorf("protocol = %+v", p)
					}
				}
			}},
		{"a protocol's own key wins", `{"tls": {"defaults": {"verify_incoming": true, "ca_file": "ca.pem"}, "https": {"verify_incoming": false, "cert_file": "h.pem", "key_file": "hk.pem"}}}`,
			func(t *testing.T, tls TLS) {
				if tls.HTTPS.VerifyIncoming || tls.HTTPS.Keys.VerifyIncoming != "tls.https.verify_incoming" || tls.HTTPS.CertFile != "h.pem" {
					t.Errorf("https = %+v", tls.HTTPS)
				}
				if !tls.InternalRPC.VerifyIncoming || tls.InternalRPC.CertFile != "" {
					t.Errorf("internal_rpc = %+v", tls.InternalRPC)
				}
			}},
		{"deprecated top-level forms", `{"ca_file": "ca.pem", "cert_file": "c.pem", "key_file": "k.pem", "verify_outgoing": true,
			"verify_incoming_rpc": true, "verify_incoming_https": false, "verify_server_hostname": true, "tls_min_version": "tls12",
			"tls_cipher_suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}`,
			func(t *testing.T, tls TLS) {
				r := tls.InternalRPC
				if r.CAFile != "ca.pem" || r.Keys.CAFile != "ca_file" || !r.VerifyOutgoing || !r.VerifyIncoming ||
					r.Keys.VerifyIncoming != "verify_incoming_rpc" || !r.VerifyServerHostname || r.TLSMinVersion != "tls12" {
					t.Errorf("internal_rpc = %+v", r)
				}
				if want := []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}; !reflect.DeepEqual(r.TLSCipherSuites, want) {
					t.Errorf("suites = %q", r.TLSCipherSuites)
				}
				if tls.HTTPS.VerifyIncoming || tls.HTTPS.VerifyOutgoing {
					t.Errorf("https = %+v", tls.HTTPS)
				}
			}},
		{"the new block wins over the deprecated form", `{"verify_incoming": true, "tls": {"defaults": {"verify_incoming": false}}}`,
			func(t *testing.T, tls TLS) {
				if tls.HTTPS.VerifyIncoming || tls.HTTPS.Keys.VerifyIncoming != "tls.defaults.verify_incoming" {
					t.Errorf("https = %+v", tls.HTTPS)
				}
			}},
		{"server name from datacenter and domain", `{"datacenter": "east", "domain": "mesh."}`,
			func(t *testing.T, tls TLS) {
				if tls.ServerName != "server.east.mesh" {
					t.Errorf("ServerName = %q", tls.ServerName)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, err := load(t, []string{"-dev", "-config-file", "$DIR/a.json"}, map[string]string{"a.json": tc.file})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, rc.TLS)
		})
	}
}

// TestLoadTLSKeys: keys Consul rejects stay rejected, and a TLS port
// without a certificate is named in a warning.
func TestLoadTLSKeys(t *testing.T) {
	_, _, err := load(t, []string{"-dev", "-config-file", "$DIR/a.json"}, map[string]string{"a.json": `{"tls": {"https": {"verify_server_hostname": true}}}`})
	if err == nil || !strings.Contains(err.Error(), "tls.https.verify_server_hostname") {
		t.Errorf("verify_server_hostname outside internal_rpc: %v", err)
	}
	_, warnings, err := load(t, []string{"-dev", "-https-port", "8501"}, nil)
	if err != nil || !strings.Contains(strings.Join(warnings, "\n"), "ports.https is set but tls.https has no cert_file") {
		t.Errorf("https port without a certificate: %v %q", err, warnings)
	}
}

// TestLoadPortsDisabled: -1 turns off each optional listener, HTTP
// included (the usual production setting with HTTPS on).
func TestLoadPortsDisabled(t *testing.T) {
	rc, _, err := load(t, []string{"-dev", "-http-port", "-1", "-https-port", "8501", "-grpc-port", "-1", "-dns-port", "-1",
		"-hcl", `tls { https { cert_file = "c.pem" key_file = "k.pem" } }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rc.HTTPListenAddrs(); got != nil {
		t.Errorf("HTTPListenAddrs = %v, want none", got)
	}
	if got := rc.HTTPSListenAddrs(); !reflect.DeepEqual(got, []string{"127.0.0.1:8501"}) {
		t.Errorf("HTTPSListenAddrs = %v", got)
	}
	if rc.GRPCListenAddrs() != nil || rc.DNSListenAddrs() != nil || rc.GRPCTLSListenAddrs() != nil {
		t.Errorf("grpc %v dns %v grpc_tls %v, want none", rc.GRPCListenAddrs(), rc.DNSListenAddrs(), rc.GRPCTLSListenAddrs())
	}
}
