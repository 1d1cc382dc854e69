package ca

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"time"
)

// AgentCARequest describes the CA of `trellis tls ca create`: the
// certificate authority that signs the agents' TLS certificates (a
// separate thing from the Connect CA, as in Consul).
type AgentCARequest struct {
	// Domain is the DNS domain the agents use ("consul"); with
	// NameConstraint the CA may only sign names under it and localhost.
	Domain         string
	NameConstraint bool
	// Extra names allowed under a name constraint.
	AdditionalConstraints []string
	// Days is the lifetime (Consul's default 1825).
	Days int
	// Now is the issue time; zero means time.Now.
	Now time.Time
}

// NewAgentCA creates a self-signed EC P-256 CA shaped like Consul's `tls ca
// create` output (CN "Consul Agent CA <serial>"), returning the certificate
// and key PEM.
func NewAgentCA(req AgentCARequest) (certPEM, keyPEM string, err error) {
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	key, keyPEM, serial, keyID, err := newAgentKey()
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:   "Consul Agent CA " + serial.String(),
			Organization: []string{"HashiCorp Inc."},
			Country:      []string{"US"},
		},
		BasicConstraintsValid: true,
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		NotBefore:             req.Now,
		NotAfter:              req.Now.AddDate(0, 0, req.Days),
		AuthorityKeyId:        keyID,
		SubjectKeyId:          keyID,
		SignatureAlgorithm:    sigAlgoForKey(key),
	}
	if req.NameConstraint {
		tmpl.PermittedDNSDomainsCritical = true
		tmpl.PermittedDNSDomains = append([]string{req.Domain, "localhost"}, req.AdditionalConstraints...)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return "", "", fmt.Errorf("error generating CA certificate: %w", err)
	}
	return encodeCert(der), keyPEM, nil
}

// AgentCertRequest describes a certificate of `trellis tls cert create`.
type AgentCertRequest struct {
	// CACertPEM and CAKeyPEM are the signing CA.
	CACertPEM, CAKeyPEM string
	// CommonName is "server.<dc>.<domain>", "client.<dc>.<domain>" or
	// "cli.<dc>.<domain>".
	CommonName string
	DNSNames   []string
	IPs        []net.IP
	// ExtKeyUsage: server and client certificates authenticate both ways
	// (servers dial each other); CLI certificates only as clients.
	ExtKeyUsage []x509.ExtKeyUsage
	// Days is the lifetime (Consul's default 365).
	Days int
	// Now is the issue time; zero means time.Now.
	Now time.Time
}

// SignAgentCert creates an EC P-256 key and a certificate for it signed by
// the agent CA, returning both PEMs.
func SignAgentCert(req AgentCertRequest) (certPEM, keyPEM string, err error) {
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	caCert, err := ParseCert(req.CACertPEM)
	if err != nil {
		return "", "", fmt.Errorf("CA certificate: %w", err)
	}
	caKey, err := ParseSigner(req.CAKeyPEM)
	if err != nil {
		return "", "", fmt.Errorf("CA key: %w", err)
	}
	if !certMatchesKey(caCert, caKey) {
		return "", "", fmt.Errorf("%w: the CA key does not match the CA certificate", ErrInvalidKey)
	}
	key, keyPEM, serial, keyID, err := newAgentKey()
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.CommonName},
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPs,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           req.ExtKeyUsage,
		NotBefore:             req.Now.Add(-ClockSkewAllowance),
		NotAfter:              req.Now.AddDate(0, 0, req.Days),
		AuthorityKeyId:        caCert.SubjectKeyId,
		SubjectKeyId:          keyID,
		SignatureAlgorithm:    sigAlgoForKey(caKey),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return "", "", fmt.Errorf("error generating certificate: %w", err)
	}
	return encodeCert(der), keyPEM, nil
}

// randomSerial is a 128-bit random serial number.
// newAgentKey makes the EC P-256 key of a new agent CA or certificate, with
// the certificate's random serial and the key's ID.
func newAgentKey() (key crypto.Signer, keyPEM string, serial *big.Int, keyID []byte, err error) {
	if key, keyPEM, err = GenerateKey("ec", 256); err != nil {
		return nil, "", nil, nil, err
	}
	if serial, err = randomSerial(); err != nil {
		return nil, "", nil, nil, err
	}
	if keyID, err = KeyID(key.Public()); err != nil {
		return nil, "", nil, nil, err
	}
	return key, keyPEM, serial, keyID, nil
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("random serial: %w", err)
	}
	return n, nil
}
