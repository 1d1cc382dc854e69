package ca

import (
	"crypto"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // the root ID is Consul's SHA-1 fingerprint, an identifier, not a security check
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

// rootName is the Name Consul gives roots of its built-in provider.
const rootName = "Consul CA Root Cert"

// maxCNLength is the longest CommonName x509 allows (bytes).
const maxCNLength = 64

// RootRequest describes a new root certificate.
type RootRequest struct {
	// ClusterID fixes the trust domain (URI SAN spiffe://<id>.consul).
	ClusterID string
	// Key signs the (self-signed) root.
	Key crypto.Signer
	// Serial comes from the replicated serial counter.
	Serial uint64
	// TTL is the root's lifetime (RootCertTTL).
	TTL time.Duration
	// Now is the issue time; zero means time.Now.
	Now time.Time
}

// NewRootCert creates a self-signed CA certificate for the cluster, shaped
// like the built-in Consul provider's: a CN "pri-<uid>.consul.ca.<cluster
// id>.consul", the signing SPIFFE ID as its only URI SAN, and the key ID of
// Key as both subject and authority key ID. It returns the PEM.
func NewRootCert(req RootRequest) (string, error) {
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	keyID, err := KeyID(req.Key.Public())
	if err != nil {
		return "", err
	}
	uid, err := compactUID()
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetUint64(req.Serial),
		Subject:               pkix.Name{CommonName: caCN(uid, req.ClusterID)},
		URIs:                  []*url.URL{connect.NewSigningID(req.ClusterID).URI()},
		BasicConstraintsValid: true,
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		NotBefore:             req.Now,
		NotAfter:              req.Now.Add(req.TTL),
		AuthorityKeyId:        keyID,
		SubjectKeyId:          keyID,
		SignatureAlgorithm:    sigAlgoForKey(req.Key),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, req.Key.Public(), req.Key)
	if err != nil {
		return "", fmt.Errorf("error generating CA certificate: %w", err)
	}
	return encodeCert(der), nil
}

// caCN is Consul's CACN for a primary datacenter's built-in provider.
func caCN(uid, clusterID string) string {
	td := strings.SplitN(clusterID, ".", 2)[0]
	cn := fmt.Sprintf("pri-%s.consul.ca.%s.consul", uid, td)
	if len(cn) > maxCNLength {
		cn = cn[:maxCNLength]
	}
	return cn
}

// compactUID is eight random base-36 characters (Consul's CompactUID).
func compactUID() (string, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(36), big.NewInt(8), nil))
	if err != nil {
		return "", fmt.Errorf("random id: %w", err)
	}
	s := n.Text(36)
	return strings.Repeat("0", 8-len(s)) + s, nil
}

// Fingerprint is a certificate's root ID: the colon-hex SHA-1 of its DER
// bytes (Consul's CalculateCertFingerprint).
func Fingerprint(cert *x509.Certificate) string {
	sum := sha1.Sum(cert.Raw) //nolint:gosec // identifier, see import
	return connect.HexString(sum[:])
}

// NewCARoot describes a root certificate as the roots list shows it (Consul's
// parseCARoot): ID, serial, signing key ID, validity and key type, marked
// active.
func NewCARoot(rootPEM, clusterID string) (*structs.CARoot, error) {
	cert, err := ParseCert(rootPEM)
	if err != nil {
		return nil, fmt.Errorf("error parsing root cert: %w", err)
	}
	keyType, keyBits, err := KeyInfo(cert.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("error extracting root key info: %w", err)
	}
	skid := cert.SubjectKeyId
	if len(skid) == 0 {
		// An operator-supplied root may lack one; leaves name their
		// issuer by our computed key ID, so list that.
		if skid, err = KeyID(cert.PublicKey); err != nil {
			return nil, err
		}
	}
	return &structs.CARoot{
		ID:                  Fingerprint(cert),
		Name:                rootName,
		SerialNumber:        cert.SerialNumber.Uint64(),
		SigningKeyID:        connect.HexString(skid),
		ExternalTrustDomain: clusterID,
		NotBefore:           cert.NotBefore,
		NotAfter:            cert.NotAfter,
		RootCert:            rootPEM,
		PrivateKeyType:      keyType,
		PrivateKeyBits:      keyBits,
		Active:              true,
	}, nil
}

// ValidateSuppliedRoot checks an operator-supplied root certificate: it must
// be a CA certificate for the supplied key.
func ValidateSuppliedRoot(rootPEM string, key crypto.Signer) error {
	cert, err := ParseCert(rootPEM)
	if err != nil {
		return fmt.Errorf("error parsing root cert: %w", err)
	}
	if !cert.IsCA {
		return fmt.Errorf("%w: root certificate is not a CA certificate", ErrInvalidKey)
	}
	if !certMatchesKey(cert, key) {
		return fmt.Errorf("%w: root certificate is not for the private key given", ErrInvalidKey)
	}
	return nil
}
