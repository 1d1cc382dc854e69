package harness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testCA signs certificates for 127.0.0.1 into files under dir.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca := &testCA{dir: t.TempDir()}
	ca.cert, ca.key = ca.sign(t, "ca", nil, nil)
	return ca
}

// sign writes name.pem and name-key.pem; a nil parent makes a CA.
func (ca *testCA) sign(t *testing.T, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	} else {
		tmpl.IPAddresses = []net.IP{net.ParseIP(Loopback)}
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(ca.dir, name+".pem"), "CERTIFICATE", der)
	writePEM(t, filepath.Join(ca.dir, name+"-key.pem"), "EC PRIVATE KEY", keyDER)
	if parent == tmpl {
		ca.file = filepath.Join(ca.dir, name+".pem")
	}
	return cert, key
}

// leaf signs a certificate for 127.0.0.1 and returns its files.
func (ca *testCA) leaf(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	ca.sign(t, name, ca.cert, ca.key)
	return filepath.Join(ca.dir, name+".pem"), filepath.Join(ca.dir, name+"-key.pem")
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClusterHTTPS: with ServerHTTPS and ClientHTTPS the agents get
// -http-port -1 and -https-port, and every probe (WaitForLeader,
// WaitForClients, StatusPeers, GetJSON, HTTPClient) speaks HTTPS with the
// client certificate; plaintext and certificate-less probes are refused.
func TestClusterHTTPS(t *testing.T) {
	self, ports := selfAndPorts(t)
	ca := newTestCA(t)
	srvCert, srvKey := ca.leaf(t, "agent")
	userCert, userKey := ca.leaf(t, "user")
	https := &HTTPSConfig{CAFile: ca.file, CertFile: userCert, KeyFile: userKey}
	leaderFile := filepath.Join(t.TempDir(), "leader")
	c := StartCluster(t, ClusterConfig{
		Binary: self, Ports: ports, Servers: 2, Clients: 1,
		ServerHTTPS: https, ClientHTTPS: https,
		Env: []string{childEnv + "=" + childFakeAgent, fakeLeaderFileEnv + "=" + leaderFile,
			fakeTLSCertEnv + "=" + srvCert, fakeTLSKeyEnv + "=" + srvKey, fakeTLSCAEnv + "=" + ca.file},
	})
	added := c.AddClient(t)
	for _, a := range c.Agents() {
		cfg := parsedConfig(t, a)
		if cfg.HTTPPort != -1 || cfg.HTTPSPort != a.Ports().HTTP {
			t.Errorf("%s: -http-port %d -https-port %d, want -1 and %d", a.Node(), cfg.HTTPPort, cfg.HTTPSPort, a.Ports().HTTP)
		}
		if a.Scheme() != "https" || a.HTTPURL() != "https://"+a.HTTPAddr() || a.HTTPS() == nil {
			t.Errorf("%s: scheme %s, URL %s", a.Node(), a.Scheme(), a.HTTPURL())
		}
	}
	want := c.Servers()[1]
	if err := os.WriteFile(leaderFile, []byte(want.ServerAddr()), 0o644); err != nil {
		t.Fatal(err)
	}
	if l := waitLeader(t, c, 10*time.Second); l != want {
		t.Fatalf("leader %s, want %s", l.Node(), want.Node())
	}
	ctx := t.Context()
	if err := c.WaitForClients(ctx); err != nil {
		t.Fatal(err)
	}
	if peers, err := added.StatusPeers(ctx); err != nil || !slices.Equal(peers, []string{added.ServerAddr()}) {
		t.Fatalf("StatusPeers over HTTPS = %v, %v", peers, err)
	}
	if !slices.Equal(c.HTTPURLs(), []string{c.Servers()[0].HTTPURL(), want.HTTPURL()}) {
		t.Fatalf("HTTPURLs = %v", c.HTTPURLs())
	}
	hc, err := want.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(want.HTTPURL() + "/v1/status/leader")
	if err != nil {
		t.Fatalf("HTTPClient: %v", err)
	}
	_ = resp.Body.Close()

	refused := []struct {
		name string
		e    endpoint
	}{
		{"plaintext", plain(want.HTTPAddr())},
		{"no client certificate", endpoint{base: want.HTTPURL(), https: &HTTPSConfig{CAFile: ca.file}}},
		{"another CA", endpoint{base: want.HTTPURL(), https: &HTTPSConfig{CAFile: newTestCA(t).file, CertFile: userCert, KeyFile: userKey}}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if l, err := tt.e.statusLeader(ctx); err == nil {
				t.Fatalf("probe answered %q, want refused", l)
			}
		})
	}
	t.Run("unreadable CA file", func(t *testing.T) {
		bad := endpoint{base: want.HTTPURL(), https: &HTTPSConfig{CAFile: filepath.Join(t.TempDir(), "missing.pem")}}
		if _, err := bad.statusLeader(ctx); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "CA file") {
			t.Fatalf("err = %v, want the missing CA file", err)
		}
	})
}
