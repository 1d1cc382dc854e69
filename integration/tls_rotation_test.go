package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"testing"
	"time"
)

// certSerial is the serial number of the first certificate in a PEM file.
func certSerial(t *testing.T, certFile string) *big.Int {
	t.Helper()
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s: no PEM block", certFile)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", certFile, err)
	}
	return c.SerialNumber
}

// copyFile replaces dst's content with src's, as an operator drops new
// material over the files the configuration names.
func copyFile(t *testing.T, dst, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// peerSerial opens a new TLS connection and returns the serial of the
// certificate the peer presented.
func peerSerial(ctx context.Context, addr string, cfg *tls.Config) (*big.Int, error) {
	d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// keptConn is one HTTPS keep-alive connection to an agent, opened before
// a rotation, that must keep working after it.
type keptConn struct {
	hc     *http.Client
	url    string
	serial *big.Int
}

func openKeptConn(t *testing.T, ctx context.Context, url string, cfg *tls.Config) *keptConn {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: cfg, MaxConnsPerHost: 1, IdleConnTimeout: 10 * time.Minute}
	t.Cleanup(tr.CloseIdleConnections)
	k := &keptConn{hc: &http.Client{Transport: tr, Timeout: 5 * time.Second}, url: url}
	serial, _, err := k.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k.serial = serial
	return k
}

// get asks for the leader on the kept connection: the serial the agent
// presented on it and whether the connection was the one opened before.
func (k *keptConn) get(ctx context.Context) (*big.Int, bool, error) {
	var reused bool
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodGet, k.url+"/v1/status/leader", nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := k.hc.Do(req)
	if err != nil {
		return nil, false, err
	}
	// Read to the end, or the transport drops the connection.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber, reused, nil
}

// TestTLSCertificateRotation: on a live mutual-TLS cluster (three servers
// and a client agent, all serving HTTPS only) with writers running throughout, an
// operator rotates certificates as Consul's guide has it: new certificates
// of the same CA; then a CA bundle holding the old and a new CA; then
// certificates of the new CA; `trellis reload` on every agent after each
// step. After each reload new connections get the new certificate (by
// serial) on the server port and the HTTPS API, a connection opened
// before the rotation keeps working, and no acknowledged write is lost.
func TestTLSCertificateRotation(t *testing.T) {
	ctx := scenarioContext(t)
	tc := startTLSCluster(t, nil)
	c, pki := tc.c, tc.pki
	srvCert, srvKey, cliCert, cliKey, userCert, userKey := tc.srvCert, tc.srvKey, tc.cliCert, tc.cliKey, tc.userCert, tc.userKey
	oldCA := pki.write(t, "old-ca.pem", pki.caCert)
	next := newTestPKI(t, "next")
	bundle := next.write(t, "bundle.pem", pki.caCert+next.caCert)
	client, clientURL := tc.addHTTPSClient(t)

	// The test's own certificate stays of the old CA: the bundle keeps
	// it valid throughout, as it keeps every not-yet-rotated agent's.
	user, err := tls.LoadX509KeyPair(userCert, userKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(pki.caCert + next.caCert))
	userTLS := func(serverName string) *tls.Config {
		return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{user}, ServerName: serverName, MinVersion: tls.VersionTLS12}
	}
	rc := newTLSRawClient(t, userTLS(""))
	eventually(t, 30*time.Second, "the client agent to reach the servers over TLS", func() error {
		return rc.kvPut(ctx, clientURL, "rotation/ready", "yes")
	})
	kept := openKeptConn(t, ctx, clientURL, userTLS(""))

	addrs := append([]string{clientURL}, c.HTTPURLs()...)
	acks := newAckLog()
	w := startWriters(ctx, rc, addrs, 3, "rotation/", acks)
	defer func() { _ = w.stop() }()

	reloadAll := func(t *testing.T) {
		t.Helper()
		// Every agent still presents a certificate of the old CA until
		// it reloads.
		for _, url := range addrs {
			if res := runCLI(ctx, t, "reload", "-http-addr", url,
				"-ca-file", oldCA, "-client-cert", userCert, "-client-key", userKey); res.code != 0 {
				t.Fatalf("%v", res)
			}
		}
	}
	// presents checks that new connections get the certificates now in
	// the files, that the kept connection still answers on its old one,
	// and that writes go on.
	presents := func(t *testing.T) {
		t.Helper()
		srvSerial, cliSerial := certSerial(t, srvCert), certSerial(t, cliCert)
		for _, s := range c.Servers() {
			got, err := peerSerial(ctx, s.ServerAddr(), userTLS("server.dc1.consul"))
			if err != nil {
				t.Fatalf("new TLS connection to %s's server port: %v", s.Node(), err)
			}
			if got.Cmp(srvSerial) != 0 {
				t.Errorf("%s's server port presents serial %s, want the new %s", s.Node(), got, srvSerial)
			}
		}
		if got, err := peerSerial(ctx, clientURL[len("https://"):], userTLS("")); err != nil {
			t.Fatalf("new TLS connection to the client agent's HTTPS API: %v", err)
		} else if got.Cmp(cliSerial) != 0 {
			t.Errorf("the client agent's HTTPS API presents serial %s, want the new %s", got, cliSerial)
		}
		got, reused, err := kept.get(ctx)
		switch {
		case err != nil:
			t.Errorf("the connection opened before the rotation: %v", err)
		case !reused:
			t.Errorf("the connection opened before the rotation was closed (a new one was dialled)")
		case got.Cmp(kept.serial) != 0:
			t.Errorf("the kept connection presents serial %s, want its original %s", got, kept.serial)
		}
		before := acks.count()
		waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := acks.waitCount(waitCtx, before+20); err != nil {
			t.Fatalf("writes stalled after the reload: %v", err)
		}
	}

	// reissue writes certificates of p over the servers' and the client
	// agent's files.
	reissue := func(t *testing.T, p *testPKI, gen string) {
		s, sk := p.issue(t, "server-"+gen, "server.dc1.consul", time.Now(), 30)
		cl, clk := p.issue(t, "client-"+gen, "client.dc1.consul", time.Now(), 30)
		for dst, src := range map[string]string{srvCert: s, srvKey: sk, cliCert: cl, cliKey: clk} {
			copyFile(t, dst, src)
		}
	}
	steps := []struct {
		name   string
		rotate func(t *testing.T)
	}{
		{"new certificates of the same CA", func(t *testing.T) { reissue(t, pki, "2") }},
		{"a CA bundle with the new CA", func(t *testing.T) { copyFile(t, pki.caFile, bundle) }},
		{"certificates of the new CA", func(t *testing.T) { reissue(t, next, "3") }},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := acks.waitCount(ctx, acks.count()+10); err != nil {
				t.Fatal(err)
			}
			step.rotate(t)
			reloadAll(t)
			presents(t)
		})
	}

	if err := w.stop(); err != nil {
		t.Fatalf("writers saw protocol violations: %v", err)
	}
	if !client.Running() {
		t.Fatal("the client agent stopped")
	}
	acked := acks.snapshot()
	leader := waitLeader(t, c, clusterStartTimeout)
	got, _, _, err := rc.kvList(ctx, leader.HTTPURL(), "rotation/", modeConsistent)
	if err != nil {
		t.Fatal(err)
	}
	if err := missingAcked(got, acked); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged across the rotation, %d attempts failed", len(acked), w.failures.Load())
}
