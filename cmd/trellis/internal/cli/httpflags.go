package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hashicorp/consul/api"
)

// httpFlags are Consul's common client flags: -http-addr, -token and
// -token-file for every client command, -datacenter and -stale for the
// ones that read through a server.
type httpFlags struct {
	addr       string
	token      string
	tokenFile  string
	datacenter string
	stale      bool
	// TLS to the agent's HTTPS API: -ca-file, -ca-path, -client-cert,
	// -client-key, -tls-server-name (or CONSUL_CACERT, CONSUL_CAPATH,
	// CONSUL_CLIENT_CERT, CONSUL_CLIENT_KEY, CONSUL_TLS_SERVER_NAME).
	caFile, caPath, clientCert, clientKey, tlsServerName string
}

// register adds the client flags, and the server flags when server is
// true. Defaults come from the environment later, in client, so that an
// explicit flag always wins over CONSUL_HTTP_ADDR.
func (h *httpFlags) register(fs *flag.FlagSet, server bool) {
	fs.StringVar(&h.addr, "http-addr", "", "The `address` and port of the agent HTTP endpoint (default CONSUL_HTTP_ADDR or "+DefaultHTTPAddr+"). Also https:// or unix:// addresses.")
	fs.StringVar(&h.token, "token", "", "ACL token to use in the request (default CONSUL_HTTP_TOKEN).")
	fs.StringVar(&h.tokenFile, "token-file", "", "File containing the ACL token (default CONSUL_HTTP_TOKEN_FILE).")
	fs.StringVar(&h.caFile, "ca-file", "", "Path to a CA file to use for TLS when communicating with the agent (default CONSUL_CACERT).")
	fs.StringVar(&h.caPath, "ca-path", "", "Path to a directory of CA certificates to use for TLS (default CONSUL_CAPATH).")
	fs.StringVar(&h.clientCert, "client-cert", "", "Path to a client cert file to use for TLS when verify_incoming is enabled (default CONSUL_CLIENT_CERT).")
	fs.StringVar(&h.clientKey, "client-key", "", "Path to a client key file to use for TLS when verify_incoming is enabled (default CONSUL_CLIENT_KEY).")
	fs.StringVar(&h.tlsServerName, "tls-server-name", "", "The server name to use as the SNI host when connecting via TLS (default CONSUL_TLS_SERVER_NAME).")
	if server {
		fs.StringVar(&h.datacenter, "datacenter", "", "Name of the datacenter to query (default the agent's).")
		fs.BoolVar(&h.stale, "stale", false, "Permit any server to answer, not only the leader.")
	}
}

// connect is client for a command's run: when it fails it prints Consul's
// message and the command exits 1.
func (h *httpFlags) connect(env *Env) (*apiClient, bool) {
	c, err := h.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return nil, false
	}
	return c, true
}

// client builds the API client from the flags, then the environment.
func (h *httpFlags) client(env *Env) (*apiClient, error) {
	cfg := clientConfig{
		addr:      firstNonEmpty(h.addr, env.Getenv("CONSUL_HTTP_ADDR")),
		dc:        h.datacenter,
		stale:     h.stale,
		sslVerify: true,
		tls: api.TLSConfig{
			CAFile:   firstNonEmpty(h.caFile, env.Getenv("CONSUL_CACERT")),
			CAPath:   firstNonEmpty(h.caPath, env.Getenv("CONSUL_CAPATH")),
			CertFile: firstNonEmpty(h.clientCert, env.Getenv("CONSUL_CLIENT_CERT")),
			KeyFile:  firstNonEmpty(h.clientKey, env.Getenv("CONSUL_CLIENT_KEY")),
			Address:  firstNonEmpty(h.tlsServerName, env.Getenv("CONSUL_TLS_SERVER_NAME")),
		},
	}
	// Token precedence: -token, -token-file, CONSUL_HTTP_TOKEN,
	// CONSUL_HTTP_TOKEN_FILE.
	switch {
	case h.token != "":
		cfg.token = h.token
	case h.tokenFile != "":
		t, err := readToken(h.tokenFile)
		if err != nil {
			return nil, err
		}
		cfg.token = t
	case env.Getenv("CONSUL_HTTP_TOKEN") != "":
		cfg.token = env.Getenv("CONSUL_HTTP_TOKEN")
	case env.Getenv("CONSUL_HTTP_TOKEN_FILE") != "":
		t, err := readToken(env.Getenv("CONSUL_HTTP_TOKEN_FILE"))
		if err != nil {
			return nil, err
		}
		cfg.token = t
	}
	if v := env.Getenv("CONSUL_HTTP_SSL"); v != "" {
		ssl, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("invalid CONSUL_HTTP_SSL %q", v)
		}
		cfg.ssl = ssl
	}
	if v := env.Getenv("CONSUL_HTTP_SSL_VERIFY"); v != "" {
		verify, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("invalid CONSUL_HTTP_SSL_VERIFY %q", v)
		}
		cfg.sslVerify = verify
	}
	return newAPIClient(cfg)
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// newFlagSet returns a flag set that reports parse errors and -h usage to
// stderr with the command's help text.
func newFlagSet(name, help string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), strings.TrimSpace(help))
		fmt.Fprintln(fs.Output())
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; ok is false when the command should stop, with
// code its exit code (0 after -h, 1 after a bad flag, as Consul).
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 1, false
	}
	return 0, true
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// keyValueFlag is a repeatable key=value flag (Consul's FlagMapValue).
type keyValueFlag map[string]string

func (m *keyValueFlag) String() string { return "" }
func (m *keyValueFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("missing \"=\" in %q", v)
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = val
	return nil
}
