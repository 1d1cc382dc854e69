package agent

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

type grpcFileSet struct {
	ServiceID, Service, Dir, CertFile, KeyFile, CAFile string
	Ready                                              bool
}

func grpcFiles(t *testing.T, url, id string) (int, grpcFileSet, string) {
	t.Helper()
	code, body := get(t, url+"/v1/agent/connect/grpc-files/"+id)
	var f grpcFileSet
	if code == 200 {
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			t.Fatalf("grpc-files: %v in %s", err, body)
		}
	}
	return code, f, body
}

// checkGRPCFiles checks that the files are a usable identity for service:
// the key matches the leaf, the leaf names the service's SPIFFE ID and
// verifies against ca.pem, and the key is private to the agent's user.
func checkGRPCFiles(t *testing.T, f grpcFileSet, service string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		t.Fatalf("cert and key: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.URIs) != 1 || !strings.HasSuffix(leaf.URIs[0].String(), "/svc/"+service) {
		t.Fatalf("leaf URIs %v, want the SPIFFE ID of %s", leaf.URIs, service)
	}
	caPEM, err := os.ReadFile(f.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.pem holds no certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		t.Fatalf("leaf does not verify against ca.pem: %v", err)
	}
	if fi, err := os.Stat(f.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key.pem mode %v (%v), want 0600", fi.Mode(), err)
	}
	return leaf
}

func TestGRPCCertFilesFollowLocalServices(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, url, stop := devAgent(t)
	waitFor(t, "the CA", func() bool {
		_, b := get(t, url+"/v1/connect/ca/roots")
		return strings.Contains(b, `"Active":true`)
	})
	for _, def := range []string{
		`{"ID":"api-1","Name":"api","Port":9001,"Connect":{"Native":true}}`,
		`{"ID":"web","Name":"web","Port":9002}`,
	} {
		if code, msg := put(t, url+"/v1/agent/service/register", def); code != 200 {
			t.Fatalf("register: %d %s", code, msg)
		}
	}
	code, f, body := grpcFiles(t, url, "api-1")
	if code != 200 || !f.Ready || f.Service != "api" || f.Dir != filepath.Join(a.grpcCerts.Dir(), "api-1") {
		t.Fatalf("grpc-files api-1: %d %s", code, body)
	}
	checkGRPCFiles(t, f, "api")

	for _, tc := range []struct {
		id   string
		code int
		msg  string
	}{
		{"nope", 404, "unknown service ID: nope"},
		{"web", 400, "not Connect-native"},
		{"", 400, "Missing service ID"},
	} {
		if code, _, body := grpcFiles(t, url, tc.id); code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("grpc-files %q: %d %s, want %d %q", tc.id, code, body, tc.code, tc.msg)
		}
	}

	// A CA rotation adds the new root to ca.pem at once, and the leaf is
	// re-signed under it.
	old, _ := os.ReadFile(f.CAFile)
	if code, msg := put(t, url+"/v1/connect/ca/configuration", `{"Provider":"consul","Config":{"PrivateKeyType":"rsa","PrivateKeyBits":2048}}`); code != 200 {
		t.Fatalf("rotate: %d %s", code, msg)
	}
	waitFor(t, "the new root in ca.pem", func() bool {
		b, _ := os.ReadFile(f.CAFile)
		return strings.Count(string(b), "BEGIN CERTIFICATE") == 2 && strings.HasPrefix(string(b), strings.TrimSpace(string(old)))
	})

	if code, msg := put(t, url+"/v1/agent/service/deregister/api-1", ""); code != 200 {
		t.Fatalf("deregister: %d %s", code, msg)
	}
	waitFor(t, "the files to go", func() bool {
		_, err := os.Stat(f.Dir)
		return errors.Is(err, os.ErrNotExist)
	})
	// A -dev agent's files live in a temporary directory that goes with it.
	root := a.grpcCerts.Dir()
	stop()
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary directory %s left after shutdown: %v", root, err)
	}
}
