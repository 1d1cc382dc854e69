package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// autoEncrypt is what auto_encrypt adds to the files' material.
type autoEncrypt struct {
	// cert is a client's certificate from the servers (nil until set).
	cert *tls.Certificate
	// connectRoots are the Connect CA roots a server with allow_tls
	// trusts client certificates with (nil until set).
	connectRoots *x509.CertPool
	// serverRoots are what a client verifies servers with besides its own
	// CA files: the servers' manual CA roots and the Connect CA roots of
	// AutoEncrypt.Sign's answer (nil until set).
	serverRoots *x509.CertPool
}

// SetAutoEncryptCert installs the certificate and key (PEM) a client agent
// got from AutoEncrypt.Sign. It serves every protocol that has no
// cert_file (gRPC-TLS only with tls.grpc.use_auto_cert) and is presented to
// servers; handshakes after the call use it, so a renewal replaces it
// without dropping connections.
func (c *Configurator) SetAutoEncryptCert(certPEM, keyPEM string) error {
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		return fmt.Errorf("%w: auto_encrypt certificate: %w", ErrInvalidMaterial, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("%w: auto_encrypt certificate: %w", ErrInvalidMaterial, err)
		}
	}
	c.mu.Lock()
	c.auto.cert = &pair
	c.mu.Unlock()
	return nil
}

// SetConnectCARoots replaces the Connect CA roots (PEM) a server with
// auto_encrypt.allow_tls accepts client certificates from, next to its
// own CA.
func (c *Configurator) SetConnectCARoots(pems []string) error {
	pool, err := poolOf(pems)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.auto.connectRoots = pool
	c.mu.Unlock()
	return nil
}

// SetAutoEncryptServerRoots replaces the roots (PEM) a client with
// auto_encrypt.tls trusts servers with next to its own CA files: the
// ManualCARoots and every Connect CA root of AutoEncrypt.Sign's answer, as
// Consul's auto_encrypt adds them to its RPC client's pool. Calling it
// again as the roots rotate keeps a server certificate signed by a new
// root acceptable; connections already established are unaffected.
func (c *Configurator) SetAutoEncryptServerRoots(pems []string) error {
	pool, err := poolOf(pems)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.auto.serverRoots = pool
	c.mu.Unlock()
	return nil
}

// poolOf parses PEM certificates into a pool; each string must hold one.
func poolOf(pems []string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	for _, p := range pems {
		if !pool.AppendCertsFromPEM([]byte(p)) {
			return nil, fmt.Errorf("%w: a CA root holds no PEM certificate", ErrInvalidMaterial)
		}
	}
	return pool, nil
}

// verifyServer checks a server's chain against this agent's CA files,
// then, for an auto_encrypt client, against the roots the servers gave it.
func (c *Configurator) verifyServer(chain []*x509.Certificate, name string) error {
	c.mu.RLock()
	own, extra := c.rpc.pool, c.auto.serverRoots
	if !c.autoCfg.AutoEncryptTLS {
		extra = nil
	}
	c.mu.RUnlock()
	err := verifyPeer(own, chain, name, x509.ExtKeyUsageServerAuth)
	if err != nil && extra != nil && verifyPeer(extra, chain, name, x509.ExtKeyUsageServerAuth) == nil {
		return nil
	}
	return err
}

// RPCCAPEMs returns the PEM certificates of the internal RPC CA files
// (ca_file, then ca_path's files): what a server sends auto_encrypt
// clients as its manual CA roots. Unreadable files are left out; New
// already refused them.
func (c *Configurator) RPCCAPEMs() []string {
	p := c.current(pickRPC).cfg
	var files []string
	if p.CAFile != "" {
		files = append(files, p.CAFile)
	}
	if p.CAPath != "" {
		if names, err := caPathFiles(p.CAPath); err == nil {
			files = append(files, names...)
		}
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f) //nolint:gosec // a file the operator's tls settings name
		if err != nil {
			continue
		}
		for block, rest := pem.Decode(b); block != nil; block, rest = pem.Decode(rest) {
			if block.Type == "CERTIFICATE" {
				out = append(out, string(pem.EncodeToMemory(block)))
			}
		}
	}
	return out
}

// certFor is the certificate a protocol serves and presents: its own
// cert_file's, else an auto_encrypt client's where that applies.
func (c *Configurator) certFor(pick func(*Configurator) *material) *tls.Certificate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if m := pick(c); m.cert != nil {
		return m.cert
	}
	if !c.autoCfg.AutoEncryptTLS || c.auto.cert == nil {
		return nil
	}
	if pick(c) == c.grpc && !c.autoCfg.GRPCUseAutoCert {
		return nil
	}
	return c.auto.cert
}

// admitAutoEncrypt relaxes a verifying server port for allow_tls: a client
// certificate signed by the agent CA or the Connect CA is accepted, and a
// connection without one completes its handshake so that it can ask for
// a certificate; the server port serves such connections nothing else
// (server/mux.go routes them by PeerCertificates).
func (c *Configurator) admitAutoEncrypt(pick func(*Configurator) *material, cfg *tls.Config) {
	c.mu.RLock()
	allow, connectRoots, own := c.autoCfg.AutoEncryptAllowTLS, c.auto.connectRoots, pick(c)
	c.mu.RUnlock()
	if !allow || own != c.current(pickRPC) {
		return
	}
	ownPool := own.pool
	cfg.ClientAuth = tls.RequestClientCert
	cfg.ClientCAs = nil
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return nil
		}
		err := verifyPeer(ownPool, cs.PeerCertificates, "", x509.ExtKeyUsageClientAuth)
		if err != nil && connectRoots != nil {
			if verifyPeer(connectRoots, cs.PeerCertificates, "", x509.ExtKeyUsageClientAuth) == nil {
				return nil
			}
		}
		return err
	}
}
