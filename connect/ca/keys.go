package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ErrInvalidKey is returned for a key or certificate PEM that does not parse
// or is of an unsupported type.
var ErrInvalidKey = errors.New("invalid key")

// GenerateKey makes a new private key of the given type ("ec" or "rsa") and
// size, returning it and its PEM encoding (SEC 1 "EC PRIVATE KEY" or PKCS#1
// "RSA PRIVATE KEY", as Consul writes them).
func GenerateKey(keyType string, bits int) (crypto.Signer, string, error) {
	if err := validateKeyType(keyType, bits); err != nil {
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidKey, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	var (
		signer crypto.Signer
		block  *pem.Block
	)
	switch keyType {
	case "ec":
		curve := map[int]elliptic.Curve{224: elliptic.P224(), 256: elliptic.P256(), 384: elliptic.P384(), 521: elliptic.P521()}[bits]
		k, err := ecdsa.GenerateKey(curve, rand.Reader)
		if err != nil {
			return nil, "", fmt.Errorf("generate EC key: %w", err)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, "", fmt.Errorf("encode EC key: %w", err)
		}
		signer, block = k, &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
	default:
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			return nil, "", fmt.Errorf("generate RSA key: %w", err)
		}
		signer, block = k, &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	}
	return signer, string(pem.EncodeToMemory(block)), nil
}

// ParseSigner decodes a PEM private key: SEC 1, PKCS#1 or PKCS#8.
func ParseSigner(keyPEM string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(keyPEM))
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM data found", ErrInvalidKey)
	}
	switch block.Type {
	case "EC PRIVATE KEY":
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
		}
		return k, nil
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
		}
		if s, ok := k.(crypto.Signer); ok {
			if _, _, err := KeyInfo(s.Public()); err == nil {
				return s, nil
			}
		}
		return nil, fmt.Errorf("%w: unsupported key type %T", ErrInvalidKey, k)
	}
	return nil, fmt.Errorf("%w: unknown PEM block type %q", ErrInvalidKey, block.Type)
}

// KeyID is the x509 key identifier of a public key: the SHA-256 of its
// PKIX encoding (Consul's connect.KeyId). Roots carry it as SubjectKeyId and
// leaves as AuthorityKeyId, which is how a leaf names the key that signed it.
func KeyID(pub crypto.PublicKey) ([]byte, error) {
	switch pub.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey:
	default:
		return nil, fmt.Errorf("%w: unsupported public key type %T", ErrInvalidKey, pub)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	sum := sha256.Sum256(der)
	return sum[:], nil
}

// KeyInfo returns a public key's type ("ec" or "rsa") and size in bits.
func KeyInfo(pub crypto.PublicKey) (string, int, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return "ec", k.Curve.Params().BitSize, nil
	case *rsa.PublicKey:
		return "rsa", k.N.BitLen(), nil
	}
	return "", 0, fmt.Errorf("%w: unsupported public key type %T", ErrInvalidKey, pub)
}

// sigAlgoForKey is the signature algorithm a CA key signs with: SHA-256 in
// both cases, as Consul's SigAlgoForKey.
func sigAlgoForKey(k crypto.Signer) x509.SignatureAlgorithm {
	if _, ok := k.Public().(*rsa.PublicKey); ok {
		return x509.SHA256WithRSA
	}
	return x509.ECDSAWithSHA256
}

// ParseCert decodes the first PEM certificate in certPEM.
func ParseCert(certPEM string) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no PEM certificate found", ErrInvalidKey)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	return c, nil
}

// SameKey reports whether a certificate is for the public half of signer.
func certMatchesKey(cert *x509.Certificate, signer crypto.Signer) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	pub, ok := signer.Public().(equaler)
	return ok && pub.Equal(cert.PublicKey)
}

func encodeCert(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
