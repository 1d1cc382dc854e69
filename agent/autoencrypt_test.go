package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/integration/harness"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// aeCluster is an in-process server agent with mutual TLS on the server
// port and auto_encrypt.allow_tls, and a client agent with
// auto_encrypt.tls and only the agent CA file.
type aeCluster struct {
	srv, client *Agent
	// caCert and caKey are the agent CA (tls ca create's).
	caCert, caKey string
}

// startAECluster starts the server, lets setup change its CA
// configuration, then starts the client.
func startAECluster(t *testing.T, jitter time.Duration, setup func(*Agent)) *aeCluster {
	t.Helper()
	// Registered first, so it runs after both agents' shutdown: the
	// renewal and roots watches must have ended.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caCert, caKey, err := ca.NewAgentCA(ca.AgentCARequest{Domain: "consul", Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := ca.SignAgentCert(ca.AgentCertRequest{
		CACertPEM: caCert, CAKeyPEM: caKey, CommonName: "server.dc1.consul",
		DNSNames: []string{"server.dc1.consul", "localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, Days: 30,
	})
	if err != nil {
		t.Fatal(err)
	}
	caFile := write("ca.pem", caCert)
	conf := func(name string, v map[string]any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return write(name, string(b))
	}
	srvArgs := append(devArgs(t, "s1"), "-config-file", conf("server.json", map[string]any{
		"tls": map[string]any{
			"defaults": map[string]any{
				"ca_file": caFile, "cert_file": write("srv.pem", srvCert), "key_file": write("srv-key.pem", srvKey),
				"verify_incoming": true, "verify_outgoing": true,
			},
			"internal_rpc": map[string]any{"verify_server_hostname": true},
		},
		"auto_encrypt": map[string]any{"allow_tls": true},
	}))
	srv := startAgent(t, srvArgs, Config{RootChangeJitter: jitter})
	waitFor(t, "the Connect CA", func() bool {
		var roots structs.IndexedCARoots
		return structs.MethodConnectCARoots.Call(context.Background(), srv.server, &structs.DCSpecificRequest{}, &roots) == nil && len(roots.Roots) > 0
	})
	if setup != nil {
		setup(srv)
	}

	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	port := func() string {
		p, err := ports.Port()
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(p)
	}
	_, serverPort, _ := net.SplitHostPort(srv.rc.RPCBindAddr())
	clientArgs := []string{
		"-node", "c1", "-data-dir", filepath.Join(dir, "client"), "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-retry-join", net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.rc.Ports.SerfLAN)),
		"-server-port", serverPort, "-http-port", port(), "-serf-lan-port", port(), "-grpc-port", "-1", "-dns-port", "-1",
		"-config-file", conf("client.json", map[string]any{
			"auto_encrypt": map[string]any{"tls": true},
			"tls": map[string]any{
				"defaults":     map[string]any{"ca_file": caFile},
				"internal_rpc": map[string]any{"verify_server_hostname": true},
			},
		}),
	}
	return &aeCluster{srv: srv, client: startAgent(t, clientArgs, Config{RootChangeJitter: jitter}), caCert: caCert, caKey: caKey}
}

// startAgent starts an in-process agent with args and the rest of cfg,
// shut down when the test ends.
func startAgent(t *testing.T, args []string, cfg Config) *Agent {
	t.Helper()
	rc, _, err := config.Load(config.LoadOptions{Args: args, Logger: slog.New(slog.DiscardHandler), FlagOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime = rc
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return a
}

// setCAConfig merges change into the server's CA configuration.
func setCAConfig(t *testing.T, srv *Agent, change map[string]any) {
	t.Helper()
	ctx := context.Background()
	var cur structs.CAConfiguration
	if err := structs.MethodConnectCAConfigurationGet.Call(ctx, srv.server, &structs.DCSpecificRequest{}, &cur); err != nil {
		t.Fatal(err)
	}
	next := maps.Clone(cur.Config)
	maps.Copy(next, change)
	args := &structs.CARequest{Config: &structs.CAConfiguration{Provider: cur.Provider, Config: next}}
	if err := structs.MethodConnectCAConfigurationSet.Call(ctx, srv.server, args, new(struct{})); err != nil {
		t.Fatal(err)
	}
}

// freshCall calls Status.Leader on the server over a new connection that
// the client's TLS configuration of the moment makes: it proves that the
// certificate the client presents now is one the server accepts.
func (c *aeCluster) freshCall(t *testing.T) error {
	t.Helper()
	pool := server.NewConnPool(server.ConnPoolConfig{TLS: c.client.tls})
	defer pool.Close()
	var leader string
	return pool.Call(context.Background(), c.srv.rc.RPCBindAddr(), structs.MethodStatusLeader.Name(), &structs.DCSpecificRequest{}, &leader)
}

// routerCall reads the catalog through the client's own router and its
// long-lived connections.
func (c *aeCluster) routerCall(t *testing.T) error {
	t.Helper()
	var nodes structs.IndexedNodes
	return structs.MethodCatalogListNodes.Call(context.Background(), c.client, &structs.DCSpecificRequest{}, &nodes)
}

// TestAutoEncryptRenewsBeforeExpiry: with a leaf TTL short enough to see
// (the CA configuration's LeafCertTTL under SkipValidate, Consul's
// test-only switch past the 1 h minimum), the client gets a new
// certificate signed before the old one expires, and once the old one has
// expired, new connections to the server (which present the current
// certificate) and the router's connections both keep working.
func TestAutoEncryptRenewsBeforeExpiry(t *testing.T) {
	// Leaves are backdated by ca.ClockSkewAllowance (a minute), so 80 s
	// leaves the certificate 20 s of validity from its signing.
	const ttl = ca.ClockSkewAllowance + 20*time.Second
	c := startAECluster(t, 0, func(srv *Agent) {
		setCAConfig(t, srv, map[string]any{"LeafCertTTL": ttl.String(), "SkipValidate": true})
	})
	first := c.client.autoCert.Load()
	if life := first.issued.ValidBefore.Sub(first.issued.ValidAfter); life != ttl {
		t.Fatalf("first certificate lives %s, want the CA's %s", life, ttl)
	}
	var renewed *autoCert
	waitForWithin(t, 2*ttl, "a renewed certificate", func() bool {
		renewed = c.client.autoCert.Load()
		return renewed.issued.SerialNumber != first.issued.SerialNumber
	})
	if signed := renewed.issued.ValidAfter.Add(ca.ClockSkewAllowance); !signed.Before(first.issued.ValidBefore) {
		t.Fatalf("renewal signed at %s, not before the old certificate expired at %s", signed, first.issued.ValidBefore)
	}
	// Past the first certificate's expiry.
	time.Sleep(time.Until(first.issued.ValidBefore) + time.Second)
	if err := c.freshCall(t); err != nil {
		t.Fatalf("a new connection after the first certificate expired: %v", err)
	}
	if err := c.routerCall(t); err != nil {
		t.Fatalf("the router after the first certificate expired: %v", err)
	}
}

// TestAutoEncryptRootRotation: a new active root in the Connect CA makes
// the client re-sign its certificate with it long before its renewal
// time (Consul's auto_encrypt watches the roots), the server accepts the
// new certificate, and the client trusts a server certificate signed by
// the new root, which only AutoEncrypt.Sign's roots and the watch gave it.
func TestAutoEncryptRootRotation(t *testing.T) {
	c := startAECluster(t, 100*time.Millisecond, nil)
	first := c.client.autoCert.Load()

	keyObj, keyPEM, err := ca.GenerateKey("ec", 256)
	if err != nil {
		t.Fatal(err)
	}
	keyID, err := ca.KeyID(keyObj.Public())
	if err != nil {
		t.Fatal(err)
	}
	setCAConfig(t, c.srv, map[string]any{"PrivateKey": keyPEM})
	var rotated *autoCert
	waitForWithin(t, 30*time.Second, "the certificate re-signed by the new root", func() bool {
		rotated = c.client.autoCert.Load()
		return rotated.signer == connect.HexString(keyID)
	})
	if rotated.issued.SerialNumber == first.issued.SerialNumber || !rotated.issued.ValidBefore.After(first.issued.ValidAfter) {
		t.Fatalf("rotated certificate %+v, first %+v", rotated.issued, first.issued)
	}
	if err := c.freshCall(t); err != nil {
		t.Fatalf("a new connection with the re-signed certificate: %v", err)
	}
	if err := c.routerCall(t); err != nil {
		t.Fatalf("the router after the rotation: %v", err)
	}

	var roots structs.IndexedCARoots
	if err := structs.MethodConnectCARoots.Call(context.Background(), c.srv.server, &structs.DCSpecificRequest{}, &roots); err != nil {
		t.Fatal(err)
	}
	newRoot := roots.Roots.Active()
	if newRoot == nil || newRoot.SigningKeyID != connect.HexString(keyID) {
		t.Fatalf("active root %+v, want the one of the new key", newRoot)
	}
	otherCA, otherKey, err := ca.NewAgentCA(ca.AgentCARequest{Domain: "consul", Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		caCert, caKey string
		ok            bool
	}{
		{"signed by the new Connect CA root", newRoot.RootCert, keyPEM, true},
		{"signed by the agent CA", c.caCert, c.caKey, true},
		{"signed by another CA", otherCA, otherKey, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := handshakeWithServerCert(t, c.client, tc.caCert, tc.caKey)
			if (err == nil) != tc.ok {
				t.Fatalf("handshake error %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// handshakeWithServerCert runs a TLS handshake of the client agent's
// server-port dialer against a listener presenting a server.dc1.consul
// certificate signed by the given CA, and returns the client's error.
func handshakeWithServerCert(t *testing.T, client *Agent, caCert, caKey string) error {
	t.Helper()
	certPEM, keyPEM, err := ca.SignAgentCert(ca.AgentCertRequest{
		CACertPEM: caCert, CAKeyPEM: caKey, CommonName: "server.dc1.consul", DNSNames: []string{"server.dc1.consul"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Days: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		_ = conn.(*tls.Conn).Handshake()
		_ = conn.Close()
	}()
	conn, err := tls.Dial("tcp", ln.Addr().String(), client.tls.OutgoingRPCConfig())
	if err == nil {
		_ = conn.Close()
	}
	_ = ln.Close()
	<-done
	return err
}

// waitForWithin is waitFor with its own deadline.
func waitForWithin(t *testing.T, d time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
