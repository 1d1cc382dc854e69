package ca

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"

	"github.com/trellis-mesh/trellis/connect"
)

// LeafKeyType and LeafKeyBits are the key every agent makes for a leaf: an
// ECDSA P-256 key whatever the root's type, as Consul's agents do (TLS
// allows a chain to mix key types).
const (
	LeafKeyType = "ec"
	LeafKeyBits = 256
)

// NewLeafCSR makes a fresh leaf key and a CSR for a service identity. It
// returns the CSR PEM and the key PEM; the key never leaves the agent.
func NewLeafCSR(id *connect.SpiffeIDService) (csrPEM, keyPEM string, err error) {
	key, keyPEM, err := GenerateKey(LeafKeyType, LeafKeyBits)
	if err != nil {
		return "", "", err
	}
	csrPEM, err = CreateCSR(id, key)
	if err != nil {
		return "", "", err
	}
	return csrPEM, keyPEM, nil
}

// CreateCSR returns a PEM CSR whose only SAN is the identity's URI.
func CreateCSR(id connect.CertURI, key crypto.Signer) (string, error) {
	tmpl := &x509.CertificateRequest{
		URIs:               []*url.URL{id.URI()},
		SignatureAlgorithm: sigAlgoForKey(key),
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return "", fmt.Errorf("create CSR: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), nil
}
