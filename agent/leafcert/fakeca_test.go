package leafcert

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

const testCluster = "11111111-2222-3333-4444-555555555555"

// fakeCA stands in for the servers: a real built-in CA (connect/ca) behind
// the two RPC methods the manager uses, with knobs for rotation, errors
// and rate limiting.
type fakeCA struct {
	t       testing.TB
	mu      sync.Mutex
	ready   bool
	auth    *ca.Authority
	roots   structs.IndexedCARoots
	changed chan struct{}
	serial  uint64
	index   uint64
	leafTTL time.Duration
	// signs counts Sign calls; rateLimit fails that many next Signs with
	// ErrRateLimited; failWith fails every Sign while set.
	signs     int
	rateLimit int
	failWith  error
	// tokens records the token of every Sign; refuse lists tokens whose
	// Signs are denied, as the servers deny a token without service:write.
	tokens []string
	refuse map[string]bool
	// unknown lists tokens the servers do not know (deleted or expired).
	unknown map[string]bool
}

func newFakeCA(t testing.TB, ready bool) *fakeCA {
	f := &fakeCA{t: t, changed: make(chan struct{}), leafTTL: time.Hour, index: 1}
	if ready {
		f.rotate("ec", 256)
	}
	return f
}

// rotate installs a new active root of the given key type, cross-signed by
// the previous one, keeping the old root listed.
func (f *fakeCA) rotate(keyType string, bits int) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	key, keyPEM, err := ca.GenerateKey(keyType, bits)
	if err != nil {
		f.t.Fatal(err)
	}
	f.serial++
	rootPEM, err := ca.NewRootCert(ca.RootRequest{ClusterID: testCluster, Key: key, Serial: f.serial, TTL: ca.DefaultRootCertTTL})
	if err != nil {
		f.t.Fatal(err)
	}
	root, err := ca.NewCARoot(rootPEM, testCluster)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.auth != nil {
		f.serial++
		newCert, _ := ca.ParseCert(rootPEM)
		xc, err := f.auth.CrossSign(newCert, f.serial, time.Now(), time.Now().Add(ca.MinCrossSignTTL))
		if err != nil {
			f.t.Fatal(err)
		}
		root.IntermediateCerts = []string{xc}
	}
	auth, err := ca.NewAuthority(root, keyPEM)
	if err != nil {
		f.t.Fatal(err)
	}
	f.index++
	for _, r := range f.roots.Roots {
		r.Active = false
	}
	root.CreateIndex, root.ModifyIndex = f.index, f.index
	f.roots.Roots = append(f.roots.Roots, root)
	f.roots.ActiveRootID = root.ID
	f.roots.TrustDomain = connect.TrustDomain(testCluster)
	f.auth, f.ready = auth, true
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeCA) RPC(ctx context.Context, method string, args, reply any) error {
	switch method {
	case structs.MethodConnectCARoots.Name():
		q := args.(*structs.DCSpecificRequest).QueryOptions
		for {
			f.mu.Lock()
			idx, ch := f.index, f.changed
			out := f.roots
			out.Roots = append(structs.CARoots(nil), f.roots.Roots...)
			f.mu.Unlock()
			if q.MinQueryIndex == 0 || idx > q.MinQueryIndex {
				out.Index = idx
				*reply.(*structs.IndexedCARoots) = out
				return nil
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(q.MaxQueryTime):
				out.Index = idx
				*reply.(*structs.IndexedCARoots) = out
				return nil
			}
		}
	case structs.MethodConnectCASign.Name():
		f.mu.Lock()
		defer f.mu.Unlock()
		f.signs++
		tok := args.(*structs.CASignRequest).Token
		f.tokens = append(f.tokens, tok)
		if f.refuse[tok] {
			return structs.ErrPermissionDenied
		}
		if f.unknown[tok] {
			return structs.ErrACLNotFound
		}
		if f.failWith != nil {
			return f.failWith
		}
		if f.rateLimit > 0 {
			f.rateLimit--
			return structs.ErrRateLimited
		}
		if !f.ready {
			return errors.New("CA is uninitialized and unable to sign certificates yet")
		}
		csr, err := ca.ParseCSR(args.(*structs.CASignRequest).CSR)
		if err != nil {
			return err
		}
		svc, err := ca.ValidateLeafCSR(csr, connect.NewSigningID(testCluster), "dc1")
		if err != nil {
			return err
		}
		f.serial++
		f.index++
		// Signed as of now (not backdated) so that short test TTLs leave
		// the leaf valid.
		chain, leaf, err := f.auth.SignLeaf(csr, f.serial, f.leafTTL, time.Now().Add(ca.ClockSkewAllowance))
		if err != nil {
			return err
		}
		ic := ca.IssuedCert(chain, leaf, svc)
		ic.CreateIndex, ic.ModifyIndex = f.index, f.index
		*reply.(*structs.IssuedCert) = *ic
		return nil
	}
	return structs.ErrUnknownMethod
}

func (f *fakeCA) set(fn func(f *fakeCA)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeCA) signCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.signs
}

func (f *fakeCA) currentRoots() structs.IndexedCARoots {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.roots
	out.Roots = append(structs.CARoots(nil), f.roots.Roots...)
	return out
}

// checkLeaf verifies a leaf the way a TLS peer would: against the roots
// (with the leaf's own chain as intermediates), for the exact SPIFFE ID,
// with a private key matching its public key. It returns the parsed leaf.
func checkLeaf(t testing.TB, leaf *structs.IssuedCert, roots structs.CARoots, service string) *x509.Certificate {
	t.Helper()
	pool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		pool.AppendCertsFromPEM([]byte(r.RootCert))
	}
	certs := parseChain(t, leaf.CertPEM)
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	c := certs[0]
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("leaf does not verify: %v", err)
	}
	want := connect.NewServiceID(connect.TrustDomain(testCluster), "dc1", service).String()
	if len(c.URIs) != 1 || c.URIs[0].String() != want || leaf.ServiceURI != want || leaf.Service != service {
		t.Fatalf("leaf URIs %v / %s, want %s", c.URIs, leaf.ServiceURI, want)
	}
	key, err := ca.ParseSigner(leaf.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(c.PublicKey) {
		t.Fatal("private key does not match the certificate")
	}
	return c
}

func parseChain(t testing.TB, chain string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := []byte(chain)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatal("no certificate in chain")
	}
	return out
}
