package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/trellis-mesh/trellis/agent/leafcert"
	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// autoEncryptRetryMax caps the wait between rounds of asking the servers
// for the agent certificate.
const autoEncryptRetryMax = 30 * time.Second

// autoEncryptBootstrap gets a client agent's certificate before anything
// else starts (Consul's auto_encrypt.tls): its CSR goes over TLS that
// verifies the servers with the configured CA, without a client
// certificate, to the server port of each retry_join host in turn, until
// one signs it or ctx ends. Gossip has told the agent nothing yet, so the
// hosts come from retry_join and the port from ports.server, as in Consul.
func (a *Agent) autoEncryptBootstrap(ctx context.Context) error {
	rc := a.rc
	var addrs []string
	for _, j := range rc.RetryJoin {
		host := j
		if h, _, err := net.SplitHostPort(j); err == nil {
			host = h
		}
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(rc.Ports.Server)))
	}
	if len(addrs) == 0 {
		return errors.New("agent: auto_encrypt.tls needs retry_join (or start_join) addresses of the servers to ask for a certificate")
	}
	// A pool of its own: its connections carry no client certificate,
	// and a server serves such a connection nothing but AutoEncrypt.Sign
	// for as long as it lasts.
	pool := server.NewConnPool(server.ConnPoolConfig{TLS: a.tls})
	defer pool.Close()
	backoff := time.Second
	for {
		var errs []error
		for _, addr := range addrs {
			err := a.autoEncryptSign(ctx, poolAt{pool: pool, addr: addr})
			if err == nil {
				a.logger.Info("auto_encrypt: got the agent certificate", "server", addr)
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
		a.logger.Warn("auto_encrypt: no server signed the agent certificate; retrying", "error", errors.Join(errs...), "wait", backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent: auto_encrypt: %w: %w", ctx.Err(), errors.Join(errs...))
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, autoEncryptRetryMax)
	}
}

// autoEncryptSign asks the server behind caller to sign a new key's CSR
// and installs the certificate.
func (a *Agent) autoEncryptSign(ctx context.Context, caller structs.Caller) error {
	rc := a.rc
	id := connect.NewAgentID(ca.AgentPlaceholderTrustDomain, rc.Datacenter, rc.NodeID)
	dns := append([]string{"localhost"}, rc.AutoEncrypt.DNSSAN...)
	ips := append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, rc.AutoEncrypt.IPSAN...)
	csr, key, err := ca.NewAgentCSR(id, dns, ips)
	if err != nil {
		return err
	}
	var reply structs.SignedResponse
	args := &structs.AutoEncryptSignRequest{Node: rc.NodeName, CSR: csr}
	args.Datacenter = rc.Datacenter
	if err := structs.MethodAutoEncryptSign.Call(ctx, caller, args, &reply); err != nil {
		return err
	}
	if err := a.tls.SetAutoEncryptCert(reply.IssuedCert.CertPEM, key); err != nil {
		return err
	}
	a.autoCertExpiry.Store(&reply.IssuedCert)
	return nil
}

// startAutoEncryptRenewal renews the agent certificate on leafcert's
// schedule, through the router (any server, over TLS with the current
// certificate), retrying with backoff on failure.
func (a *Agent) startAutoEncryptRenewal() {
	ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // cancelled by Shutdown through stopAutoEncrypt
	a.stopAutoEncrypt = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		backoff := time.Second
		for {
			cert := a.autoCertExpiry.Load()
			wait := time.Until(leafcert.RenewAt(cert.ValidAfter, cert.ValidBefore, time.Now()))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			for {
				err := a.autoEncryptSign(ctx, a.router)
				if err == nil {
					backoff = time.Second
					break
				}
				a.logger.Warn("auto_encrypt: renewing the agent certificate failed; retrying", "error", err, "wait", backoff)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, autoEncryptRetryMax)
			}
		}
	}()
}

// startConnectRootsWatch keeps a server's trust of auto_encrypt client
// certificates current (auto_encrypt.allow_tls): a blocking read of the
// Connect CA roots hands every change to the TLS configuration.
func (a *Agent) startConnectRootsWatch() {
	ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // cancelled by Shutdown through stopRootsWatch
	a.stopRootsWatch = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		var index uint64
		for {
			args := &structs.DCSpecificRequest{}
			args.MinQueryIndex, args.MaxQueryTime, args.AllowStale = index, 5*time.Minute, true
			var roots structs.IndexedCARoots
			err := structs.MethodConnectCARoots.Call(ctx, a.server, args, &roots)
			if ctx.Err() != nil {
				return
			}
			if err == nil && len(roots.Roots) == 0 {
				err = errors.New("the CA has no roots yet")
			}
			if err == nil {
				pems := make([]string, 0, len(roots.Roots))
				for _, r := range roots.Roots {
					pems = append(pems, r.RootCert)
				}
				if err = a.tls.SetConnectCARoots(pems); err == nil {
					index = roots.Index
					continue
				}
			}
			a.logger.Debug("auto_encrypt: reading the Connect CA roots", "error", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// poolAt calls one server address through the connection pool.
type poolAt struct {
	pool interface {
		Call(ctx context.Context, addr, method string, args, reply any) error
	}
	addr string
}

// RPC implements structs.Caller.
func (p poolAt) RPC(ctx context.Context, method string, args, reply any) error {
	return p.pool.Call(ctx, p.addr, method, args, reply)
}
