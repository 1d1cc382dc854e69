package server

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

// waitForCA waits until the server reports an active root and returns the
// roots.
func waitForCA(t testing.TB, s *Server) *structs.IndexedCARoots {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var roots structs.IndexedCARoots
		err := structs.MethodConnectCARoots.Call(context.Background(), s, &structs.DCSpecificRequest{}, &roots)
		if err == nil && roots.ActiveRootID != "" {
			return &roots
		}
		if time.Now().After(deadline) {
			t.Fatalf("no active CA root: %v %+v", err, roots)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signFor signs a fresh CSR for service in the roots' trust domain.
func signFor(t testing.TB, s *Server, trustDomain, dc, service string) (*structs.IssuedCert, error) {
	t.Helper()
	csr, _, err := ca.NewLeafCSR(connect.NewServiceID(trustDomain, dc, service))
	if err != nil {
		t.Fatal(err)
	}
	var out structs.IssuedCert
	err = structs.MethodConnectCASign.Call(context.Background(), s, &structs.CASignRequest{CSR: csr}, &out)
	return &out, err
}

func poolOf(t testing.TB, roots structs.CARoots) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	for _, r := range roots {
		if !p.AppendCertsFromPEM([]byte(r.RootCert)) {
			t.Fatalf("root %s does not parse", r.ID)
		}
	}
	return p
}

func setCAConfig(t testing.TB, s *Server, cfg map[string]interface{}) error {
	t.Helper()
	return structs.MethodConnectCAConfigurationSet.Call(context.Background(), s, &structs.CARequest{Config: &structs.CAConfiguration{Provider: "consul", Config: cfg}}, &struct{}{})
}

// TestConnectCABootstrapClusterID: a configured cluster ID
// (connect.ca_config.cluster_id) is the trust domain of the CA the leader
// bootstraps, as Consul's test servers rely on.
func TestConnectCABootstrapClusterID(t *testing.T) {
	const id = "11111111-2222-3333-4444-555555555555"
	s := startTestCluster(t, 1, false, func(ts *testServer) { ts.connect.ClusterID = id })[0].srv
	if roots := waitForCA(t, s); roots.TrustDomain != id+".consul" {
		t.Fatalf("trust domain %q, want %s.consul", roots.TrustDomain, id)
	}
}

func TestConnectCABootstrapAndSign(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	roots := waitForCA(t, s)
	if len(roots.Roots) != 1 || !strings.HasSuffix(roots.TrustDomain, ".consul") || len(roots.TrustDomain) != 36+len(".consul") {
		t.Fatalf("roots = %+v", roots)
	}
	root := roots.Roots[0]
	cert, err := ca.ParseCert(root.RootCert)
	if err != nil {
		t.Fatal(err)
	}
	if root.ID != roots.ActiveRootID || root.ID != ca.Fingerprint(cert) || root.PrivateKeyType != "ec" || root.PrivateKeyBits != 256 ||
		cert.URIs[0].String() != "spiffe://"+roots.TrustDomain || root.ExternalTrustDomain+".consul" != roots.TrustDomain {
		t.Fatalf("root %+v (URI %v)", root, cert.URIs)
	}
	var cfg structs.CAConfiguration
	rpc(t, s, structs.MethodConnectCAConfigurationGet, &structs.DCSpecificRequest{}, &cfg)
	if cfg.Provider != "consul" || cfg.Config["LeafCertTTL"] != "72h" || cfg.ClusterID+".consul" != roots.TrustDomain {
		t.Fatalf("config %+v", cfg)
	}

	// A second bootstrap by the same (or a new) leader changes nothing.
	before := s.fsm.State().LastIndex()
	if err := s.bootstrapConnectCA(); err != nil {
		t.Fatal(err)
	}
	if s.fsm.State().LastIndex() != before {
		t.Fatal("bootstrap with an existing root wrote to Raft")
	}

	seen := map[string]bool{}
	for i := range 5 {
		leaf, err := signFor(t, s, roots.TrustDomain, "dc1", "web")
		if err != nil {
			t.Fatalf("sign %d: %v", i, err)
		}
		c, err := ca.ParseCert(leaf.CertPEM)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: poolOf(t, roots.Roots), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatal(err)
		}
		want := "spiffe://" + roots.TrustDomain + "/ns/default/dc/dc1/svc/web"
		if leaf.ServiceURI != want || leaf.Service != "web" || leaf.ModifyIndex == 0 || c.NotAfter.Sub(c.NotBefore) != 72*time.Hour {
			t.Fatalf("leaf %+v", leaf)
		}
		if seen[leaf.SerialNumber] {
			t.Fatalf("serial %s issued twice", leaf.SerialNumber)
		}
		seen[leaf.SerialNumber] = true
	}

	// Requests the CA must refuse.
	cases := []struct {
		name, td, dc, want string
	}{
		{"other trust domain", "other.consul", "dc1", "SPIFFE ID in CSR from a different trust domain: other.consul"},
		{"other datacenter", roots.TrustDomain, "dc2", "SPIFFE ID in CSR from a different datacenter: dc2, we are dc1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := signFor(t, s, tc.td, tc.dc, "web")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	var out structs.IssuedCert
	if err := structs.MethodConnectCASign.Call(context.Background(), s, &structs.CASignRequest{CSR: "junk"}, &out); !errors.Is(err, ca.ErrInvalidCSR) {
		t.Fatalf("junk CSR: %v", err)
	}
}

func TestConnectCAConfigurationSet(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	roots := waitForCA(t, s)
	firstRoot := roots.ActiveRootID

	// Invalid configurations are refused with Consul's messages and
	// change nothing.
	bad := []struct {
		cfg  map[string]interface{}
		want string
	}{
		{map[string]interface{}{"LeafCertTTL": "10m"}, "error configuring provider: leaf cert TTL must be greater or equal than 1h0m0s"},
		{map[string]interface{}{"PrivateKeyType": "rsa", "PrivateKeyBits": 1024}, "error configuring provider: RSA key length must be 2048 or 4096 bits"},
	}
	for _, b := range bad {
		if err := setCAConfig(t, s, b.cfg); err == nil || err.Error() != b.want {
			t.Fatalf("config %v: %v, want %q", b.cfg, err, b.want)
		}
	}
	err := structs.MethodConnectCAConfigurationSet.Call(context.Background(), s, &structs.CARequest{Config: &structs.CAConfiguration{Provider: "vault"}}, &struct{}{})
	if err == nil || err.Error() != `could not initialize provider: unknown CA provider "vault"` {
		t.Fatalf("vault: %v", err)
	}
	err = structs.MethodConnectCAConfigurationSet.Call(context.Background(), s, &structs.CARequest{Config: &structs.CAConfiguration{Provider: "consul", State: map[string]string{"a": "b"}}}, &struct{}{})
	if !errors.Is(err, structs.ErrCAStateReadOnly) {
		t.Fatalf("state: %v", err)
	}

	// A TTL change keeps the root.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(setCAConfig(t, s, map[string]interface{}{"LeafCertTTL": "2h", "PrivateKeyType": "ec", "PrivateKeyBits": 256}))
	roots = waitForCA(t, s)
	if roots.ActiveRootID != firstRoot || len(roots.Roots) != 1 {
		t.Fatalf("TTL change rotated: %+v", roots)
	}
	leaf, err := signFor(t, s, roots.TrustDomain, "dc1", "web")
	must(err)
	if d := leaf.ValidBefore.Sub(leaf.ValidAfter); d != 2*time.Hour {
		t.Fatalf("leaf TTL %s", d)
	}
	oldLeaf, _ := ca.ParseCert(leaf.CertPEM)

	// A new key type rotates: two roots, the new one active and
	// cross-signed by the old key.
	must(setCAConfig(t, s, map[string]interface{}{"LeafCertTTL": "2h", "PrivateKeyType": "ec", "PrivateKeyBits": 384}))
	roots = waitForCA(t, s)
	if len(roots.Roots) != 2 || roots.ActiveRootID == firstRoot || roots.Roots[0].ID != firstRoot || roots.Roots[0].Active {
		t.Fatalf("after rotation: %+v", roots)
	}
	active := roots.Roots.Active()
	if active.PrivateKeyBits != 384 || len(active.IntermediateCerts) != 1 {
		t.Fatalf("new root %+v", active)
	}
	// The old leaf still verifies against the roots list.
	if _, err := oldLeaf.Verify(x509.VerifyOptions{Roots: poolOf(t, roots.Roots)}); err != nil {
		t.Fatalf("old leaf after rotation: %v", err)
	}
	// New leaves come from the new root and chain to the old one too.
	leaf, err = signFor(t, s, roots.TrustDomain, "dc1", "web")
	must(err)
	newLeaf, _ := ca.ParseCert(leaf.CertPEM)
	if connect.HexString(newLeaf.AuthorityKeyId) != active.SigningKeyID {
		t.Fatal("new leaf not signed by the new root")
	}
	inter := x509.NewCertPool()
	inter.AppendCertsFromPEM([]byte(leaf.CertPEM))
	if _, err := newLeaf.Verify(x509.VerifyOptions{Roots: poolOf(t, roots.Roots[:1]), Intermediates: inter}); err != nil {
		t.Fatalf("new leaf against the old root only: %v", err)
	}

	// An operator-supplied key rotates too, is never read back, and a
	// read-modify-write of the redacted configuration changes nothing.
	_, keyPEM, _ := ca.GenerateKey("rsa", 2048)
	must(setCAConfig(t, s, map[string]interface{}{"LeafCertTTL": "2h", "PrivateKey": keyPEM}))
	roots = waitForCA(t, s)
	if len(roots.Roots) != 3 || roots.Roots.Active().PrivateKeyType != "rsa" {
		t.Fatalf("supplied key: %+v", roots)
	}
	var cfg structs.CAConfiguration
	rpc(t, s, structs.MethodConnectCAConfigurationGet, &structs.DCSpecificRequest{}, &cfg)
	if shown, _ := cfg.Config["PrivateKey"].(string); !strings.HasPrefix(shown, redactedPrefix) || strings.Contains(shown, "PRIVATE KEY") {
		t.Fatalf("config read shows %q", shown)
	}
	before := s.fsm.State().LastIndex()
	must(structs.MethodConnectCAConfigurationSet.Call(context.Background(), s, &structs.CARequest{Config: &cfg}, &struct{}{}))
	if s.fsm.State().LastIndex() != before {
		t.Fatal("writing back the read configuration changed something")
	}
}

func TestConnectCARateLimit(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	roots := waitForCA(t, s)
	if err := setCAConfig(t, s, map[string]interface{}{"CSRMaxPerSecond": 2}); err != nil {
		t.Fatal(err)
	}
	var (
		mu              sync.Mutex
		ok, limited     int
		wg              sync.WaitGroup
		unexpectedError error
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := signFor(t, s, roots.TrustDomain, "dc1", "web")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, structs.ErrRateLimited):
				limited++
			default:
				unexpectedError = err
			}
		}()
	}
	wg.Wait()
	// 2/s with a queue of 5 s serves eleven of twenty (one at once, ten
	// queued) and refuses the rest, rather than refusing all but one.
	if unexpectedError != nil || ok < 10 || ok > 12 || limited < 8 {
		t.Fatalf("ok %d limited %d err %v", ok, limited, unexpectedError)
	}
	// 0 in the CA configuration disables the limit.
	if err := setCAConfig(t, s, map[string]interface{}{"CSRMaxPerSecond": 0}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := signFor(t, s, roots.TrustDomain, "dc1", "web"); err != nil {
			t.Fatalf("unlimited sign %d: %v", i, err)
		}
	}
}

// The keys are replicated: after the leader dies, the new leader keeps
// the same root (no second bootstrap) and signs with it.
func TestConnectCALeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 10*time.Second)
	roots := waitForCA(t, leader.srv)
	leader.stop(t)
	var rest []*testServer
	for _, ts := range servers {
		if ts != leader {
			rest = append(rest, ts)
		}
	}
	newLeader := waitForLeader(t, rest, 15*time.Second)
	leaf, err := signFor(t, newLeader.srv, roots.TrustDomain, "dc1", "db")
	if err != nil {
		t.Fatal(err)
	}
	after := waitForCA(t, newLeader.srv)
	if after.ActiveRootID != roots.ActiveRootID || len(after.Roots) != 1 {
		t.Fatalf("roots changed on failover: %+v -> %+v", roots, after)
	}
	c, _ := ca.ParseCert(leaf.CertPEM)
	if _, err := c.Verify(x509.VerifyOptions{Roots: poolOf(t, after.Roots)}); err != nil {
		t.Fatal(err)
	}
	// A follower answers stale reads of the roots from its own store.
	var stale structs.IndexedCARoots
	rpc(t, rest[0].srv, structs.MethodConnectCARoots, &structs.DCSpecificRequest{QueryOptions: structs.QueryOptions{AllowStale: true}}, &stale)
	if stale.ActiveRootID != roots.ActiveRootID {
		t.Fatalf("stale roots %+v", stale)
	}
}

func TestTokenBucket(t *testing.T) {
	var b tokenBucket
	now := time.Unix(1000, 0)
	if d, ok := b.reserve(now, 10, time.Second); !ok || d != 0 {
		t.Fatalf("first token: %s %v", d, ok)
	}
	// The next token is 100 ms away at 10/s; the one after 200 ms.
	if d, ok := b.reserve(now, 10, time.Second); !ok || d != 100*time.Millisecond {
		t.Fatalf("second token: %s %v", d, ok)
	}
	if d, ok := b.reserve(now, 10, 150*time.Millisecond); ok {
		t.Fatalf("third token within 150ms: %s", d)
	}
	if d, ok := b.reserve(now, 10, time.Second); !ok || d != 200*time.Millisecond {
		t.Fatalf("third token: %s %v", d, ok)
	}
	// Tokens refill with time but never beyond the burst of one.
	later := now.Add(10 * time.Second)
	if d, ok := b.reserve(later, 10, 0); !ok || d != 0 {
		t.Fatalf("after refill: %s %v", d, ok)
	}
	if _, ok := b.reserve(later, 10, 0); ok {
		t.Fatal("burst larger than one")
	}
	// A new rate starts afresh.
	if d, ok := b.reserve(later, 100, 0); !ok || d != 0 {
		t.Fatalf("new rate: %s %v", d, ok)
	}
	// A waiter whose context ends gives up and returns its token.
	if !b.wait(context.Background(), 0.001, time.Hour) {
		t.Fatal("first token at a new rate")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.wait(ctx, 0.001, time.Hour) {
		t.Fatal("cancelled wait succeeded")
	}
	if b.tokens < -0.001 || b.tokens > 0.001 {
		t.Fatalf("tokens after an abandoned wait = %v", b.tokens)
	}
}

func TestPrunableRoots(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	roots := structs.CARoots{
		{ID: "active", Active: true, NotAfter: now.Add(-time.Hour)},
		{ID: "fresh", RotatedOutAt: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)},
		{ID: "retired", RotatedOutAt: now.Add(-145 * time.Hour), NotAfter: now.Add(time.Hour)},
		{ID: "expired", RotatedOutAt: now.Add(-time.Hour), NotAfter: now.Add(-time.Second)},
	}
	got := prunableRoots(roots, 72*time.Hour, now)
	if len(got) != 2 || got[0].ID != "retired" || got[1].ID != "expired" {
		t.Fatalf("prunable = %+v", got)
	}
}

func TestRedaction(t *testing.T) {
	stored := &structs.CAConfiguration{Config: map[string]interface{}{"PrivateKey": "SECRET", "LeafCertTTL": "1h"}}
	read := &structs.CAConfiguration{Config: copyConfigMap(stored.Config)}
	redactConfig(read)
	if read.Config["PrivateKey"] == "SECRET" || stored.Config["PrivateKey"] != "SECRET" {
		t.Fatalf("redacted %v, stored %v", read.Config, stored.Config)
	}
	unredactConfig(read, stored)
	if read.Config["PrivateKey"] != "SECRET" {
		t.Fatal("placeholder not restored")
	}
	forged := &structs.CAConfiguration{Config: map[string]interface{}{"PrivateKey": redactedPrefix + "00"}}
	unredactConfig(forged, stored)
	if forged.Config["PrivateKey"] == "SECRET" {
		t.Fatal("a placeholder for another key restored the stored key")
	}
	if !sameConfigMap(map[string]interface{}{"b": int64(256)}, map[string]interface{}{"b": 256.0}) {
		t.Fatal("msgpack and JSON numbers differ")
	}
}
