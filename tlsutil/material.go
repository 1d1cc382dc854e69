package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// material is one protocol's settings with its files read and checked.
type material struct {
	cfg ProtocolConfig
	// cert is nil when no cert_file is configured.
	cert *tls.Certificate
	// pool is nil when no CA is configured.
	pool       *x509.CertPool
	minVersion uint16
	suites     []uint16
}

// load reads and checks one protocol's files at now.
func load(proto string, p ProtocolConfig, now time.Time) (*material, error) {
	if p.VerifyServerHostname {
		p.VerifyOutgoing = true
	}
	m := &material{cfg: p}
	var err error
	if m.minVersion, err = parseVersion(&p, proto); err != nil {
		return nil, err
	}
	if m.suites, err = parseSuites(&p, proto, m.minVersion); err != nil {
		return nil, err
	}
	certKey := keyName(proto, p.Keys.CertFile, "cert_file")
	keyKey := keyName(proto, p.Keys.KeyFile, "key_file")
	switch {
	case p.CertFile != "" && p.KeyFile == "":
		return nil, fmt.Errorf("%w: %s is set but %s is not", ErrInvalidConfig, certKey, keyKey)
	case p.KeyFile != "" && p.CertFile == "":
		return nil, fmt.Errorf("%w: %s is set but %s is not", ErrInvalidConfig, keyKey, certKey)
	case p.CertFile != "":
		if m.cert, err = loadKeyPair(certKey, p.CertFile, keyKey, p.KeyFile, now); err != nil {
			return nil, err
		}
	}
	if m.pool, err = loadCAs(keyName(proto, p.Keys.CAFile, "ca_file"), p.CAFile, keyName(proto, p.Keys.CAPath, "ca_path"), p.CAPath); err != nil {
		return nil, err
	}
	if m.pool == nil {
		for _, v := range []struct {
			on   bool
			name string
			key  string
		}{
			{p.VerifyIncoming, "verify_incoming", p.Keys.VerifyIncoming},
			{p.VerifyOutgoing, "verify_outgoing", p.Keys.VerifyOutgoing},
		} {
			if v.on {
				return nil, fmt.Errorf("%w: %s is set but neither %s nor %s names a CA to verify with",
					ErrInvalidConfig, keyName(proto, v.key, v.name), keyName(proto, p.Keys.CAFile, "ca_file"), keyName(proto, p.Keys.CAPath, "ca_path"))
			}
		}
	}
	return m, nil
}

// loadKeyPair reads a certificate and its key and checks that they match
// and that the certificate is valid now.
func loadKeyPair(certKey, certFile, keyKey, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile) //nolint:gosec // a file the operator's tls settings name
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrInvalidMaterial, certKey, certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile) //nolint:gosec // a file the operator's tls settings name
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %w", ErrInvalidMaterial, keyKey, keyFile, err)
	}
	if block, _ := pem.Decode(certPEM); block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: %s %s holds no PEM certificate", ErrInvalidMaterial, certKey, certFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s does not match the certificate in %s %s: %w",
			ErrInvalidMaterial, keyKey, keyFile, certKey, certFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: %s %s: %w", ErrInvalidMaterial, certKey, certFile, err)
		}
		pair.Leaf = leaf
	}
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%w: %s %s: the certificate expired at %s",
			ErrInvalidMaterial, certKey, certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("%w: %s %s: the certificate is not valid before %s",
			ErrInvalidMaterial, certKey, certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &pair, nil
}

// loadCAs builds the pool of ca_file and every PEM file in ca_path (nil
// when neither is set).
func loadCAs(fileKey, file, pathKey, dir string) (*x509.CertPool, error) {
	if file == "" && dir == "" {
		return nil, nil
	}
	pool := x509.NewCertPool()
	add := func(key, name string) error {
		b, err := os.ReadFile(name) //nolint:gosec // a file the operator's tls settings name
		if err != nil {
			return fmt.Errorf("%w: %s %s: %w", ErrInvalidMaterial, key, name, err)
		}
		if !pool.AppendCertsFromPEM(b) {
			return fmt.Errorf("%w: %s %s holds no PEM certificate", ErrInvalidMaterial, key, name)
		}
		return nil
	}
	if file != "" {
		if err := add(fileKey, file); err != nil {
			return nil, err
		}
	}
	if dir != "" {
		names, err := caPathFiles(dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %s: %w", ErrInvalidMaterial, pathKey, dir, err)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: %s %s holds no certificate", ErrInvalidMaterial, pathKey, dir)
		}
		for _, n := range names {
			if err := add(pathKey, n); err != nil {
				return nil, err
			}
		}
	}
	return pool, nil
}

// caPathFiles lists the files of a ca_path directory in lexical order.
func caPathFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(names)
	return names, nil
}
