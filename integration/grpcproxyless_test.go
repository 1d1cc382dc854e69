package integration

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func checkSPIFFE(cert *x509.Certificate, want string) error {
	if len(cert.URIs) != 1 || cert.URIs[0].String() != want {
		return fmt.Errorf("backend certificate URIs %v, want %s", cert.URIs, want)
	}
	return nil
}

// TestGRPCBootstrapFiles: against real agents, the bootstrap of
// `connect grpc-bootstrap` names files the agent keeps: a leaf with the
// service's SPIFFE ID and its key, verified by ca.pem; they survive an
// agent restart and go with the service.
func TestGRPCBootstrapFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process scenario")
	}
	m := startGRPCMesh(t)
	m.register(m.client, nativeService("web", "web", 7000, nil))
	var boot struct {
		Node struct {
			ID, Cluster string
			Metadata    map[string]string
		}
		CertificateProviders map[string]struct {
			PluginName string `json:"plugin_name"`
			Config     struct {
				Cert string `json:"certificate_file"`
				Key  string `json:"private_key_file"`
				CA   string `json:"ca_certificate_file"`
			}
		} `json:"certificate_providers"`
		XDSServers []struct {
			ServerURI string `json:"server_uri"`
		} `json:"xds_servers"`
	}
	if err := json.Unmarshal(m.grpcBootstrap(m.client, "web"), &boot); err != nil {
		t.Fatal(err)
	}
	if boot.Node.ID != "web" || boot.Node.Cluster != "web" || boot.Node.Metadata["TRELLIS_GRPC"] != "true" || boot.XDSServers[0].ServerURI != m.client.GRPCAddr() {
		t.Fatalf("bootstrap: %+v", boot)
	}
	files := boot.CertificateProviders["trellis"].Config
	if want := filepath.Join(m.client.DataDir(), "grpc-certs", "web"); filepath.Dir(files.Cert) != want {
		t.Fatalf("files %+v, want them in %s", files, want)
	}
	check := func() error {
		pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return err
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return err
		}
		if err := checkSPIFFE(leaf, m.spiffeID("web")); err != nil {
			return err
		}
		caPEM, err := os.ReadFile(files.CA)
		if err != nil {
			return err
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(caPEM)
		_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		return err
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	if err := m.client.Restart(); err != nil {
		t.Fatal(err)
	}
	waitClientsReady(t, m.c)
	if err := check(); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	m.deregister(m.client, "web")
	eventually(t, syncTimeout, "the files to go", func() error {
		if _, err := os.Stat(filepath.Dir(files.Cert)); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("still there: %w", err)
		}
		return nil
	})
}
