package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect/ca"
)

// pki is a CA and the files of certificates it signed, in a temp dir.
type pki struct {
	t             *testing.T
	dir           string
	caCert, caKey string
	caFile        string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	cert, key, err := ca.NewAgentCA(ca.AgentCARequest{Domain: "consul", Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, dir: t.TempDir(), caCert: cert, caKey: key}
	p.caFile = p.write("ca.pem", cert)
	return p
}

func (p *pki) write(name, content string) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// issue signs a certificate for cn (also its DNS name) and writes
// <name>.pem and <name>-key.pem.
func (p *pki) issue(name, cn string, now time.Time, days int) (certFile, keyFile string) {
	p.t.Helper()
	cert, key, err := ca.SignAgentCert(ca.AgentCertRequest{
		CACertPEM: p.caCert, CAKeyPEM: p.caKey, CommonName: cn,
		DNSNames: []string{cn, "localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		Days:        days, Now: now,
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return p.write(name+".pem", cert), p.write(name+"-key.pem", key)
}

func TestNewRejectsBadMaterial(t *testing.T) {
	p := newPKI(t)
	now := time.Now()
	cert, key := p.issue("server", "server.dc1.consul", now, 30)
	otherCert, otherKey := p.issue("other", "server.dc1.consul", now, 30)
	_ = otherCert
	expiredCert, expiredKey := p.issue("expired", "server.dc1.consul", now.AddDate(0, 0, -10), 5)
	wrongCert, wrongKey := p.issue("wrong", "client.dc1.consul", now, 30)
	garbage := p.write("garbage.pem", "not a certificate")
	missing := filepath.Join(p.dir, "missing.pem")

	rpc := func(mod func(*ProtocolConfig)) Config {
		pc := ProtocolConfig{CAFile: p.caFile, CertFile: cert, KeyFile: key,
			VerifyIncoming: true, VerifyOutgoing: true, VerifyServerHostname: true}
		mod(&pc)
		return Config{InternalRPC: pc, ServerName: "server.dc1.consul", ServerMode: true}
	}
	tests := []struct {
		name     string
		cfg      Config
		sentinel error
		want     []string // substrings of the error
	}{
		{"missing cert file", rpc(func(pc *ProtocolConfig) { pc.CertFile = missing }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.cert_file", missing}},
		{"missing key file", rpc(func(pc *ProtocolConfig) { pc.KeyFile = missing }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.key_file", missing}},
		{"missing CA file", rpc(func(pc *ProtocolConfig) { pc.CAFile = missing }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.ca_file", missing}},
		{"CA file without a certificate", rpc(func(pc *ProtocolConfig) { pc.CAFile = garbage }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.ca_file", garbage}},
		{"cert file without a certificate", rpc(func(pc *ProtocolConfig) { pc.CertFile = garbage }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.cert_file", garbage}},
		{"key of another certificate", rpc(func(pc *ProtocolConfig) { pc.KeyFile = otherKey }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.key_file", otherKey, "does not match", cert}},
		{"expired certificate", rpc(func(pc *ProtocolConfig) { pc.CertFile, pc.KeyFile = expiredCert, expiredKey }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.cert_file", expiredCert, "expired"}},
		{"certificate for the wrong server name", rpc(func(pc *ProtocolConfig) { pc.CertFile, pc.KeyFile = wrongCert, wrongKey }), ErrInvalidMaterial,
			[]string{"tls.internal_rpc.cert_file", wrongCert, "server.dc1.consul", "verify_server_hostname"}},
		{"deprecated key named", rpc(func(pc *ProtocolConfig) { pc.CertFile, pc.Keys.CertFile = missing, "cert_file" }), ErrInvalidMaterial,
			[]string{"cert_file " + missing}},
		{"cert without key", rpc(func(pc *ProtocolConfig) { pc.KeyFile = "" }), ErrInvalidConfig,
			[]string{"tls.internal_rpc.cert_file is set but tls.internal_rpc.key_file is not"}},
		{"verify without CA", rpc(func(pc *ProtocolConfig) { pc.CAFile = "" }), ErrInvalidConfig,
			[]string{"tls.internal_rpc.verify_incoming", "ca_file"}},
		{"server verifying without a certificate", rpc(func(pc *ProtocolConfig) { pc.CertFile, pc.KeyFile = "", "" }), ErrInvalidConfig,
			[]string{"needs tls.internal_rpc.cert_file"}},
		{"unknown version", rpc(func(pc *ProtocolConfig) { pc.TLSMinVersion = "TLSv9" }), ErrInvalidConfig,
			[]string{"tls.internal_rpc.tls_min_version", "TLSv9"}},
		{"suites with TLS 1.3", rpc(func(pc *ProtocolConfig) {
			pc.TLSMinVersion, pc.TLSCipherSuites = "TLSv1_3", []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}
		}), ErrInvalidConfig, []string{"tls.internal_rpc.tls_cipher_suites"}},
		{"unknown suite", rpc(func(pc *ProtocolConfig) { pc.TLSCipherSuites = []string{"TLS_NOPE"} }), ErrInvalidConfig,
			[]string{"TLS_NOPE"}},
		{"https verify without CA", Config{HTTPS: ProtocolConfig{CertFile: cert, KeyFile: key, VerifyIncoming: true}}, ErrInvalidConfig,
			[]string{"tls.https.verify_incoming"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("New error = %v, want %v", err, tt.sentinel)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}

	good := []struct {
		name string
		cfg  Config
	}{
		{"nothing configured", Config{}},
		{"server with mTLS", rpc(func(*ProtocolConfig) {})},
		{"client agent without a certificate", Config{InternalRPC: ProtocolConfig{CAFile: p.caFile, VerifyOutgoing: true}}},
		{"CA path", rpc(func(pc *ProtocolConfig) { pc.CAFile, pc.CAPath = "", p.dir+"/cadir" })},
		{"TLS 1.3", rpc(func(pc *ProtocolConfig) { pc.TLSMinVersion = "TLSv1_3" })},
	}
	if err := os.MkdirAll(p.dir+"/cadir", 0o700); err != nil {
		t.Fatal(err)
	}
	p.write("cadir/ca.pem", p.caCert)
	for _, tt := range good {
		if _, err := New(tt.cfg); err != nil {
			t.Errorf("%s: New: %v", tt.name, err)
		}
	}
}

// handshake runs one TLS handshake between client and server configs over
// a pipe and returns the client's and the server's errors.
func handshake(t *testing.T, client, server *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer func() { _ = a.Close() }()
	defer func() { _ = b.Close() }()
	done := make(chan error, 1)
	go func() {
		s := tls.Server(b, server)
		err := s.Handshake()
		if err == nil {
			// A TLS 1.3 client learns of a refused certificate only on
			// its first read.
			_, err = s.Write([]byte{1})
		}
		done <- err
		_ = b.Close()
	}()
	c := tls.Client(a, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Read(make([]byte, 1))
	}
	_ = a.Close()
	return clientErr, <-done
}

func TestRPCHandshakes(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	now := time.Now()
	srvCert, srvKey := p.issue("server", "server.dc1.consul", now, 30)
	cliCert, cliKey := p.issue("client", "client.dc1.consul", now, 30)
	foreignCert, foreignKey := other.issue("foreign", "server.dc1.consul", now, 30)

	server, err := New(Config{ServerMode: true, ServerName: "server.dc1.consul", InternalRPC: ProtocolConfig{
		CAFile: p.caFile, CertFile: srvCert, KeyFile: srvKey, VerifyIncoming: true, VerifyOutgoing: true, VerifyServerHostname: true}})
	if err != nil {
		t.Fatal(err)
	}
	incoming, required := server.IncomingRPCConfig()
	if incoming == nil || !required {
		t.Fatalf("IncomingRPCConfig = %v, %v; want a config, required", incoming, required)
	}
	client := func(ca, cert, key, name string, verifyName bool) *tls.Config {
		c, err := New(Config{ServerName: name, InternalRPC: ProtocolConfig{
			CAFile: ca, CertFile: cert, KeyFile: key, VerifyOutgoing: true, VerifyServerHostname: verifyName}})
		if err != nil {
			t.Fatal(err)
		}
		return c.OutgoingRPCConfig()
	}
	tests := []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"client certificate of the CA", client(p.caFile, cliCert, cliKey, "server.dc1.consul", true), true},
		{"server certificate of the CA", client(p.caFile, srvCert, srvKey, "server.dc1.consul", true), true},
		{"no client certificate", client(p.caFile, "", "", "server.dc1.consul", true), false},
		{"certificate of another CA", client(p.caFile, foreignCert, foreignKey, "server.dc1.consul", true), false},
		{"trusting another CA", client(other.caFile, cliCert, cliKey, "server.dc1.consul", true), false},
		{"expecting another server name", client(p.caFile, cliCert, cliKey, "server.dc2.consul", true), false},
		{"another name without hostname verification", client(p.caFile, cliCert, cliKey, "server.dc2.consul", false), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cerr, serr := handshake(t, tt.client, incoming)
			if ok := cerr == nil && serr == nil; ok != tt.ok {
				t.Fatalf("handshake ok = %v (client %v, server %v), want %v", ok, cerr, serr, tt.ok)
			}
		})
	}

	if plain, err := New(Config{}); err != nil || plain.OutgoingRPCConfig() != nil {
		t.Errorf("without verify_outgoing OutgoingRPCConfig should be nil (err %v)", err)
	}
}

func TestReloadSwapsCertificates(t *testing.T) {
	p := newPKI(t)
	now := time.Now()
	certA, keyA := p.issue("a", "server.dc1.consul", now, 30)
	certB, keyB := p.issue("b", "server.dc1.consul", now, 30)
	cfg := Config{HTTPS: ProtocolConfig{CertFile: certA, KeyFile: keyA}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := func() *x509.Certificate {
		t.Helper()
		srv, err := c.IncomingHTTPSConfig().GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(srv.Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	before := served()
	cfg.HTTPS.CertFile, cfg.HTTPS.KeyFile = certB, keyB
	if err := c.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	after := served()
	if before.SerialNumber.Cmp(after.SerialNumber) == 0 {
		t.Fatal("Reload did not change the served certificate")
	}
	// A bad reload keeps what was there.
	cfg.HTTPS.CertFile = filepath.Join(p.dir, "gone.pem")
	if err := c.Reload(cfg); !errors.Is(err, ErrInvalidMaterial) {
		t.Fatalf("Reload with a missing file = %v, want ErrInvalidMaterial", err)
	}
	if served().SerialNumber.Cmp(after.SerialNumber) != 0 {
		t.Fatal("a failed Reload changed the served certificate")
	}
}
