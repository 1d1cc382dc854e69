package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"
)

// recordPeers wraps a listener configuration so that the client
// certificates of its handshake land in *peers.
func recordPeers(server *tls.Config, peers *[]*x509.Certificate) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		cfg, err := server.GetConfigForClient(h)
		if err != nil {
			return nil, err
		}
		verify := cfg.VerifyConnection
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			*peers = cs.PeerCertificates
			if verify != nil {
				return verify(cs)
			}
			return nil
		}
		return cfg, nil
	}}
}

// pairOf loads the certificate p issues for cn.
func pairOf(t *testing.T, p *pki, name, cn string) *tls.Certificate {
	t.Helper()
	certFile, keyFile := p.issue(name, cn, time.Now(), 30)
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestAutoEncryptServerPort: with allow_tls a verifying server port admits
// client certificates of its CA and of the Connect CA, lets a connection
// without one finish its handshake (the server port then limits it), and
// still refuses another CA's; without allow_tls a connection without a
// certificate is refused.
func TestAutoEncryptServerPort(t *testing.T) {
	agentCA, connectCA, rogue := newPKI(t), newPKI(t), newPKI(t)
	now := time.Now()
	srvCert, srvKey := agentCA.issue("server", "server.dc1.consul", now, 30)
	own := pairOf(t, agentCA, "client", "client.dc1.consul")
	auto := pairOf(t, connectCA, "auto", "auto")
	other := pairOf(t, rogue, "rogue", "client.dc1.consul")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(agentCA.caCert))

	cfg := func(allow bool) *Configurator {
		c, err := New(Config{
			InternalRPC: ProtocolConfig{CAFile: agentCA.caFile, CertFile: srvCert, KeyFile: srvKey, VerifyIncoming: true, VerifyOutgoing: true},
			ServerName:  "server.dc1.consul", ServerMode: true, AutoEncryptAllowTLS: allow,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetConnectCARoots([]string{connectCA.caCert}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name      string
		allow     bool
		cert      *tls.Certificate
		ok        bool
		certified bool
	}{
		{"allow_tls: agent CA", true, own, true, true},
		{"allow_tls: Connect CA", true, auto, true, true},
		{"allow_tls: no certificate", true, nil, true, false},
		{"allow_tls: another CA", true, other, false, false},
		{"no allow_tls: Connect CA", false, auto, false, false},
		{"no allow_tls: no certificate", false, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			server, required := cfg(tc.allow).IncomingRPCConfig()
			if !required {
				t.Fatal("verify_incoming must still require TLS")
			}
			client := &tls.Config{RootCAs: roots, ServerName: "server.dc1.consul", MinVersion: tls.VersionTLS12}
			if tc.cert != nil {
				client.Certificates = []tls.Certificate{*tc.cert}
			}
			var peers []*x509.Certificate
			_, err := handshake(t, client, recordPeers(server, &peers))
			if (err == nil) != tc.ok {
				t.Fatalf("handshake err = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && (len(peers) > 0) != tc.certified {
				t.Fatalf("peer certificates %d, want certified=%v", len(peers), tc.certified)
			}
		})
	}
	if got := cfg(true).RPCCAPEMs(); len(got) != 1 {
		t.Errorf("RPCCAPEMs = %d certificates, want the CA file's one", len(got))
	}
}

// TestAutoEncryptClientCert: an auto_encrypt client dials servers over TLS
// even without verify_outgoing, and serves HTTPS (and gRPC-TLS only with
// use_auto_cert) with the certificate once the servers gave it.
func TestAutoEncryptClientCert(t *testing.T) {
	agentCA, connectCA := newPKI(t), newPKI(t)
	certFile, keyFile := connectCA.issue("auto", "localhost", time.Now(), 30)
	certPEM, _ := os.ReadFile(certFile)
	keyPEM, _ := os.ReadFile(keyFile)
	for _, useGRPC := range []bool{false, true} {
		c, err := New(Config{InternalRPC: ProtocolConfig{CAFile: agentCA.caFile}, AutoEncryptTLS: true, GRPCUseAutoCert: useGRPC})
		if err != nil {
			t.Fatal(err)
		}
		if c.OutgoingRPCConfig() == nil {
			t.Fatal("an auto_encrypt client must dial servers over TLS")
		}
		if c.HTTPSEnabled() {
			t.Fatal("HTTPS before the certificate arrived")
		}
		if err := c.SetAutoEncryptCert("junk", "junk"); err == nil {
			t.Fatal("a junk certificate was accepted")
		}
		if err := c.SetAutoEncryptCert(string(certPEM), string(keyPEM)); err != nil {
			t.Fatal(err)
		}
		if !c.HTTPSEnabled() || c.GRPCTLSEnabled() != useGRPC {
			t.Fatalf("use_auto_cert=%v: HTTPS %v, gRPC-TLS %v", useGRPC, c.HTTPSEnabled(), c.GRPCTLSEnabled())
		}
		got, err := c.OutgoingRPCConfig().GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil || len(got.Certificate) == 0 {
			t.Fatalf("client certificate %v, %v; want the auto_encrypt one", got, err)
		}
	}
}

// TestAutoEncryptServerRoots: an auto_encrypt client trusts servers
// through the roots AutoEncrypt.Sign gave it besides its CA file, so a
// server certificate signed by a Connect CA root that arrived with a
// rotation is accepted once the roots are refreshed, and refused again
// when a later refresh no longer lists that root.
func TestAutoEncryptServerRoots(t *testing.T) {
	agentCA, oldRoot, newRoot, rogue := newPKI(t), newPKI(t), newPKI(t), newPKI(t)
	client, err := New(Config{
		InternalRPC: ProtocolConfig{CAFile: agentCA.caFile, VerifyServerHostname: true},
		ServerName:  "server.dc1.consul", AutoEncryptTLS: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	serving := func(p *pki) *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*pairOf(t, p, "srv", "server.dc1.consul")}}
	}
	for _, step := range []struct {
		name   string
		roots  []string // nil leaves the roots as they are
		server *pki
		ok     bool
	}{
		{"own CA file", nil, agentCA, true},
		{"new root before the servers named it", nil, newRoot, false},
		{"new root after the rotation", []string{oldRoot.caCert, newRoot.caCert}, newRoot, true},
		{"old root still listed", nil, oldRoot, true},
		{"own CA file beside the roots", nil, agentCA, true},
		{"another CA", nil, rogue, false},
		{"a root no longer listed", []string{newRoot.caCert}, oldRoot, false},
	} {
		if step.roots != nil {
			if err := client.SetAutoEncryptServerRoots(step.roots); err != nil {
				t.Fatal(err)
			}
		}
		clientErr, _ := handshake(t, client.OutgoingRPCConfig(), serving(step.server))
		if (clientErr == nil) != step.ok {
			t.Errorf("%s: client error %v, want ok=%v", step.name, clientErr, step.ok)
		}
	}
	if err := client.SetAutoEncryptServerRoots([]string{"junk"}); err == nil {
		t.Error("a junk root was accepted")
	}
}
