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
	"github.com/trellis-mesh/trellis/internal/wait"
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

// autoCert is a client's auto_encrypt certificate with what came with it.
type autoCert struct {
	issued structs.IssuedCert
	// signer is the colon-hex AuthorityKeyId of the certificate: the key
	// of the root that signed it, compared with the active root's
	// SigningKeyID to notice a rotation.
	signer string
	// manualRoots are the servers' own CA certificates (ManualCARoots),
	// trusted with the Connect CA roots as these change.
	manualRoots []string
}

// autoEncryptSign asks the server behind caller to sign a new key's CSR
// and installs the certificate, and the roots of the answer as the ones
// the servers are verified with besides the CA files (Consul's
// auto_encrypt adds ManualCARoots and the Connect CA roots to its RPC
// client's pool).
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
	leaf, err := ca.ParseCert(reply.IssuedCert.CertPEM)
	if err != nil {
		return fmt.Errorf("agent: auto_encrypt: the server returned an unreadable certificate: %w", err)
	}
	if err := a.tls.SetAutoEncryptServerRoots(serverRoots(reply.ManualCARoots, reply.ConnectCARoots.Roots)); err != nil {
		return err
	}
	if err := a.tls.SetAutoEncryptCert(reply.IssuedCert.CertPEM, key); err != nil {
		return err
	}
	a.autoCert.Store(&autoCert{issued: reply.IssuedCert, signer: connect.HexString(leaf.AuthorityKeyId), manualRoots: reply.ManualCARoots})
	return nil
}

// serverRoots are the PEM certificates a client trusts servers with
// besides its CA files.
func serverRoots(manual []string, roots structs.CARoots) []string {
	out := append([]string(nil), manual...)
	for _, r := range roots {
		out = append(out, r.RootCert)
	}
	return out
}

// startAutoEncryptRenewal keeps a client's auto_encrypt certificate
// current through the router (any server, over TLS with the current
// certificate): renewed on leafcert's schedule (between 60 % and 90 % of
// its lifetime), and, as Consul's auto_encrypt watches the Connect CA
// roots, re-signed within rootChangeJitter once the active root is not
// the one that signed it. The roots watch also refreshes the roots the
// servers are verified with, so that a server certificate from a new root
// is accepted.
func (a *Agent) startAutoEncryptRenewal() {
	ctx, cancel := context.WithCancel(context.Background()) //nolint:gosec // cancelled by Shutdown through stopAutoEncrypt
	a.stopAutoEncrypt = cancel
	rotated := make(chan struct{}, 1)
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.watchRoots(ctx, a.router, func(roots *structs.IndexedCARoots) error {
			cur := a.autoCert.Load()
			if err := a.tls.SetAutoEncryptServerRoots(serverRoots(cur.manualRoots, roots.Roots)); err != nil {
				return err
			}
			if active := roots.Roots.Active(); active != nil && active.SigningKeyID != "" && active.SigningKeyID != cur.signer {
				select {
				case rotated <- struct{}{}:
				default:
				}
			}
			return nil
		})
	}()
	go func() {
		defer a.wg.Done()
		a.renewAutoEncrypt(ctx, rotated)
	}()
}

// renewAutoEncrypt is the renewal loop of startAutoEncryptRenewal.
func (a *Agent) renewAutoEncrypt(ctx context.Context, rotated <-chan struct{}) {
	for {
		cert := a.autoCert.Load()
		timer := time.NewTimer(time.Until(leafcert.RenewAt(cert.issued.ValidAfter, cert.issued.ValidBefore, time.Now())))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-rotated:
			timer.Stop()
			// Spread the re-signing of every client after a rotation, as
			// leafcert does for service leaves.
			if !wait.Sleep(ctx, wait.Jitter(a.rootChangeJitter)) {
				return
			}
		case <-timer.C:
		}
		backoff := time.Second
		for {
			err := a.autoEncryptSign(ctx, a.router)
			if err == nil {
				a.logger.Info("auto_encrypt: renewed the agent certificate")
				break
			}
			a.logger.Warn("auto_encrypt: renewing the agent certificate failed; retrying", "error", err, "wait", backoff)
			if !wait.Sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, autoEncryptRetryMax)
		}
	}
}

// watchRoots hands every change of the Connect CA roots, read by a
// blocking query through caller, to apply until ctx ends; a failed read
// or apply is retried after a second.
func (a *Agent) watchRoots(ctx context.Context, caller structs.Caller, apply func(*structs.IndexedCARoots) error) {
	var index uint64
	for {
		args := &structs.DCSpecificRequest{}
		args.MinQueryIndex, args.MaxQueryTime, args.AllowStale = index, 5*time.Minute, true
		var roots structs.IndexedCARoots
		err := structs.MethodConnectCARoots.Call(ctx, caller, args, &roots)
		if ctx.Err() != nil {
			return
		}
		if err == nil && len(roots.Roots) == 0 {
			err = errors.New("the CA has no roots yet")
		}
		if err == nil {
			if err = apply(&roots); err == nil {
				index = roots.Index
				continue
			}
		}
		a.logger.Debug("auto_encrypt: reading the Connect CA roots", "error", err)
		if !wait.Sleep(ctx, time.Second) {
			return
		}
	}
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
		a.watchRoots(ctx, a.server, func(roots *structs.IndexedCARoots) error {
			return a.tls.SetConnectCARoots(serverRoots(nil, roots.Roots))
		})
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
