package checks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/trellis-mesh/trellis/structs"
)

// grpcHealthServer is a real gRPC server with the standard health service.
type grpcHealthServer struct {
	addr   string
	health *health.Server
	srv    *grpc.Server
	done   chan struct{}
	once   sync.Once
}

func startGRPCHealth(t *testing.T, opts ...grpc.ServerOption) *grpcHealthServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &grpcHealthServer{addr: ln.Addr().String(), health: health.NewServer(), srv: grpc.NewServer(opts...),
		done: make(chan struct{})}
	healthpb.RegisterHealthServer(g.srv, g.health)
	g.health.SetServingStatus("api", healthpb.HealthCheckResponse_SERVING)
	g.health.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	go func() {
		defer close(g.done)
		_ = g.srv.Serve(ln)
	}()
	t.Cleanup(g.stop)
	return g
}

// stop stops the server and waits for Serve to return; idempotent.
func (g *grpcHealthServer) stop() {
	g.once.Do(func() {
		g.srv.Stop()
		<-g.done
	})
}

func TestGRPCCheckResults(t *testing.T) {
	g := startGRPCHealth(t)
	tests := []struct {
		name       string
		target     string
		wantStatus string
		wantOutput string // exact when set
		contains   string
	}{
		{"whole server", g.addr, structs.HealthPassing, "gRPC check " + g.addr + ": success", ""},
		{"serving service", g.addr + "/api", structs.HealthPassing, "gRPC check " + g.addr + "/api: success", ""},
		{"not serving service", g.addr + "/down", structs.HealthCritical, "gRPC " + g.addr + "/down serving status: NOT_SERVING", ""},
		{"unknown service", g.addr + "/nope", structs.HealthCritical, "", "NotFound"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			c := NewGRPCCheck(GRPCCheckConfig{CheckID: "g", Target: tc.target, Interval: testInterval, Notifier: rec})
			c.Start()
			defer c.Stop()
			u := rec.waitFor(t, "g", "a result", func(update) bool { return true })
			if u.status != tc.wantStatus {
				t.Fatalf("status %q (output %q), want %q", u.status, u.output, tc.wantStatus)
			}
			if tc.wantOutput != "" && u.output != tc.wantOutput {
				t.Fatalf("output %q, want %q", u.output, tc.wantOutput)
			}
			if !strings.Contains(u.output, tc.contains) {
				t.Fatalf("output %q does not contain %q", u.output, tc.contains)
			}
		})
	}
}

func TestGRPCCheckFollowsServingStatusAndServer(t *testing.T) {
	g := startGRPCHealth(t)
	rec := newRecorder()
	c := NewGRPCCheck(GRPCCheckConfig{CheckID: "g", Target: g.addr + "/api", Interval: testInterval,
		Timeout: time.Second, Notifier: rec})
	c.Start()
	defer c.Stop()

	rec.waitStatus(t, "g", structs.HealthPassing)
	g.health.SetServingStatus("api", healthpb.HealthCheckResponse_NOT_SERVING)
	rec.waitStatus(t, "g", structs.HealthCritical)
	g.health.SetServingStatus("api", healthpb.HealthCheckResponse_SERVING)
	rec.waitStatus(t, "g", structs.HealthPassing)
	g.stop()
	u := rec.waitStatus(t, "g", structs.HealthCritical)
	if !strings.Contains(u.output, "Unavailable") {
		t.Fatalf("output %q", u.output)
	}
}

func TestGRPCCheckTLS(t *testing.T) {
	g := startGRPCHealth(t, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})))
	tests := []struct {
		name       string
		def        structs.CheckType
		wantStatus string
	}{
		{"TLS with skip verify", structs.CheckType{GRPCUseTLS: true, TLSSkipVerify: true}, structs.HealthPassing},
		{"TLS with an unknown authority", structs.CheckType{GRPCUseTLS: true}, structs.HealthCritical},
		{"plaintext against a TLS server", structs.CheckType{TLSSkipVerify: true}, structs.HealthCritical},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			m, err := NewManager(Config{Notifier: rec, MinInterval: testInterval})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			def := tc.def
			def.GRPC, def.Interval, def.Timeout = g.addr+"/api", dur(testInterval), dur(time.Second)
			if err := m.Add("g", &def, ""); err != nil {
				t.Fatal(err)
			}
			u := rec.waitFor(t, "g", "a result", func(update) bool { return true })
			if u.status != tc.wantStatus {
				t.Fatalf("status %q (output %q), want %q", u.status, u.output, tc.wantStatus)
			}
		})
	}
}

// selfSigned makes a throwaway certificate for 127.0.0.1.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "grpc-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
