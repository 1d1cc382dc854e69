package server

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

const (
	aeClientID = "11111111-0000-0000-0000-000000000001"
	aeOtherID  = "11111111-0000-0000-0000-000000000002"
)

// autoEncryptSign asks s for node's certificate under nodeID, with the CSR
// written for trustDomain and dc.
func autoEncryptSign(t *testing.T, s *Server, node, nodeID, trustDomain, dc string) (*structs.SignedResponse, error) {
	t.Helper()
	csr, _, err := ca.NewAgentCSR(connect.NewAgentID(trustDomain, dc, nodeID), []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	var out structs.SignedResponse
	err = structs.MethodAutoEncryptSign.Call(context.Background(), s, &structs.AutoEncryptSignRequest{Node: node, CSR: csr}, &out)
	return &out, err
}

// TestAutoEncryptSign: with allow_tls a client agent gets a Connect CA
// certificate for its own agent ID, in the real trust domain, with the
// roots and the servers' CA; the servers refuse without allow_tls, for a
// node another ID holds, for a server's name, and for CSRs that are not
// an agent's of this datacenter.
func TestAutoEncryptSign(t *testing.T) {
	off := startTestCluster(t, 1, false)[0].srv
	waitForCA(t, off)
	if _, err := autoEncryptSign(t, off, "c1", aeClientID, ca.AgentPlaceholderTrustDomain, "dc1"); !errors.Is(err, structs.ErrAutoEncryptNotAllowed) {
		t.Fatalf("allow_tls off: err = %v, want ErrAutoEncryptNotAllowed", err)
	}

	s := startTestCluster(t, 1, false, func(ts *testServer) {
		ts.autoEncrypt = AutoEncryptConfig{AllowTLS: true, VerifyServerHostname: true, ManualCARoots: func() []string { return []string{"manual-ca"} }}
	})[0].srv
	roots := waitForCA(t, s)
	rpc(t, s, structs.MethodCatalogRegister, &structs.RegisterRequest{Node: "taken", ID: aeOtherID, Address: "127.0.0.2"}, new(struct{}))

	got, err := autoEncryptSign(t, s, "c1", aeClientID, ca.AgentPlaceholderTrustDomain, "dc1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ParseCert(got.IssuedCert.CertPEM)
	if err != nil {
		t.Fatal(err)
	}
	wantURI := "spiffe://" + roots.TrustDomain + "/agent/client/dc/dc1/id/" + aeClientID
	if len(cert.URIs) != 1 || cert.URIs[0].String() != wantURI || got.IssuedCert.AgentURI != wantURI || got.IssuedCert.Agent != "c1" {
		t.Fatalf("certificate URIs %v, issued %+v, want %s", cert.URIs, got.IssuedCert, wantURI)
	}
	if !slices.Contains(cert.DNSNames, "localhost") || len(cert.IPAddresses) != 1 {
		t.Errorf("SANs %v %v, want the CSR's", cert.DNSNames, cert.IPAddresses)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: poolOf(t, got.ConnectCARoots.Roots), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("usage %v: %v", usage, err)
		}
	}
	if got.ConnectCARoots.ActiveRootID != roots.ActiveRootID || !slices.Equal(got.ManualCARoots, []string{"manual-ca"}) || !got.VerifyServerHostname {
		t.Errorf("response %+v", got)
	}
	// The node registered under its own ID may renew.
	rpc(t, s, structs.MethodCatalogRegister, &structs.RegisterRequest{Node: "c1", ID: aeClientID, Address: "127.0.0.3"}, new(struct{}))
	if _, err := autoEncryptSign(t, s, "c1", aeClientID, roots.TrustDomain, "dc1"); err != nil {
		t.Fatalf("renewal in the real trust domain: %v", err)
	}

	for _, tc := range []struct {
		name, node, id, td, dc string
		want                   error
	}{
		{"node held by another ID", "taken", aeClientID, roots.TrustDomain, "dc1", structs.ErrPermissionDenied},
		{"a server's name", "s1", "00000000-0000-0000-0000-000000000001", roots.TrustDomain, "dc1", structs.ErrPermissionDenied},
		{"other datacenter", "c2", aeClientID, roots.TrustDomain, "dc2", ca.ErrInvalidCSR},
		{"other trust domain", "c2", aeClientID, "other.consul", "dc1", ca.ErrInvalidCSR},
		{"no node name", "", aeClientID, roots.TrustDomain, "dc1", ca.ErrInvalidCSR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := autoEncryptSign(t, s, tc.node, tc.id, tc.td, tc.dc); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("a service CSR", func(t *testing.T) {
		csr, _, err := ca.NewLeafCSR(connect.NewServiceID(roots.TrustDomain, "dc1", "web"))
		if err != nil {
			t.Fatal(err)
		}
		err = structs.MethodAutoEncryptSign.Call(context.Background(), s, &structs.AutoEncryptSignRequest{Node: "c3", CSR: csr}, new(structs.SignedResponse))
		if !errors.Is(err, ca.ErrInvalidCSR) {
			t.Fatalf("err = %v, want ErrInvalidCSR", err)
		}
	})
}
