package integration

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/integration/harness"
	"github.com/trellis-mesh/trellis/structs"
)

// TestAutoEncrypt: two servers with mutual TLS on the server port
// (verify_incoming, verify_outgoing, verify_server_hostname) and
// auto_encrypt.allow_tls; a client with auto_encrypt.tls and only the CA
// file gets its certificate from them, signed by the Connect CA, joins,
// serves HTTPS with it, registers a service and reads it back. A client
// without auto_encrypt and without a certificate is refused: the server
// port answers its calls with permission denied and its service never
// reaches the catalog.
func TestAutoEncrypt(t *testing.T) {
	ctx := scenarioContext(t)
	pki, ports := newTestPKI(t, "pki"), newPorts(t)
	srvCert, srvKey := pki.issue(t, "dc1-server-consul-0", "server.dc1.consul", time.Now(), 30)
	serverConf := tlsConfig(pki.caFile, srvCert, srvKey)
	serverConf["auto_encrypt"] = map[string]any{"allow_tls": true}
	c := harness.StartCluster(t, harness.ClusterConfig{
		Binary: requireBinary(t), Ports: ports, Servers: 2,
		ServerArgs: configFile(t, "server-tls.json", serverConf),
	})
	leader := waitLeader(t, c, clusterStartTimeout)
	// Gossip has told a new client nothing: it asks the server port of
	// its retry_join hosts, which must be given when not the default.
	_, serverPort, err := net.SplitHostPort(c.Servers()[0].ServerAddr())
	if err != nil {
		t.Fatal(err)
	}

	// Short leaves, before the client asks for its certificate, so that
	// its renewal is seen below: LeafCertTTL under SkipValidate (Consul's
	// test-only switch past the 1 h minimum); leaves are backdated a
	// minute, so 80 s leaves one 20 s of validity.
	leaderAPI, err := api.NewClient(&api.Config{Address: leader.HTTPAddr()})
	if err != nil {
		t.Fatal(err)
	}
	// The leader sets the CA up after its barrier: until then the CA
	// answers that it is uninitialized.
	eventually(t, clusterStartTimeout, "the CA configuration changed", func() error {
		caConf, _, err := leaderAPI.Connect().CAGetConfig(nil)
		if err != nil {
			return err
		}
		caConf.Config["LeafCertTTL"], caConf.Config["SkipValidate"] = "80s", true
		_, err = leaderAPI.Connect().CASetConfig(caConf, nil)
		return err
	})

	httpsPort, err := ports.Port()
	if err != nil {
		t.Fatal(err)
	}
	clientConf := map[string]any{
		"auto_encrypt": map[string]any{"tls": true},
		"tls": map[string]any{
			"defaults":     map[string]any{"ca_file": pki.caFile},
			"internal_rpc": map[string]any{"verify_server_hostname": true},
		},
	}
	client := c.AddClient(t, append(configFile(t, "client-ae.json", clientConf),
		"-server-port", serverPort, "-http-port", "-1", "-https-port", strconv.Itoa(httpsPort))...)

	// The client's HTTPS certificate is its auto_encrypt one: the Connect
	// CA's roots verify it.
	var roots structs.IndexedCARoots
	eventually(t, 30*time.Second, "the Connect CA roots", func() error {
		if err := harness.GetJSON(ctx, leader.HTTPAddr(), "/v1/connect/ca/roots", &roots); err != nil {
			return err
		}
		if len(roots.Roots) == 0 {
			return fmt.Errorf("no roots yet")
		}
		return nil
	})
	pool := x509.NewCertPool()
	for _, r := range roots.Roots {
		pool.AppendCertsFromPEM([]byte(r.RootCert))
	}
	httpsAddr := net.JoinHostPort(harness.Loopback, strconv.Itoa(httpsPort))
	cfg := api.DefaultConfig()
	cfg.Address, cfg.Scheme = httpsAddr, "https"
	cfg.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}}
	consul, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitAPILeader(t, consul, leader, "the auto_encrypt client to reach the leader")
	peer := httpsPeer(t, httpsAddr, pool)
	wantURI := "spiffe://" + roots.TrustDomain + "/agent/client/dc/dc1/id/"
	if len(peer.URIs) != 1 || !strings.HasPrefix(peer.URIs[0].String(), wantURI) {
		t.Fatalf("HTTPS certificate URIs %v, want %s<node id>", peer.URIs, wantURI)
	}

	if err := consul.Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "web", ID: "web-1", Port: 8080}); err != nil {
		t.Fatalf("register through the auto_encrypt client: %v", err)
	}
	eventually(t, 30*time.Second, "the service in the catalog", func() error {
		svcs, _, err := consul.Catalog().Service("web", "", nil)
		if err != nil {
			return err
		}
		if len(svcs) != 1 || svcs[0].Node != client.Node() || svcs[0].ServiceID != "web-1" {
			return fmt.Errorf("catalog web = %+v", svcs)
		}
		return nil
	})

	t.Run("the certificate is renewed before it expires", func(t *testing.T) {
		if life := peer.NotAfter.Sub(peer.NotBefore); life != 80*time.Second {
			t.Fatalf("the first certificate lives %s, want the CA's 80s", life)
		}
		var renewed *x509.Certificate
		eventually(t, 60*time.Second, "a renewed certificate", func() error {
			renewed = httpsPeer(t, httpsAddr, pool)
			if renewed.SerialNumber.Cmp(peer.SerialNumber) == 0 {
				return fmt.Errorf("still serial %s", peer.SerialNumber)
			}
			return nil
		})
		// NotBefore is the signing time less the minute of backdating.
		if signed := renewed.NotBefore.Add(time.Minute); !signed.Before(peer.NotAfter) {
			t.Fatalf("renewal signed at %s, not before the first certificate expired at %s", signed, peer.NotAfter)
		}
		time.Sleep(time.Until(peer.NotAfter) + time.Second)
		// Past the first certificate's expiry, the client still reaches
		// the servers: a write through it lands in the catalog.
		if err := consul.Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "late", ID: "late-1", Port: 8082}); err != nil {
			t.Fatalf("register after the first certificate expired: %v", err)
		}
		eventually(t, 30*time.Second, "the late service in the catalog", func() error {
			svcs, _, err := leaderAPI.Catalog().Service("late", "", nil)
			if err != nil {
				return err
			}
			if len(svcs) != 1 {
				return fmt.Errorf("catalog late = %+v", svcs)
			}
			return nil
		})
	})

	t.Run("a client without auto_encrypt and without a certificate is refused", func(t *testing.T) {
		bare := c.AddClient(t, configFile(t, "client-bare.json", map[string]any{
			"tls": map[string]any{"defaults": map[string]any{"ca_file": pki.caFile, "verify_outgoing": true}},
		})...)
		// It gossips with the servers, so it tries its RPCs; the server
		// port answers them with permission denied.
		eventually(t, 30*time.Second, "the bare client to see the servers", func() error {
			var members []map[string]any
			if err := harness.GetJSON(ctx, bare.HTTPAddr(), "/v1/agent/members", &members); err != nil {
				return err
			}
			if len(members) < 3 {
				return fmt.Errorf("%d members", len(members))
			}
			return nil
		})
		// Its own registration never reaches the catalog (the leader
		// lists the node itself from gossip, as Consul's does).
		bareAPI, err := api.NewClient(&api.Config{Address: bare.HTTPAddr()})
		if err != nil {
			t.Fatal(err)
		}
		if err := bareAPI.Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "bare", ID: "bare-1", Port: 8081}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		var leaderSeen string
		if err := harness.GetJSON(ctx, bare.HTTPAddr(), "/v1/status/leader", &leaderSeen); err == nil && leaderSeen != "" {
			t.Fatalf("the bare client read the leader %q through the servers", leaderSeen)
		}
		var svcs []map[string]any
		if err := harness.GetJSON(ctx, leader.HTTPAddr(), "/v1/catalog/service/bare", &svcs); err != nil {
			t.Fatal(err)
		}
		if len(svcs) != 0 {
			t.Fatalf("the bare client's service reached the catalog: %v", svcs)
		}
	})
}

// httpsPeer is the certificate the HTTPS listener at addr presents.
func httpsPeer(t *testing.T, addr string, roots *x509.CertPool) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0]
}

// waitAPILeader waits until the agent behind consul reports leader.
func waitAPILeader(t *testing.T, consul *api.Client, leader *harness.Agent, what string) {
	t.Helper()
	eventually(t, 60*time.Second, what, func() error {
		got, err := consul.Status().Leader()
		if err != nil {
			return err
		}
		if got != leader.ServerAddr() {
			return fmt.Errorf("leader %q, want %q", got, leader.ServerAddr())
		}
		return nil
	})
}
