package cli

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/connect/ca"
)

// createPKI runs `tls ca create` and `tls cert create` in a fresh current
// directory and returns it.
func createPKI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"tls", "ca", "create"},
		{"tls", "cert", "create", "-server", "-dc", "dc1", "-additional-dnsname", "extra.example"},
		{"tls", "cert", "create", "-server", "-dc", "dc1"},
		{"tls", "cert", "create", "-client"},
		{"tls", "cert", "create", "-cli"},
	} {
		if code, out, errOut := runCLI(args, nil, ""); code != 0 {
			t.Fatalf("%v: exit %d stdout %q stderr %q", args, code, out, errOut)
		}
	}
	return dir
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.ParseCert(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTLSCreate(t *testing.T) {
	dir := createPKI(t)
	for _, f := range []string{"consul-agent-ca.pem", "consul-agent-ca-key.pem",
		"dc1-server-consul-0.pem", "dc1-server-consul-0-key.pem", "dc1-server-consul-1.pem", "dc1-server-consul-1-key.pem",
		"dc1-client-consul-0.pem", "dc1-client-consul-0-key.pem", "dc1-cli-consul-0.pem", "dc1-cli-consul-0-key.pem"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	root := readCert(t, "consul-agent-ca.pem")
	roots := x509.NewCertPool()
	roots.AddCert(root)
	for _, tc := range []struct {
		file  string
		names []string
		usage x509.ExtKeyUsage
	}{
		{"dc1-server-consul-0.pem", []string{"server.dc1.consul", "localhost", "extra.example"}, x509.ExtKeyUsageServerAuth},
		{"dc1-client-consul-0.pem", []string{"client.dc1.consul", "localhost"}, x509.ExtKeyUsageClientAuth},
		{"dc1-cli-consul-0.pem", []string{"cli.dc1.consul", "localhost"}, x509.ExtKeyUsageClientAuth},
	} {
		c := readCert(t, tc.file)
		for _, n := range tc.names {
			if !slices.Contains(c.DNSNames, n) {
				t.Errorf("%s: DNS names %v lack %s", tc.file, c.DNSNames, n)
			}
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s does not verify against the CA: %v", tc.file, err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tls", "ca", "create"}, "file exists"},
		{[]string{"tls", "cert", "create"}, "Please provide either -server, -client, or -cli"},
		{[]string{"tls", "cert", "create", "-server", "-client"}, "Please provide either"},
		{[]string{"tls", "cert", "create", "-client", "-ca", "nope.pem"}, "Error reading the CA"},
	} {
		if code, _, errOut := runCLI(tc.args, nil, ""); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d stderr %q, want 1 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestHTTPSClientFlags: every client command reaches an HTTPS agent that
// verifies client certificates through the flags or Consul's variables.
func TestHTTPSClientFlags(t *testing.T) {
	dir := createPKI(t)
	p := func(f string) string { return filepath.Join(dir, f) }
	pair, err := tls.LoadX509KeyPair(p("dc1-server-consul-0.pem"), p("dc1-server-consul-0-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(readCert(t, p("consul-agent-ca.pem")))
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"Key":"k","Value":"dg=="}]`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	hostPort := strings.TrimPrefix(srv.URL, "https://")
	cert, key, caFile := p("dc1-cli-consul-0.pem"), p("dc1-cli-consul-0-key.pem"), p("consul-agent-ca.pem")

	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		ok   bool
	}{
		{"flags", []string{"-http-addr", "https://" + hostPort, "-ca-file", caFile, "-client-cert", cert, "-client-key", key}, nil, true},
		{"environment", nil, map[string]string{"CONSUL_HTTP_ADDR": "https://" + hostPort, "CONSUL_CACERT": caFile,
			"CONSUL_CLIENT_CERT": cert, "CONSUL_CLIENT_KEY": key}, true},
		{"CONSUL_HTTP_SSL", nil, map[string]string{"CONSUL_HTTP_ADDR": hostPort, "CONSUL_HTTP_SSL": "true", "CONSUL_CACERT": caFile,
			"CONSUL_CLIENT_CERT": cert, "CONSUL_CLIENT_KEY": key}, true},
		{"ca path", []string{"-http-addr", "https://" + hostPort, "-ca-path", mkCADir(t, caFile), "-client-cert", cert, "-client-key", key}, nil, true},
		{"server name", []string{"-http-addr", "https://" + hostPort, "-ca-file", caFile, "-client-cert", cert, "-client-key", key,
			"-tls-server-name", "server.dc1.consul"}, nil, true},
		{"wrong server name", []string{"-http-addr", "https://" + hostPort, "-ca-file", caFile, "-client-cert", cert, "-client-key", key,
			"-tls-server-name", "server.dc2.consul"}, nil, false},
		{"no client certificate", []string{"-http-addr", "https://" + hostPort, "-ca-file", caFile}, nil, false},
		{"unknown CA", []string{"-http-addr", "https://" + hostPort, "-client-cert", cert, "-client-key", key}, nil, false},
		{"CONSUL_HTTP_SSL_VERIFY=false", []string{"-http-addr", "https://" + hostPort, "-client-cert", cert, "-client-key", key},
			map[string]string{"CONSUL_HTTP_SSL_VERIFY": "false"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{"kv", "get"}, tc.args...), "k")
			code, out, errOut := runCLI(args, tc.env, "")
			if ok := code == 0 && out == "v\n"; ok != tc.ok {
				t.Fatalf("exit %d stdout %q stderr %q, want ok=%v", code, out, errOut, tc.ok)
			}
		})
	}
}

func mkCADir(t *testing.T, caFile string) string {
	t.Helper()
	d := t.TempDir()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "ca.pem"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}
