package ca

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

// ClockSkewAllowance backdates every certificate's NotBefore, so that a
// leaf is accepted at once even where clocks run slightly behind the
// signing server's (Consul's CertificateTimeDriftBuffer).
const ClockSkewAllowance = time.Minute

// MinCrossSignTTL is the shortest lifetime of a cross-signed root, Consul's
// seven days: long enough for every leaf of the old root to be re-issued.
const MinCrossSignTTL = 7 * 24 * time.Hour

// ErrInvalidCSR is matched by every rejected signing request; the texts
// are Consul's.
var ErrInvalidCSR = errors.New("invalid CSR")

type csrError struct{ msg string }

func (e *csrError) Error() string { return e.msg }
func (e *csrError) Unwrap() error { return ErrInvalidCSR }

func csrErrorf(format string, args ...any) error {
	return &csrError{msg: fmt.Sprintf(format, args...)}
}

// Authority is one root with its key: it signs leaves and cross-signs a
// successor root. It is immutable and safe for concurrent use.
type Authority struct {
	root          *x509.Certificate
	key           crypto.Signer
	keyID         []byte
	intermediates []string
	rootID        string
}

// NewAuthority pairs a stored root with its private key, checking that
// they belong together.
func NewAuthority(root *structs.CARoot, keyPEM string) (*Authority, error) {
	cert, err := ParseCert(root.RootCert)
	if err != nil {
		return nil, fmt.Errorf("error parsing CA cert: %w", err)
	}
	key, err := ParseSigner(keyPEM)
	if err != nil {
		return nil, err
	}
	if !certMatchesKey(cert, key) {
		return nil, fmt.Errorf("%w: key of root %s does not match its certificate", ErrInvalidKey, root.ID)
	}
	keyID, err := KeyID(key.Public())
	if err != nil {
		return nil, err
	}
	return &Authority{
		root:          cert,
		key:           key,
		keyID:         keyID,
		intermediates: append([]string(nil), root.IntermediateCerts...),
		rootID:        root.ID,
	}, nil
}

// RootID is the ID of the root this authority signs under.
func (a *Authority) RootID() string { return a.rootID }

// Cert is the root certificate.
func (a *Authority) Cert() *x509.Certificate { return a.root }

// ParseCSR decodes a PEM certificate signing request.
func ParseCSR(csrPEM string) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode([]byte(csrPEM))
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, csrErrorf("no PEM-encoded CERTIFICATE REQUEST found")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, csrErrorf("error parsing CSR: %v", err)
	}
	return csr, nil
}

// ValidateLeafCSR checks a leaf request the way Consul's ConnectCA.Sign
// does: a valid self-signature, a SPIFFE service ID as its first URI SAN,
// in this cluster's trust domain and this datacenter. It returns the
// service identity.
func ValidateLeafCSR(csr *x509.CertificateRequest, signing *connect.SpiffeIDSigning, dc string) (*connect.SpiffeIDService, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, csrErrorf("CSR signature is invalid: %v", err)
	}
	if len(csr.URIs) == 0 {
		return nil, csrErrorf("CSR SAN does not contain a SPIFFE ID")
	}
	if len(csr.URIs) > 1 {
		return nil, csrErrorf("CSR SAN contains an invalid number of URIs: %d", len(csr.URIs))
	}
	uri, err := connect.ParseCertURI(csr.URIs[0])
	if err != nil {
		return nil, csrErrorf("%v", err)
	}
	svc, ok := uri.(*connect.SpiffeIDService)
	if !ok {
		return nil, csrErrorf("SPIFFE ID in CSR must be a service ID")
	}
	if !signing.CanSign(svc) {
		return nil, csrErrorf("SPIFFE ID in CSR from a different trust domain: %s, we are %s", svc.Host, signing.Host())
	}
	if dc != "" && svc.Datacenter != dc {
		return nil, csrErrorf("SPIFFE ID in CSR from a different datacenter: %s, we are %s", svc.Datacenter, dc)
	}
	return svc, nil
}

// SignLeaf issues a leaf for a validated CSR: valid from now (minus the
// clock skew allowance) for ttl, client and server authentication, the
// CSR's URI (and any DNS/IP SANs) copied. It returns the leaf PEM followed
// by the root's intermediates (a chain ready for a TLS stack) and the
// parsed leaf.
func (a *Authority) SignLeaf(csr *x509.CertificateRequest, serial uint64, ttl time.Duration, now time.Time) (string, *x509.Certificate, error) {
	subjectKeyID, err := KeyID(csr.PublicKey)
	if err != nil {
		return "", nil, csrErrorf("%v", err)
	}
	start := now.Add(-ClockSkewAllowance)
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetUint64(serial),
		URIs:                  csr.URIs,
		DNSNames:              csr.DNSNames,
		IPAddresses:           csr.IPAddresses,
		SignatureAlgorithm:    sigAlgoForKey(a.key),
		BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDataEncipherment | x509.KeyUsageKeyAgreement |
			x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		NotBefore:      start,
		NotAfter:       start.Add(ttl),
		AuthorityKeyId: a.keyID,
		SubjectKeyId:   subjectKeyID,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.root, csr.PublicKey, a.key)
	if err != nil {
		return "", nil, fmt.Errorf("error generating certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return "", nil, fmt.Errorf("error parsing generated certificate: %w", err)
	}
	var b strings.Builder
	b.WriteString(encodeCert(der))
	for _, p := range a.intermediates {
		b.WriteString(ensureTrailingNewline(p))
	}
	return b.String(), leaf, nil
}

// CrossSign signs a successor root's certificate with this (old) root's
// key, so that a chain leaf → cross-signed new root → old root verifies for
// peers that still trust only the old root (Consul's CrossSignCA). The copy
// keeps the new root's subject and key, is valid from now (minus the skew
// allowance) until notAfter, but never beyond this root's own expiry.
func (a *Authority) CrossSign(newRoot *x509.Certificate, serial uint64, now, notAfter time.Time) (string, error) {
	tmpl := *newRoot
	tmpl.SerialNumber = new(big.Int).SetUint64(serial)
	tmpl.SignatureAlgorithm = sigAlgoForKey(a.key)
	tmpl.AuthorityKeyId = a.keyID
	tmpl.NotBefore = now.Add(-ClockSkewAllowance)
	if notAfter.After(a.root.NotAfter) {
		notAfter = a.root.NotAfter
	}
	tmpl.NotAfter = notAfter
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, a.root, newRoot.PublicKey, a.key)
	if err != nil {
		return "", fmt.Errorf("error generating CA certificate: %w", err)
	}
	return encodeCert(der), nil
}

// IssuedCert describes a signed leaf the way the API returns it.
func IssuedCert(chainPEM string, leaf *x509.Certificate, svc *connect.SpiffeIDService) *structs.IssuedCert {
	return &structs.IssuedCert{
		SerialNumber: connect.HexString(leaf.SerialNumber.Bytes()),
		CertPEM:      chainPEM,
		Service:      svc.Service,
		ServiceURI:   leaf.URIs[0].String(),
		ValidAfter:   leaf.NotBefore,
		ValidBefore:  leaf.NotAfter,
	}
}

func ensureTrailingNewline(s string) string {
	if s == "" || strings.HasSuffix(s, "\n") {
		return s
	}
	return s + "\n"
}
