package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/integration/harness"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// testPKI is an agent CA and the certificates it signed, as files.
type testPKI struct {
	dir           string
	caCert, caKey string
	caFile        string
}

func newTestPKI(t *testing.T, name string) *testPKI {
	t.Helper()
	cert, key, err := ca.NewAgentCA(ca.AgentCARequest{Domain: "consul", Days: 30})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := &testPKI{dir: dir, caCert: cert, caKey: key}
	p.caFile = p.write(t, "consul-agent-ca.pem", cert)
	return p
}

func (p *testPKI) write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issue signs a certificate for cn, valid for localhost and 127.0.0.1 too,
// as `tls cert create` makes them.
func (p *testPKI) issue(t *testing.T, name, cn string, now time.Time, days int) (certFile, keyFile string) {
	t.Helper()
	cert, key, err := ca.SignAgentCert(ca.AgentCertRequest{
		CACertPEM: p.caCert, CAKeyPEM: p.caKey, CommonName: cn,
		DNSNames: []string{cn, "localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		Days:        days, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name+".pem", cert), p.write(t, name+"-key.pem", key)
}

// tlsConfig is Consul's tls block with mutual TLS on every protocol.
func tlsConfig(caFile, certFile, keyFile string) map[string]any {
	return map[string]any{"tls": map[string]any{
		"defaults": map[string]any{
			"ca_file": caFile, "cert_file": certFile, "key_file": keyFile,
			"verify_incoming": true, "verify_outgoing": true,
		},
		"internal_rpc": map[string]any{"verify_server_hostname": true},
	}}
}

// tlsCluster is three servers with mutual TLS on the server port and the
// HTTPS API (tlsConfig), HTTPS only (ports.http = -1), and the PKI they
// trust. The harness probes every agent of it over HTTPS with the
// operator's certificate.
type tlsCluster struct {
	c      *harness.Cluster
	ports  *harness.PortAllocator
	pki    *testPKI
	leader *harness.Agent
	// The servers share one certificate, the client agents another; user
	// is the operator's (`tls cert create -cli`).
	srvCert, srvKey, cliCert, cliKey, userCert, userKey string
	// extra is merged into every agent's configuration (a gossip key).
	extra map[string]any
}

// startTLSCluster starts the servers and waits for a leader.
func startTLSCluster(t *testing.T, extra map[string]any) *tlsCluster {
	t.Helper()
	tc := &tlsCluster{pki: newTestPKI(t, "pki"), ports: newPorts(t), extra: extra}
	now := time.Now()
	tc.srvCert, tc.srvKey = tc.pki.issue(t, "dc1-server-consul-0", "server.dc1.consul", now, 30)
	tc.cliCert, tc.cliKey = tc.pki.issue(t, "dc1-client-consul-0", "client.dc1.consul", now, 30)
	tc.userCert, tc.userKey = tc.pki.issue(t, "dc1-cli-consul-0", "cli.dc1.consul", now, 30)
	https := &harness.HTTPSConfig{CAFile: tc.pki.caFile, CertFile: tc.userCert, KeyFile: tc.userKey}
	tc.c = harness.StartCluster(t, harness.ClusterConfig{
		Binary: requireBinary(t), Ports: tc.ports, Servers: 3,
		ServerArgs:  configFile(t, "server-tls.json", tc.config(tc.srvCert, tc.srvKey)),
		ServerHTTPS: https, ClientHTTPS: https,
	})
	tc.leader = waitLeader(t, tc.c, clusterStartTimeout)
	return tc
}

func (tc *tlsCluster) config(certFile, keyFile string) map[string]any {
	conf := tlsConfig(tc.pki.caFile, certFile, keyFile)
	maps.Copy(conf, tc.extra)
	return conf
}

// addHTTPSClient adds a client agent that serves the HTTP API over HTTPS
// only (ports.http = -1, the cluster's ClientHTTPS) and returns it with
// its https:// URL.
func (tc *tlsCluster) addHTTPSClient(t *testing.T) (*harness.Agent, string) {
	t.Helper()
	a := tc.c.AddClient(t, configFile(t, "client-tls.json", tc.config(tc.cliCert, tc.cliKey))...)
	return a, a.HTTPURL()
}

// TestTLSCluster: three servers and two clients with mutual TLS on the
// server port (verify_incoming, verify_outgoing, verify_server_hostname),
// the HTTPS API with client certificates and a gossip key; every agent
// serves HTTPS only (ports.http = -1), which plaintext HTTP cannot read. The cluster forms and replicates,
// the official client works over HTTPS with a certificate, and a
// plaintext RPC client, an HTTPS client without a certificate, a server of
// another CA and an agent with another gossip key are refused, with
// nothing they sent in the store; after kill -9 of the leader a new one
// is elected and writes through both clients go on.
func TestTLSCluster(t *testing.T) {
	bin := requireBinary(t)
	ctx := scenarioContext(t)
	tc := startTLSCluster(t, map[string]any{"encrypt": gossipKey1})
	c, pki, ports, leader := tc.c, tc.pki, tc.ports, tc.leader
	now := time.Now()
	client, clientURL := tc.addHTTPSClient(t)
	client2, client2URL := tc.addHTTPSClient(t)
	httpsAddr := strings.TrimPrefix(clientURL, "https://")
	userCert, userKey := tc.userCert, tc.userKey

	cfg := api.DefaultConfig()
	cfg.Address = httpsAddr
	cfg.Scheme = "https"
	cfg.TLSConfig = api.TLSConfig{CAFile: pki.caFile, CertFile: userCert, KeyFile: userKey}
	consul, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitAPILeader(t, consul, leader, "the client agent to reach the leader over TLS")
	if _, err := consul.KV().Put(&api.KVPair{Key: "tls/written", Value: []byte("over https")}, nil); err != nil {
		t.Fatalf("KV put over HTTPS through the client agent: %v", err)
	}
	// Replicated to every server (read on each with ?stale over HTTPS
	// with the operator's certificate).
	for _, s := range c.Servers() {
		eventually(t, 10*time.Second, "replication to "+s.Node(), func() error {
			return kvHas(ctx, s, "tls/written", "over https")
		})
	}
	for _, a := range c.Agents() {
		if l, err := harness.StatusLeader(ctx, a.HTTPAddr()); err == nil {
			t.Errorf("%s answered plaintext HTTP on its API port (leader %q)", a.Node(), l)
		}
	}
	if !client.Running() {
		t.Fatal("client agent stopped")
	}

	t.Run("HTTPS without a client certificate is refused", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(pki.caCert))
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "https://"+httpsAddr+"/v1/kv/tls/nocert", strings.NewReader("x"))
		resp, err := hc.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Fatalf("PUT without a client certificate answered %d", resp.StatusCode)
		}
	})

	t.Run("plaintext RPC is refused", func(t *testing.T) {
		// A raw connection: closed after its first byte, before any
		// request is read.
		conn, err := net.DialTimeout("tcp", leader.ServerAddr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		_, _ = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := conn.Read(make([]byte, 64)); !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("plaintext connection read %d bytes, err %v; want it closed", n, err)
		}
		// And a real client's write, through the internal RPC.
		pool := server.NewConnPool(server.ConnPoolConfig{})
		defer pool.Close()
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var ok bool
		err = structs.MethodKVSApply.Call(callCtx, callerAt{pool, leader.ServerAddr()},
			&structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "tls/plaintext", Value: []byte("x")}}, &ok)
		if err == nil {
			t.Fatal("a plaintext KVS.Apply succeeded")
		}
	})

	t.Run("a server of another CA cannot join", func(t *testing.T) {
		rogue := newTestPKI(t, "rogue")
		rCert, rKey := rogue.issue(t, "rogue-server", "server.dc1.consul", now, 30)
		rp, err := harness.AllocateAgentPorts(ports)
		if err != nil {
			t.Fatal(err)
		}
		var join []string
		for _, s := range c.Servers() {
			join = append(join, s.SerfLANAddr())
		}
		dir := t.TempDir()
		r := harness.StartAgent(t, harness.AgentConfig{
			Binary: bin, Mode: harness.ModeServer, Node: "rogue", DataDir: filepath.Join(dir, "data"),
			LogPath: filepath.Join(dir, "rogue.log"), Ports: rp, BootstrapExpect: 3, RetryJoin: join,
			// The cluster's gossip key: only the CA differs.
			ExtraArgs: append(configFile(t, "rogue-tls.json", tlsConfig(rogue.caFile, rCert, rKey)), "-encrypt", gossipKey1),
		})
		// Gossip lets it in (gossip encryption is separate); Raft must not.
		eventually(t, 30*time.Second, "the leader to see the rogue server in gossip", func() error {
			members, err := consul.Agent().Members(false)
			if err != nil {
				return err
			}
			for _, m := range members {
				if m.Name == "rogue" {
					return nil
				}
			}
			return errors.New("rogue not a member yet")
		})
		// Give the leader several reconcile passes to (wrongly) add it.
		time.Sleep(5 * time.Second)
		peers, err := consul.Status().Peers()
		if err != nil {
			t.Fatal(err)
		}
		if len(peers) != 3 {
			t.Fatalf("raft peers = %v, want the three servers only", peers)
		}
		for _, p := range peers {
			if p == r.ServerAddr() {
				t.Fatalf("rogue server %s is a raft peer: %v", p, peers)
			}
		}
		if err := kvHas(ctx, r, "tls/written", "over https"); err == nil {
			t.Fatal("the rogue server has the cluster's data")
		}
	})

	t.Run("an agent with another gossip key is refused", func(t *testing.T) {
		// Valid certificates, the wrong key: gossip alone keeps it out.
		outsider := outsiderNeverJoins(t, c, c.Servers(),
			append(configFile(t, "outsider-tls.json", tlsConfig(pki.caFile, tc.cliCert, tc.cliKey)), "-encrypt", gossipKey2))
		// It knows no server, so its write goes nowhere.
		if err := newRawClient(t).kvPut(ctx, outsider.HTTPAddr(), "tls/outsider", "x"); err == nil {
			t.Fatal("a write through the outsider was acknowledged")
		}
	})

	// Nothing the refused clients sent reached the store.
	for _, key := range []string{"tls/nocert", "tls/plaintext", "tls/outsider"} {
		if pair, _, err := consul.KV().Get(key, nil); err != nil || pair != nil {
			t.Errorf("key %s = %v, %v; want absent", key, pair, err)
		}
	}

	t.Run("fails over after kill -9 of the leader", func(t *testing.T) {
		if err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
		newLeader := waitLeader(t, c, clusterStartTimeout)
		if newLeader == leader {
			t.Fatalf("%s still leads after kill -9", leader.Node())
		}
		rc := newTLSRawClient(t, userTLSConfig(t, pki, userCert, userKey))
		for i, url := range []string{clientURL, client2URL} {
			key, value := fmt.Sprintf("tls/after-failover-%d", i), "through "+url
			eventually(t, 30*time.Second, "a write through "+url+" after the failover", func() error {
				return rc.kvPut(ctx, url, key, value)
			})
			if err := kvHas(ctx, newLeader, key, value); err != nil {
				t.Error(err)
			}
		}
		if err := kvHas(ctx, newLeader, "tls/written", "over https"); err != nil {
			t.Errorf("the write from before the failover: %v", err)
		}
		if !client.Running() || !client2.Running() {
			t.Fatal("a client agent stopped")
		}
	})
}

// userTLSConfig trusts pki's CA and presents the operator's certificate.
func userTLSConfig(t *testing.T, pki *testPKI, certFile, keyFile string) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(pki.caCert))
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// callerAt calls one server through a pool.
type callerAt struct {
	pool *server.ConnPool
	addr string
}

func (c callerAt) RPC(ctx context.Context, method string, args, reply any) error {
	return c.pool.Call(ctx, c.addr, method, args, reply)
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// kvHas checks key's value with a stale read of a, over HTTPS with the
// harness's client certificate when a serves HTTPS.
func kvHas(ctx context.Context, a *harness.Agent, key, want string) error {
	hc, err := a.HTTPClient()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.HTTPURL()+"/v1/kv/"+key+"?raw&stale", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(b) != want {
		return fmt.Errorf("%s: %d %q", key, resp.StatusCode, b)
	}
	return nil
}

// TestTLSBadMaterialRefusesToStart: each kind of bad material is a
// start-up error naming the key and the file, with a non-zero exit.
func TestTLSBadMaterialRefusesToStart(t *testing.T) {
	bin := requireBinary(t)
	pki := newTestPKI(t, "pki")
	now := time.Now()
	cert, key := pki.issue(t, "server", "server.dc1.consul", now, 30)
	_, otherKey := pki.issue(t, "other", "server.dc1.consul", now, 30)
	expCert, expKey := pki.issue(t, "expired", "server.dc1.consul", now.AddDate(0, 0, -10), 5)
	wrongCert, wrongKey := pki.issue(t, "wrong", "client.dc1.consul", now, 30)
	missing := filepath.Join(pki.dir, "missing.pem")
	rpc := func(certFile, keyFile string) map[string]any {
		return tlsConfig(pki.caFile, certFile, keyFile)
	}
	tests := []struct {
		name string
		conf map[string]any
		want []string
	}{
		{"missing file", rpc(missing, key), []string{"tls.defaults.cert_file", missing}},
		{"key of another certificate", rpc(cert, otherKey), []string{"tls.defaults.key_file", otherKey, "does not match"}},
		{"expired certificate", rpc(expCert, expKey), []string{"tls.defaults.cert_file", expCert, "expired"}},
		{"wrong server name", rpc(wrongCert, wrongKey), []string{"tls.defaults.cert_file", wrongCert, "server.dc1.consul"}},
		{"deprecated key, missing CA", map[string]any{"ca_file": missing, "verify_incoming": true}, []string{"ca_file " + missing}},
	}
	ports := newPorts(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ap, err := harness.AllocateAgentPorts(ports)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			args := append([]string{"agent", "-dev", "-node", "bad",
				"-http-port", strconv.Itoa(ap.HTTP), "-grpc-port", strconv.Itoa(ap.GRPC),
				"-server-port", strconv.Itoa(ap.Server), "-serf-lan-port", strconv.Itoa(ap.SerfLAN), "-dns-port", "-1"},
				configFile(t, "bad.json", tt.conf)...)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("agent exited with %v, want a non-zero status; output:\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not name %q:\n%s", w, out)
				}
			}
		})
	}
}
