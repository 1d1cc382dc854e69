package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // checking Consul's SHA-1 fingerprint
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

const testCluster = "11111111-2222-3333-4444-555555555555"

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name    string
		raw     map[string]interface{}
		check   func(*Config) bool
		wantErr string
	}{
		{name: "defaults", raw: nil, check: func(c *Config) bool {
			return c.LeafCertTTL == 72*time.Hour && c.RootCertTTL == 87600*time.Hour && c.PrivateKeyType == "ec" &&
				c.PrivateKeyBits == 256 && !c.CSRMaxPerSecondSet
		}},
		{name: "default map", raw: DefaultConfigMap(), check: func(c *Config) bool {
			return c.LeafCertTTL == DefaultLeafCertTTL && c.RootCertTTL == DefaultRootCertTTL &&
				c.IntermediateCertTTL == DefaultIntermediateCertTTL && c.PrivateKeyBits == 256 && c.PrivateKeyType == "ec"
		}},
		{name: "json numbers and case", raw: map[string]interface{}{"leafcertttl": "2h", "PrivateKeyType": "rsa", "PrivateKeyBits": 2048.0, "CSRMaxPerSecond": 0.0},
			check: func(c *Config) bool {
				return c.LeafCertTTL == 2*time.Hour && c.PrivateKeyType == "rsa" && c.PrivateKeyBits == 2048 && c.CSRMaxPerSecondSet && c.CSRMaxPerSecond == 0
			}},
		{name: "msgpack ints and snake case", raw: map[string]interface{}{"private_key_bits": int64(384), "leaf_cert_ttl": int64(time.Hour)},
			check: func(c *Config) bool { return c.PrivateKeyBits == 384 && c.LeafCertTTL == time.Hour }},
		{name: "skip validate", raw: map[string]interface{}{"LeafCertTTL": "1s", "SkipValidate": true},
			check: func(c *Config) bool { return c.LeafCertTTL == time.Second }},
		{name: "short leaf", raw: map[string]interface{}{"LeafCertTTL": "30m"}, wantErr: "leaf cert TTL must be greater or equal than 1h0m0s"},
		{name: "long leaf", raw: map[string]interface{}{"LeafCertTTL": "9000h"}, wantErr: "leaf cert TTL must be less than 8760h0m0s"},
		{name: "intermediate vs leaf", raw: map[string]interface{}{"LeafCertTTL": "8000h"}, wantErr: "Intermediate Cert TTL must be greater or equal than 3 * LeafCertTTL"},
		{name: "bad ec bits", raw: map[string]interface{}{"PrivateKeyBits": 512}, wantErr: "EC key length must be one of (224, 256, 384, 521) bits"},
		{name: "bad rsa bits", raw: map[string]interface{}{"PrivateKeyType": "rsa", "PrivateKeyBits": 256}, wantErr: "RSA key length must be 2048 or 4096 bits"},
		{name: "bad type", raw: map[string]interface{}{"PrivateKeyType": "dsa"}, wantErr: "private key type must be either 'ec' or 'rsa'"},
		{name: "root without key", raw: map[string]interface{}{"RootCert": "x"}, wantErr: "must provide a private key when providing a root cert"},
		{name: "bad duration", raw: map[string]interface{}{"LeafCertTTL": "soon"}, wantErr: "error decoding config: 'LeafCertTTL'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.raw)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("err = %v, want prefix %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(c) {
				t.Fatalf("config %+v, err %v", c, err)
			}
		})
	}
}

func TestSameKey(t *testing.T) {
	base, _ := ParseConfig(nil)
	ttl, _ := ParseConfig(map[string]interface{}{"LeafCertTTL": "24h"})
	bits, _ := ParseConfig(map[string]interface{}{"PrivateKeyBits": 384})
	if !SameKey(base, ttl) || SameKey(base, bits) {
		t.Fatal("SameKey must ignore TTLs and see key size changes")
	}
}

func TestGenerateAndParseKeys(t *testing.T) {
	cases := []struct {
		typ  string
		bits int
	}{{"ec", 224}, {"ec", 256}, {"ec", 384}, {"ec", 521}, {"rsa", 2048}}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			k, p, err := GenerateKey(tc.typ, tc.bits)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := ParseSigner(p)
			if err != nil {
				t.Fatal(err)
			}
			typ, bits, err := KeyInfo(parsed.Public())
			if err != nil || typ != tc.typ || bits != tc.bits {
				t.Fatalf("KeyInfo = %s %d %v", typ, bits, err)
			}
			if !parsed.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(k.Public()) {
				t.Fatal("parsed key differs")
			}
		})
	}
	if _, _, err := GenerateKey("ec", 999); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad size: %v", err)
	}
	// PKCS#8 is accepted too (operator-supplied keys).
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	if _, err := ParseSigner(string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSigner("junk"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("junk: %v", err)
	}
}

// testAuthority makes a root of the given key type and its authority.
func testAuthority(t testing.TB, typ string, bits int, serial uint64) (*structs.CARoot, *Authority) {
	t.Helper()
	key, keyPEM, err := GenerateKey(typ, bits)
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, err := NewRootCert(RootRequest{ClusterID: testCluster, Key: key, Serial: serial, TTL: DefaultRootCertTTL})
	if err != nil {
		t.Fatal(err)
	}
	root, err := NewCARoot(rootPEM, testCluster)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthority(root, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return root, a
}

func TestRootCert(t *testing.T) {
	root, a := testAuthority(t, "ec", 256, 7)
	cert := a.Cert()
	sum := sha1.Sum(cert.Raw) //nolint:gosec // Consul's fingerprint
	var want []string
	for _, b := range sum {
		want = append(want, hex.EncodeToString([]byte{b}))
	}
	if root.ID != strings.Join(want, ":") {
		t.Fatalf("ID %s, want the colon-hex SHA-1 %s", root.ID, strings.Join(want, ":"))
	}
	if !cert.IsCA || len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://"+testCluster+".consul" {
		t.Fatalf("root cert IsCA=%v URIs=%v", cert.IsCA, cert.URIs)
	}
	if root.SerialNumber != 7 || root.PrivateKeyType != "ec" || root.PrivateKeyBits != 256 || !root.Active ||
		root.Name != "Consul CA Root Cert" || root.ExternalTrustDomain != testCluster {
		t.Fatalf("root %+v", root)
	}
	if root.SigningKeyID != connect.HexString(cert.SubjectKeyId) || len(cert.SubjectKeyId) != 32 {
		t.Fatalf("signing key ID %s", root.SigningKeyID)
	}
	if !strings.HasPrefix(cert.Subject.CommonName, "pri-") || len(cert.Subject.CommonName) > 64 {
		t.Fatalf("CN %q", cert.Subject.CommonName)
	}
	if d := cert.NotAfter.Sub(cert.NotBefore); d != DefaultRootCertTTL {
		t.Fatalf("root lifetime %s", d)
	}
	// A key that is not the root's is refused.
	_, otherPEM, _ := GenerateKey("ec", 256)
	if _, err := NewAuthority(root, otherPEM); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("mismatched key: %v", err)
	}
}

func csrFor(t testing.TB, uris ...string) (*x509.CertificateRequest, crypto.Signer) {
	t.Helper()
	key, _, err := GenerateKey("ec", 256)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.CertificateRequest{}
	for _, u := range uris {
		p, _ := url.Parse(u)
		tmpl.URIs = append(tmpl.URIs, p)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := ParseCSR(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})))
	if err != nil {
		t.Fatal(err)
	}
	return csr, key
}

func TestValidateLeafCSR(t *testing.T) {
	td := connect.TrustDomain(testCluster)
	signing := connect.NewSigningID(testCluster)
	good := "spiffe://" + td + "/ns/default/dc/dc1/svc/web"
	cases := []struct {
		name    string
		uris    []string
		wantErr string
	}{
		{"ok", []string{good}, ""},
		{"no uri", nil, "CSR SAN does not contain a SPIFFE ID"},
		{"two uris", []string{good, good}, "CSR SAN contains an invalid number of URIs: 2"},
		{"other trust domain", []string{"spiffe://other.consul/ns/default/dc/dc1/svc/web"}, "SPIFFE ID in CSR from a different trust domain: other.consul, we are " + td},
		{"other dc", []string{"spiffe://" + td + "/ns/default/dc/dc2/svc/web"}, "SPIFFE ID in CSR from a different datacenter: dc2, we are dc1"},
		{"signing id", []string{"spiffe://" + td}, "SPIFFE ID in CSR must be a service ID"},
		{"not spiffe", []string{"https://example.com"}, "SPIFFE ID is not in the expected format"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			csr, _ := csrFor(t, tc.uris...)
			svc, err := ValidateLeafCSR(csr, signing, "dc1")
			if tc.wantErr == "" {
				if err != nil || svc.Service != "web" {
					t.Fatalf("svc %+v err %v", svc, err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidCSR) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
	// A CSR whose signature does not match its key is refused.
	csr, _ := csrFor(t, good)
	csr.Signature[len(csr.Signature)-1] ^= 0xff
	if _, err := ValidateLeafCSR(csr, signing, "dc1"); !errors.Is(err, ErrInvalidCSR) {
		t.Fatalf("bad signature: %v", err)
	}
	if _, err := ParseCSR("junk"); !errors.Is(err, ErrInvalidCSR) {
		t.Fatalf("junk: %v", err)
	}
}

func TestSignLeafVerifies(t *testing.T) {
	for _, kt := range []struct {
		typ  string
		bits int
	}{{"ec", 256}, {"ec", 384}, {"rsa", 2048}} {
		t.Run(kt.typ, func(t *testing.T) {
			_, a := testAuthority(t, kt.typ, kt.bits, 1)
			id := connect.NewServiceID(connect.TrustDomain(testCluster), "dc1", "web")
			csrPEM, keyPEM, err := NewLeafCSR(id)
			if err != nil {
				t.Fatal(err)
			}
			csr, err := ParseCSR(csrPEM)
			if err != nil {
				t.Fatal(err)
			}
			svc, err := ValidateLeafCSR(csr, connect.NewSigningID(testCluster), "dc1")
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			chain, leaf, err := a.SignLeaf(csr, 42, DefaultLeafCertTTL, now)
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AddCert(a.Cert())
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Fatal(err)
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Fatal(err)
			}
			if len(leaf.URIs) != 1 || leaf.URIs[0].String() != id.String() || leaf.IsCA {
				t.Fatalf("leaf URIs %v IsCA %v", leaf.URIs, leaf.IsCA)
			}
			key, _ := ParseSigner(keyPEM)
			if !certMatchesKey(leaf, key) {
				t.Fatal("leaf is not for the CSR's key")
			}
			if leaf.SerialNumber.Uint64() != 42 || leaf.NotAfter.Sub(leaf.NotBefore) != DefaultLeafCertTTL ||
				!leaf.NotBefore.Equal(now.Add(-ClockSkewAllowance).Truncate(time.Second)) {
				t.Fatalf("serial %v validity %s..%s", leaf.SerialNumber, leaf.NotBefore, leaf.NotAfter)
			}
			ic := IssuedCert(chain, leaf, svc)
			if ic.SerialNumber != "2a" || ic.Service != "web" || ic.ServiceURI != id.String() || ic.CertPEM != chain {
				t.Fatalf("issued %+v", ic)
			}
		})
	}
}

// After a rotation the new root is cross-signed by the old key: a leaf of
// the new root, with the chain it is issued with, verifies for a peer that
// trusts only the old root, and a leaf of the old root still verifies
// against the old root.
func TestCrossSignChain(t *testing.T) {
	oldRoot, oldCA := testAuthority(t, "ec", 256, 1)
	newRoot, newCA := testAuthority(t, "rsa", 2048, 2)
	now := time.Now()
	xc, err := oldCA.CrossSign(newCA.Cert(), 3, now, now.Add(MinCrossSignTTL))
	if err != nil {
		t.Fatal(err)
	}
	newRoot.IntermediateCerts = []string{xc}
	_, newKeyPEM := mustKeyPEMFor(t, newCA)
	rotated, err := NewAuthority(newRoot, newKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	id := connect.NewServiceID(connect.TrustDomain(testCluster), "dc1", "web")
	csrPEM, _, _ := NewLeafCSR(id)
	csr, _ := ParseCSR(csrPEM)
	chain, leaf, err := rotated.SignLeaf(csr, 4, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(chain, "BEGIN CERTIFICATE") != 2 {
		t.Fatalf("chain has %d certificates, want leaf + cross-signed root", strings.Count(chain, "BEGIN CERTIFICATE"))
	}
	inter := x509.NewCertPool()
	rest := []byte(chain)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, _ := x509.ParseCertificate(b.Bytes)
		if !c.Equal(leaf) {
			inter.AddCert(c)
		}
	}
	oldOnly := x509.NewCertPool()
	oldOnly.AddCert(oldCA.Cert())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: oldOnly, Intermediates: inter}); err != nil {
		t.Fatalf("new leaf against the old root: %v", err)
	}
	newOnly := x509.NewCertPool()
	newOnly.AddCert(newCA.Cert())
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: newOnly}); err != nil {
		t.Fatalf("new leaf against the new root: %v", err)
	}
	// The cross-signed certificate never outlives the old root.
	xcCert, _ := ParseCert(xc)
	if xcCert.NotAfter.After(oldCA.Cert().NotAfter) || xcCert.SerialNumber.Uint64() != 3 {
		t.Fatalf("cross-signed %s serial %v", xcCert.NotAfter, xcCert.SerialNumber)
	}
	_ = oldRoot
}

// mustKeyPEMFor re-encodes an authority's key (tests only).
func mustKeyPEMFor(t *testing.T, a *Authority) (crypto.Signer, string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		t.Fatal(err)
	}
	return a.key, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func TestSuppliedRoot(t *testing.T) {
	key, keyPEM, _ := GenerateKey("ec", 256)
	rootPEM, _ := NewRootCert(RootRequest{ClusterID: testCluster, Key: key, Serial: 1, TTL: time.Hour})
	if err := ValidateSuppliedRoot(rootPEM, key); err != nil {
		t.Fatal(err)
	}
	other, _, _ := GenerateKey("ec", 256)
	if err := ValidateSuppliedRoot(rootPEM, other); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("wrong key: %v", err)
	}
	_ = keyPEM
}

func BenchmarkSignLeaf(b *testing.B) {
	_, a := testAuthority(b, "ec", 256, 1)
	id := connect.NewServiceID(connect.TrustDomain(testCluster), "dc1", "web")
	csrPEM, _, _ := NewLeafCSR(id)
	csr, _ := ParseCSR(csrPEM)
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := a.SignLeaf(csr, uint64(i+1), DefaultLeafCertTTL, now); err != nil {
			b.Fatal(err)
		}
	}
}
