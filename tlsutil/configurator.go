package tlsutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Configurator hands out the agent's tls.Configs. Create it with New; it is
// safe for concurrent use, and Reload swaps the material under every
// tls.Config it has handed out.
type Configurator struct {
	now func() time.Time

	mu sync.RWMutex
	// rpc, https, grpc, serverName, auto and autoCfg are guarded by mu.
	rpc, https, grpc *material
	serverName       string
	auto             autoEncrypt
	// autoCfg is the auto_encrypt part of the last configuration loaded.
	autoCfg Config
}

// New reads and checks every file the configuration names. The error names
// the config key and the file of the first problem found.
func New(cfg Config) (*Configurator, error) {
	c := &Configurator{now: time.Now}
	if err := c.Reload(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again (certificates rotated on disk, a new CA) and
// switches new handshakes to them; connections already established keep
// theirs. On error nothing changes.
func (c *Configurator) Reload(cfg Config) error {
	now := c.now()
	if cfg.AutoEncryptTLS {
		// The servers are only ever asked for a certificate over TLS
		// that verifies them.
		cfg.InternalRPC.VerifyOutgoing = true
	}
	rpc, err := load("internal_rpc", cfg.InternalRPC, now)
	if err != nil {
		return err
	}
	https, err := load("https", cfg.HTTPS, now)
	if err != nil {
		return err
	}
	grpc, err := load("grpc", cfg.GRPC, now)
	if err != nil {
		return err
	}
	if err := checkRPC(rpc, cfg); err != nil {
		return err
	}
	c.mu.Lock()
	c.rpc, c.https, c.grpc, c.serverName = rpc, https, grpc, cfg.ServerName
	c.autoCfg = cfg
	c.mu.Unlock()
	return nil
}

// checkRPC checks what the RPC port needs of a server: a certificate when
// it verifies incoming connections or when others verify it, and one valid
// for the server name when clients check that name.
func checkRPC(m *material, cfg Config) error {
	p := m.cfg
	if !cfg.ServerMode {
		return nil
	}
	certKey := keyName("internal_rpc", p.Keys.CertFile, "cert_file")
	if m.cert == nil && (p.VerifyIncoming || p.VerifyOutgoing) {
		return fmt.Errorf("%w: a server with %s set needs %s and %s",
			ErrInvalidConfig, verifyKeys(p), certKey, keyName("internal_rpc", p.Keys.KeyFile, "key_file"))
	}
	if m.cert != nil && p.VerifyServerHostname && cfg.ServerName != "" {
		if err := m.cert.Leaf.VerifyHostname(cfg.ServerName); err != nil {
			return fmt.Errorf("%w: %s %s is not valid for %s, the name clients check with %s: %w",
				ErrInvalidMaterial, certKey, p.CertFile, cfg.ServerName,
				keyName("internal_rpc", p.Keys.VerifyServerHostname, "verify_server_hostname"), err)
		}
	}
	return nil
}

func verifyKeys(p ProtocolConfig) string {
	switch {
	case p.VerifyIncoming && p.VerifyOutgoing:
		return keyName("internal_rpc", p.Keys.VerifyIncoming, "verify_incoming") + " and " + keyName("internal_rpc", p.Keys.VerifyOutgoing, "verify_outgoing")
	case p.VerifyIncoming:
		return keyName("internal_rpc", p.Keys.VerifyIncoming, "verify_incoming")
	}
	return keyName("internal_rpc", p.Keys.VerifyOutgoing, "verify_outgoing")
}

func (c *Configurator) current(pick func(*Configurator) *material) *material {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return pick(c)
}

func pickRPC(c *Configurator) *material   { return c.rpc }
func pickHTTPS(c *Configurator) *material { return c.https }
func pickGRPC(c *Configurator) *material  { return c.grpc }

// HTTPSEnabled reports whether the HTTPS API has a certificate to serve.
func (c *Configurator) HTTPSEnabled() bool { return c.certFor(pickHTTPS) != nil }

// GRPCTLSEnabled reports whether the gRPC-TLS listener has a certificate.
func (c *Configurator) GRPCTLSEnabled() bool { return c.certFor(pickGRPC) != nil }

// IncomingHTTPSConfig is the HTTPS API listener's configuration: client
// certificates are required and verified when tls.https.verify_incoming
// is set.
func (c *Configurator) IncomingHTTPSConfig() *tls.Config {
	return c.incoming(pickHTTPS, []string{"h2", "http/1.1"})
}

// IncomingGRPCConfig is the gRPC-TLS listener's configuration.
func (c *Configurator) IncomingGRPCConfig() *tls.Config {
	return c.incoming(pickGRPC, []string{"h2"})
}

// IncomingRPCConfig is the server port's TLS configuration, nil when this
// agent has no RPC certificate; required says whether a plaintext
// connection must be refused (internal_rpc.verify_incoming).
func (c *Configurator) IncomingRPCConfig() (cfg *tls.Config, required bool) {
	m := c.current(pickRPC)
	if c.certFor(pickRPC) == nil {
		return nil, false
	}
	return c.incoming(pickRPC, nil), m.cfg.VerifyIncoming
}

// incoming builds a listener configuration that reads the protocol's
// current material at every handshake.
func (c *Configurator) incoming(pick func(*Configurator) *material, protos []string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: protos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := c.current(pick)
			cert := c.certFor(pick)
			if cert == nil {
				return nil, errors.New("tlsutil: no certificate configured")
			}
			cfg := &tls.Config{
				Certificates: []tls.Certificate{*cert},
				MinVersion:   m.minVersion,
				CipherSuites: m.suites,
				NextProtos:   protos,
			}
			if m.cfg.VerifyIncoming {
				cfg.ClientAuth = tls.RequireAndVerifyClientCert
				cfg.ClientCAs = m.pool
				c.admitAutoEncrypt(pick, cfg) // autoencrypt.go
			}
			return cfg, nil
		},
	}
}

// OutgoingRPCConfig is the configuration of this agent's connections to
// the server port, nil when internal_rpc's verify_outgoing is off
// (plaintext). The server's certificate is verified against the current
// CA, and for the server name when verify_server_hostname is set; this
// agent's own certificate, if any, is offered to servers that verify
// incoming connections.
func (c *Configurator) OutgoingRPCConfig() *tls.Config {
	c.mu.RLock()
	m, name := c.rpc, c.serverName
	c.mu.RUnlock()
	if !m.cfg.VerifyOutgoing {
		return nil
	}
	checkName := ""
	if m.cfg.VerifyServerHostname {
		checkName = name
	}
	return &tls.Config{
		MinVersion:   m.minVersion,
		CipherSuites: m.suites,
		ServerName:   checkName,
		// The chain is verified by VerifyConnection against the CA of the
		// moment (which Reload may change) and, without
		// verify_server_hostname, regardless of the dialled address, as
		// Consul does: servers are dialled by IP.
		InsecureSkipVerify: true, //nolint:gosec // verification is VerifyConnection's
		VerifyConnection: func(cs tls.ConnectionState) error {
			return c.verifyServer(cs.PeerCertificates, checkName) // autoencrypt.go
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert := c.certFor(pickRPC); cert != nil {
				return cert, nil
			}
			return &tls.Certificate{}, nil
		},
	}
}

// verifyPeer checks a presented chain against roots, and for name when it
// is not empty.
func verifyPeer(roots *x509.CertPool, chain []*x509.Certificate, name string, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("tlsutil: the server presented no certificate")
	}
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: inter,
		DNSName:       name,
		KeyUsages:     []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return fmt.Errorf("tlsutil: peer certificate: %w", err)
	}
	return nil
}
