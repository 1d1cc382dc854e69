package agent

import (
	"crypto/tls"
	"fmt"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/tlsutil"
)

// newTLS reads and checks the TLS material rc names.
func newTLS(rc *config.RuntimeConfig) (*tlsutil.Configurator, error) {
	c, err := tlsutil.New(tlsutil.FromRuntime(rc))
	if err != nil {
		return nil, fmt.Errorf("agent: TLS: %w", err)
	}
	return c, nil
}

// reloadTLS reads the certificates and CAs again; the listeners and
// dialers ask the configurator at each handshake, so new connections use
// the new material and established ones are left alone.
func (a *Agent) reloadTLS(rc *config.RuntimeConfig) error {
	if a.tls == nil {
		return nil
	}
	if err := a.tls.Reload(tlsutil.FromRuntime(rc)); err != nil {
		return fmt.Errorf("agent: reload TLS: %w", err)
	}
	return nil
}

// tlsListener is one address a listener binds, plaintext or TLS.
type tlsListener struct {
	name string // "HTTP", "HTTPS", "gRPC" or "gRPC-TLS", for errors
	addr string
	tls  *tls.Config // nil: plaintext
}

// httpListeners lists the HTTP API's addresses: plaintext HTTP unless
// ports.http is -1, and HTTPS when ports.https is set and tls.https has a
// certificate.
func (a *Agent) httpListeners() []tlsListener {
	return listeners("HTTP", a.rc.HTTPListenAddrs(), "HTTPS", a.rc.HTTPSListenAddrs(), a.tls.HTTPSEnabled(), a.tls.IncomingHTTPSConfig)
}

// grpcListeners lists the xDS addresses: plaintext gRPC unless ports.grpc
// is -1, and gRPC-TLS when ports.grpc_tls is set and tls.grpc has a
// certificate.
func (a *Agent) grpcListeners() []tlsListener {
	return listeners("gRPC", a.rc.GRPCListenAddrs(), "gRPC-TLS", a.rc.GRPCTLSListenAddrs(), a.tls.GRPCTLSEnabled(), a.tls.IncomingGRPCConfig)
}

func listeners(plainName string, plain []string, tlsName string, secure []string, enabled bool, cfg func() *tls.Config) []tlsListener {
	var out []tlsListener
	for _, addr := range plain {
		out = append(out, tlsListener{name: plainName, addr: addr})
	}
	if enabled {
		for _, addr := range secure {
			out = append(out, tlsListener{name: tlsName, addr: addr, tls: cfg()})
		}
	}
	return out
}
