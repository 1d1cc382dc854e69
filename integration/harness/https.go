package harness

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// HTTPSConfig makes an agent serve its HTTP API over HTTPS only and makes
// every probe of the harness (WaitForLeader, WaitForClients, Agent.GetJSON,
// Agent.HTTPClient) speak HTTPS to it. The agent's own certificate comes from
// its configuration (a tls block in a -config-file of ExtraArgs); this is the
// probing side: what the harness trusts and which certificate it presents.
//
// The files are read on every probe, so a test that rotates them (writes a
// new CA bundle or client certificate over the same paths) is followed.
type HTTPSConfig struct {
	// CAFile is the PEM bundle the agent's certificate must chain to.
	// Required.
	CAFile string
	// CertFile and KeyFile are the client certificate the harness presents,
	// needed when the agent sets verify_incoming; both or neither.
	CertFile string
	KeyFile  string
	// ServerName is the name checked against the agent's certificate;
	// empty means the address dialled (127.0.0.1, an IP SAN).
	ServerName string
}

func (h *HTTPSConfig) validate() error {
	switch {
	case h.CAFile == "":
		return fmt.Errorf("%w: HTTPS.CAFile is required", ErrInvalidConfig)
	case (h.CertFile == "") != (h.KeyFile == ""):
		return fmt.Errorf("%w: HTTPS.CertFile and HTTPS.KeyFile go together", ErrInvalidConfig)
	}
	return nil
}

// tlsConfig loads the files as they are now.
func (h *HTTPSConfig) tlsConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(h.CAFile)
	if err != nil {
		return nil, fmt.Errorf("harness: HTTPS CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: HTTPS CA file %s holds no PEM certificate", ErrInvalidConfig, h.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: h.ServerName, MinVersion: tls.VersionTLS12}
	if h.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(h.CertFile, h.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("harness: HTTPS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// clone copies h so that an agent's setting cannot change under it.
func (h *HTTPSConfig) clone() *HTTPSConfig {
	if h == nil {
		return nil
	}
	c := *h
	return &c
}

// newHTTPClient returns a client without keep-alives: status polling talks to
// processes that get killed, and idle connections would outlive the test as
// goroutines. A nil https gives a plaintext client.
func newHTTPClient(https *HTTPSConfig) (*http.Client, error) {
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	if https != nil {
		cfg, err := https.tlsConfig()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	return &http.Client{Timeout: statusTimeout, Transport: tr}, nil
}
