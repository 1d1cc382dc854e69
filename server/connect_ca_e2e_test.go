package server

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/agent/leafcert"
	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

// End to end: the official Consul client against the HTTP API of a real
// server, with the agent's leaf manager signing through it.

// connectHTTP serves the HTTP API of s, with a leaf manager, on a loopback
// port and returns an official client for it.
func connectHTTP(t testing.TB, s *Server) (*api.Client, *leafcert.Manager) {
	t.Helper()
	m, err := leafcert.New(leafcert.Config{RPC: s, Datacenter: "dc1", Logger: testLogger(t, "leafcert"),
		RootChangeJitter: 300 * time.Millisecond, RateLimitRetry: 300 * time.Millisecond, RetryMin: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	h, err := httpapi.New(httpapi.Config{RPC: s, NodeName: s.cfg.NodeName, Datacenter: "dc1", LeafCerts: httpLeaves{m}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		m.Stop()
	})
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

// httpLeaves serves the HTTP API from the leaf manager, as the agent does.
type httpLeaves struct{ m *leafcert.Manager }

func (h httpLeaves) GetWithMeta(ctx context.Context, service, token string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, httpapi.LeafMeta, error) {
	cert, meta, err := h.m.GetWithMeta(ctx, service, token, minIndex, wait)
	return cert, httpapi.LeafMeta{Hit: meta.Hit, Age: meta.Age}, err
}

// verifyLeaf checks an issued leaf as a TLS peer trusting roots would, with
// the chain the leaf was issued with, and that its key matches and its
// SPIFFE ID is exact. It returns the parsed leaf.
func verifyLeaf(t testing.TB, leaf *api.LeafCert, roots []*api.CARoot, wantURI string) *x509.Certificate {
	t.Helper()
	pool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		if !pool.AppendCertsFromPEM([]byte(r.RootCertPEM)) {
			t.Fatalf("root %s does not parse", r.ID)
		}
	}
	var certs []*x509.Certificate
	for rest := []byte(leaf.CertPEM); ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatal("leaf has no certificate")
	}
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	c := certs[0]
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("leaf %s does not verify: %v", leaf.SerialNumber, err)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != wantURI || leaf.ServiceURI != wantURI {
		t.Fatalf("leaf URI %v / %q, want %q", c.URIs, leaf.ServiceURI, wantURI)
	}
	key, err := ca.ParseSigner(leaf.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(c.PublicKey) {
		t.Fatal("leaf private key does not match its certificate")
	}
	if connect.HexString(c.SerialNumber.Bytes()) != leaf.SerialNumber {
		t.Fatalf("serial %s vs certificate %x", leaf.SerialNumber, c.SerialNumber)
	}
	return c
}

func activeRoot(t testing.TB, roots *api.CARootList) *api.CARoot {
	t.Helper()
	for _, r := range roots.Roots {
		if r.Active && r.ID == roots.ActiveRootID {
			return r
		}
	}
	t.Fatalf("no active root in %+v", roots)
	return nil
}

func TestConnectLeafOverHTTP(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	waitForCA(t, s)
	client, _ := connectHTTP(t, s)

	roots, meta, err := client.Connect().CARoots(nil)
	if err != nil {
		t.Fatal(err)
	}
	root := activeRoot(t, roots)
	if len(roots.Roots) != 1 || meta.LastIndex == 0 || roots.TrustDomain == "" {
		t.Fatalf("roots %+v meta %+v", roots, meta)
	}
	agentRoots, _, err := client.Agent().ConnectCARoots(nil)
	if err != nil || agentRoots.ActiveRootID != roots.ActiveRootID {
		t.Fatalf("agent roots %+v %v", agentRoots, err)
	}

	leaf, meta, err := client.Agent().ConnectCALeaf("web", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "spiffe://" + roots.TrustDomain + "/ns/default/dc/dc1/svc/web"
	c := verifyLeaf(t, leaf, []*api.CARoot{root}, want)
	if c.NotAfter.Sub(c.NotBefore) != 72*time.Hour || meta.LastIndex != leaf.ModifyIndex || leaf.Service != "web" {
		t.Fatalf("leaf %+v meta %+v", leaf, meta)
	}
	again, _, err := client.Agent().ConnectCALeaf("web", nil)
	if err != nil || again.SerialNumber != leaf.SerialNumber {
		t.Fatalf("second request %v: serial %s, want the cached %s", err, again.SerialNumber, leaf.SerialNumber)
	}

	cfg, _, err := client.Connect().CAGetConfig(nil)
	if err != nil || cfg.Provider != "consul" || cfg.Config["LeafCertTTL"] != "72h" {
		t.Fatalf("config %+v %v", cfg, err)
	}
	auth, err := client.Agent().ConnectAuthorize(&api.AgentAuthorizeParams{Target: "db", ClientCertURI: want, ClientCertSerial: leaf.SerialNumber})
	if err != nil || !auth.Authorized {
		t.Fatalf("authorize %+v %v", auth, err)
	}
}

// Rotation on a 3-server cluster, through a follower's HTTP API: after
// the CA configuration changes the roots list has the new active root and
// the old one, a leaf issued before still verifies, a blocking leaf query
// returns a new leaf signed by the new root, and no call fails meanwhile.
func TestConnectCARotationThreeServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 10*time.Second)
	var follower *testServer
	for _, ts := range servers {
		if ts != leader {
			follower = ts
			break
		}
	}
	waitForCA(t, leader.srv)
	client, _ := connectHTTP(t, follower.srv)

	before, _, err := client.Connect().CARoots(nil)
	if err != nil {
		t.Fatal(err)
	}
	oldRoot := activeRoot(t, before)
	services := []string{"web", "api", "db"}
	uri := func(svc string) string { return "spiffe://" + before.TrustDomain + "/ns/default/dc/dc1/svc/" + svc }
	oldLeaves := map[string]*api.LeafCert{}
	for _, svc := range services {
		l, _, err := client.Agent().ConnectCALeaf(svc, nil)
		if err != nil {
			t.Fatal(err)
		}
		verifyLeaf(t, l, []*api.CARoot{oldRoot}, uri(svc))
		oldLeaves[svc] = l
	}

	// Callers keep reading leaves and roots throughout the change.
	var (
		calls, failures atomic.Int64
		firstFailure    atomic.Value
		stop            = make(chan struct{})
		wg              sync.WaitGroup
	)
	for i, svc := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				if i%2 == 0 {
					_, _, err = client.Agent().ConnectCALeaf(svc, nil)
				} else {
					_, _, err = client.Connect().CARoots(nil)
				}
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	type blocked struct {
		leaf *api.LeafCert
		err  error
		at   time.Time
	}
	wakeup := make(chan blocked, 1)
	go func() {
		l, _, err := client.Agent().ConnectCALeaf("web", &api.QueryOptions{WaitIndex: oldLeaves["web"].ModifyIndex, WaitTime: 30 * time.Second})
		wakeup <- blocked{l, err, time.Now()}
	}()
	time.Sleep(200 * time.Millisecond)

	rotatedAt := time.Now()
	if _, err := client.Connect().CASetConfig(&api.CAConfig{Provider: "consul", Config: map[string]interface{}{
		"LeafCertTTL": "72h", "PrivateKeyType": "rsa", "PrivateKeyBits": 2048,
	}}, nil); err != nil {
		t.Fatal(err)
	}
	after, _, err := client.Connect().CARoots(nil)
	if err != nil {
		t.Fatal(err)
	}
	newRoot := activeRoot(t, after)
	if len(after.Roots) != 2 || newRoot.ID == oldRoot.ID || after.TrustDomain != before.TrustDomain {
		t.Fatalf("roots after rotation: %+v", after)
	}
	var oldListed bool
	for _, r := range after.Roots {
		oldListed = oldListed || (r.ID == oldRoot.ID && !r.Active)
	}
	if !oldListed {
		t.Fatal("old root not kept in the roots list")
	}
	// Leaves issued before still verify against the roots list.
	for svc, l := range oldLeaves {
		verifyLeaf(t, l, after.Roots, uri(svc))
	}

	var got blocked
	select {
	case got = <-wakeup:
	case <-time.After(20 * time.Second):
		t.Fatal("blocking leaf query did not return after the rotation")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	c := verifyLeaf(t, got.leaf, []*api.CARoot{newRoot}, uri("web"))
	if got.leaf.SerialNumber == oldLeaves["web"].SerialNumber || got.leaf.ModifyIndex <= oldLeaves["web"].ModifyIndex {
		t.Fatalf("blocking query returned %+v", got.leaf)
	}
	if !isSignedBy(c, after, newRoot.ID) || c.SignatureAlgorithm != x509.SHA256WithRSA {
		t.Fatalf("new leaf signed with %s, want the new RSA root", c.SignatureAlgorithm)
	}
	// Peers that only know the old root accept it through the
	// cross-signed intermediate it carries.
	verifyLeaf(t, got.leaf, []*api.CARoot{oldRoot}, uri("web"))
	t.Logf("blocking leaf query woke %s after the rotation request", got.at.Sub(rotatedAt))

	// Every service moves to the new root.
	deadline := time.Now().Add(10 * time.Second)
	for _, svc := range services {
		for {
			l, _, err := client.Agent().ConnectCALeaf(svc, nil)
			if err != nil {
				t.Fatal(err)
			}
			lc := verifyLeaf(t, l, after.Roots, uri(svc))
			if isSignedBy(lc, after, newRoot.ID) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds a leaf of the old root", svc)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	close(stop)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed during the rotation; first: %v", n, calls.Load(), firstFailure.Load())
	}
	t.Logf("%d calls during the rotation, none failed", calls.Load())
}

// isSignedBy reports whether a leaf's issuer is the root with rootID.
func isSignedBy(leaf *x509.Certificate, roots *api.CARootList, rootID string) bool {
	for _, r := range roots.Roots {
		if r.ID != rootID {
			continue
		}
		rc, err := ca.ParseCert(r.RootCertPEM)
		return err == nil && leaf.CheckSignatureFrom(rc) == nil
	}
	return false
}
