package structs

import (
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
)

// InlineCertificateConfigEntry (kind inline-certificate) holds a
// certificate and its private key for API gateway listeners to serve.
// Stored and served only (see config_entry_apigateway.go). Like Consul,
// a read returns the private key: reads of config entries are as
// privileged as writes.
type InlineCertificateConfigEntry struct {
	Kind        string
	Name        string
	Certificate string
	PrivateKey  string            `alias:"private_key"`
	Meta        map[string]string `json:",omitempty"`
	RaftIndex
}

// minRSAKeyBits is the smallest RSA key an inline certificate may have, as
// in Consul: shorter keys are refused by Envoy's TLS defaults anyway.
const minRSAKeyBits = 2048

// GetKind implements ConfigEntry.
func (e *InlineCertificateConfigEntry) GetKind() string { return InlineCertificate }

// GetName implements ConfigEntry.
func (e *InlineCertificateConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *InlineCertificateConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *InlineCertificateConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry.
func (e *InlineCertificateConfigEntry) Normalize() error {
	e.Kind = InlineCertificate
	return nil
}

// Validate implements ConfigEntry: the certificate and the key must be PEM,
// the key must be the certificate's, RSA keys at least 2048 bits, and the
// names the certificate is for valid hostnames. Error texts never contain
// key material.
func (e *InlineCertificateConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	keyBlock, _ := pem.Decode([]byte(e.PrivateKey))
	if keyBlock == nil {
		return errors.New("PrivateKey: failed to parse private key PEM")
	}
	certBlock, _ := pem.Decode([]byte(e.Certificate))
	if certBlock == nil {
		return errors.New("Certificate: failed to parse certificate PEM")
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return fmt.Errorf("Certificate: failed to parse certificate: %w", err)
	}
	pair, err := tls.X509KeyPair([]byte(e.Certificate), []byte(e.PrivateKey))
	if err != nil {
		return fmt.Errorf("PrivateKey: does not match Certificate, or cannot be parsed: %w", err)
	}
	if k, ok := pair.PrivateKey.(*rsa.PrivateKey); ok && k.N.BitLen() < minRSAKeyBits {
		return fmt.Errorf("PrivateKey: RSA key length must be at least %d bits, not %d", minRSAKeyBits, k.N.BitLen())
	}
	for _, host := range certificateHosts(cert) {
		if !isDomainName(host) && net.ParseIP(host) == nil {
			return fmt.Errorf("Certificate: host %q must be a valid DNS hostname", host)
		}
	}
	return nil
}

// certificateHosts lists the names a certificate is for: its common name
// and DNS SANs (a leading "*." stripped) and its IP SANs.
func certificateHosts(cert *x509.Certificate) []string {
	var hosts []string
	for _, h := range append([]string{cert.Subject.CommonName}, cert.DNSNames...) {
		if h == "" {
			continue
		}
		if len(h) > 2 && h[:2] == "*." {
			h = h[2:]
		}
		hosts = append(hosts, h)
	}
	for _, ip := range cert.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return hosts
}
