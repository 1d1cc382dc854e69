package cli

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/trellis-mesh/trellis/connect/ca"
)

const tlsCACreateHelp = `
Usage: trellis tls ca create [options]

  Creates a new certificate authority for the agents' TLS certificates,
  written to <domain>-agent-ca.pem and <domain>-agent-ca-key.pem in the
  current directory (consul-agent-ca.pem by default), as Consul's command
  does. An existing file is never overwritten.`

// runTLSCACreate is Consul's `tls ca create`.
func runTLSCACreate(args []string, env *Env) int {
	fs := newFlagSet("tls ca create", tlsCACreateHelp, env.Stderr)
	days := fs.Int("days", 1825, "Number of days the CA is valid for.")
	domain := fs.String("domain", "consul", "Domain of the agents' DNS names; with -name-constraint the CA may sign names under it only.")
	constraint := fs.Bool("name-constraint", false, "Add name constraints for the CA: -domain, localhost and the -additional-name-constraint values.")
	var extra stringList
	fs.Var(&extra, "additional-name-constraint", "Add a name constraint for the CA. Can be specified multiple times.")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	certName, keyName := *domain+"-agent-ca.pem", *domain+"-agent-ca-key.pem"
	for _, f := range []string{certName, keyName} {
		if _, err := os.Stat(f); err == nil {
			fmt.Fprintf(env.Stderr, "%s: file exists\n", f)
			return 1
		}
	}
	cert, key, err := ca.NewAgentCA(ca.AgentCARequest{Domain: *domain, NameConstraint: *constraint,
		AdditionalConstraints: extra, Days: *days})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error creating the CA: %s\n", err)
		return 1
	}
	return writeTLSFiles(env, certName, cert, keyName, key)
}

const tlsCertCreateHelp = `
Usage: trellis tls cert create [options]

  Creates a certificate and key signed by the agent CA (-ca and -key) for
  a server (-server), a client agent (-client) or the CLI (-cli), written
  to <dc>-<kind>-<domain>-<n>.pem and <dc>-<kind>-<domain>-<n>-key.pem in
  the current directory with the first free n, as Consul's command does.
  A server certificate is valid for server.<dc>.<domain>, the name clients
  check with verify_server_hostname.`

// runTLSCertCreate is Consul's `tls cert create`.
func runTLSCertCreate(args []string, env *Env) int {
	fs := newFlagSet("tls cert create", tlsCertCreateHelp, env.Stderr)
	caFile := fs.String("ca", "#DOMAIN#-agent-ca.pem", "The CA certificate file.")
	keyFile := fs.String("key", "#DOMAIN#-agent-ca-key.pem", "The CA key file.")
	server := fs.Bool("server", false, "Generate a server certificate.")
	client := fs.Bool("client", false, "Generate a client certificate.")
	cli := fs.Bool("cli", false, "Generate a CLI certificate.")
	dc := fs.String("dc", "dc1", "Datacenter of the certificate.")
	domain := fs.String("domain", "consul", "Domain of the certificate's DNS names.")
	days := fs.Int("days", 365, "Number of days the certificate is valid for.")
	node := fs.String("node", "", "Also make a server certificate valid for <node>.server.<dc>.<domain>.")
	var dnsNames, ips stringList
	fs.Var(&dnsNames, "additional-dnsname", "Additional DNS name to add to the certificate. Can be specified multiple times.")
	fs.Var(&ips, "additional-ipaddress", "Additional IP address to add to the certificate. Can be specified multiple times.")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	kinds := 0
	for _, k := range []bool{*server, *client, *cli} {
		if k {
			kinds++
		}
	}
	if kinds != 1 {
		fmt.Fprintln(env.Stderr, "Please provide either -server, -client, or -cli")
		return 1
	}
	kind := "server"
	switch {
	case *client:
		kind = "client"
	case *cli:
		kind = "cli"
	}
	if *node != "" && kind != "server" {
		fmt.Fprintln(env.Stderr, "-node requires -server")
		return 1
	}
	cn := kind + "." + *dc + "." + *domain
	names := []string{cn, "localhost"}
	if *node != "" {
		names = append(names, *node+".server."+*dc+"."+*domain)
	}
	names = append(names, dnsNames...)
	addrs := []net.IP{net.ParseIP("127.0.0.1")}
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			fmt.Fprintf(env.Stderr, "Invalid -additional-ipaddress %q\n", s)
			return 1
		}
		addrs = append(addrs, ip)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if kind == "cli" {
		// The CLI only dials; it has no address of its own.
		addrs, usage = nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	caPath := strings.ReplaceAll(*caFile, "#DOMAIN#", *domain)
	keyPath := strings.ReplaceAll(*keyFile, "#DOMAIN#", *domain)
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error reading the CA: %s\n", err)
		return 1
	}
	caKey, err := os.ReadFile(keyPath)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error reading the CA key: %s\n", err)
		return 1
	}
	cert, key, err := ca.SignAgentCert(ca.AgentCertRequest{CACertPEM: string(caPEM), CAKeyPEM: string(caKey),
		CommonName: cn, DNSNames: names, IPs: addrs, ExtKeyUsage: usage, Days: *days})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error creating the certificate: %s\n", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "==> Using %s and %s\n", caPath, keyPath)
	prefix := fmt.Sprintf("%s-%s-%s", *dc, kind, *domain)
	for n := 0; ; n++ {
		certName := fmt.Sprintf("%s-%d.pem", prefix, n)
		keyName := fmt.Sprintf("%s-%d-key.pem", prefix, n)
		if exists(certName) || exists(keyName) {
			continue
		}
		return writeTLSFiles(env, certName, cert, keyName, key)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, os.ErrNotExist)
}

// writeTLSFiles writes a certificate (0644) and its key (0600), never over
// an existing file.
func writeTLSFiles(env *Env, certName, cert, keyName, key string) int {
	for _, f := range []struct {
		name, content string
		mode          os.FileMode
	}{{certName, cert, 0o644}, {keyName, key, 0o600}} {
		fh, err := os.OpenFile(f.name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error writing %s: %s\n", f.name, err)
			return 1
		}
		_, werr := fh.WriteString(f.content)
		if cerr := fh.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			fmt.Fprintf(env.Stderr, "Error writing %s: %s\n", f.name, werr)
			return 1
		}
		fmt.Fprintf(env.Stdout, "==> Saved %s\n", f.name)
	}
	return 0
}
