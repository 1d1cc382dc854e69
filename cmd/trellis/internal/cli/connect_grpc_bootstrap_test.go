package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"

	"github.com/trellis-mesh/trellis/connect/ca"
)

// Agent answers of the grpc-bootstrap tests.
const (
	servicesNativeAPI = `{
		"api-1": {"ID": "api-1", "Service": "api", "Port": 9001, "Connect": {"Native": true}},
		"web": {"ID": "web", "Service": "web", "Port": 8080}}`
	servicesTwoNativeAPIs = `{
		"api-2": {"ID": "api-2", "Service": "api", "Connect": {"Native": true}},
		"api-1": {"ID": "api-1", "Service": "api", "Connect": {"Native": true}}}`
	grpcFilesAPI1 = `{"ServiceID": "api-1", "Service": "api", "Dir": "/data/grpc-certs/api-1",
		"CertFile": "/data/grpc-certs/api-1/cert.pem", "KeyFile": "/data/grpc-certs/api-1/key.pem",
		"CAFile": "/data/grpc-certs/api-1/ca.pem", "Ready": true}`
)

func TestConnectGRPCBootstrap(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "agent-ca.pem")
	pem, _, err := ca.NewAgentCA(ca.AgentCARequest{Domain: "consul", Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, []byte(pem), 0o600); err != nil {
		t.Fatal(err)
	}
	oneNative := map[string]reply{
		"GET /v1/agent/services":                 {body: servicesNativeAPI},
		"GET /v1/agent/connect/grpc-files/api-1": {body: grpcFilesAPI1},
	}
	tests := []struct {
		name      string
		args      []string
		vars      map[string]string
		routes    map[string]reply
		code      int
		check     func(t *testing.T, b grpcBootstrapFile)
		stderrHas []string
	}{
		{
			name: "by service name, plaintext gRPC from CONSUL_GRPC_ADDR", args: []string{"-service", "api"},
			vars: map[string]string{"CONSUL_GRPC_ADDR": "localhost:8602"}, routes: oneNative,
			check: func(t *testing.T, b grpcBootstrapFile) {
				s := b.XDSServers[0]
				if s.ServerURI != "127.0.0.1:8602" || s.ChannelCreds[0].Type != "insecure" || strings.Join(s.ServerFeatures, ",") != "xds_v3,ignore_resource_deletion" {
					t.Errorf("xds server: %+v", s)
				}
				if b.Node.ID != "api-1" || b.Node.Cluster != "api" || b.Node.Metadata["TRELLIS_GRPC"] != "true" || b.Node.Metadata["partition"] != "default" {
					t.Errorf("node: %+v", b.Node)
				}
				p := b.CertificateProviders["trellis"]
				if p.PluginName != "file_watcher" || p.Config["certificate_file"] != "/data/grpc-certs/api-1/cert.pem" ||
					p.Config["private_key_file"] != "/data/grpc-certs/api-1/key.pem" || p.Config["ca_certificate_file"] != "/data/grpc-certs/api-1/ca.pem" ||
					p.Config["refresh_interval"] != "5s" {
					t.Errorf("certificate provider: %+v", p)
				}
				if b.ServerListenerResourceNameTemplate != "grpc/server?xds.resource.listening_address=%s" {
					t.Errorf("server template %q", b.ServerListenerResourceNameTemplate)
				}
			},
		},
		{
			name: "gRPC-TLS with a CA, by ID", args: []string{"-service-id", "api-1", "-grpc-addr", "https://127.0.0.1:8503", "-grpc-ca-file", caFile, "-refresh-interval", "90s"},
			routes: oneNative,
			check: func(t *testing.T, b grpcBootstrapFile) {
				s := b.XDSServers[0]
				if s.ServerURI != "127.0.0.1:8503" || s.ChannelCreds[0].Type != "tls" || s.ChannelCreds[0].Config["ca_certificate_file"] != caFile {
					t.Errorf("xds server: %+v", s)
				}
				if got := b.CertificateProviders["trellis"].Config["refresh_interval"]; got != "90s" {
					t.Errorf("refresh interval %v, want protobuf JSON 90s", got)
				}
			},
		},
		{
			name: "unix socket", args: []string{"-service", "api", "-grpc-addr", "unix:///run/trellis/grpc.sock"}, routes: oneNative,
			check: func(t *testing.T, b grpcBootstrapFile) {
				if b.XDSServers[0].ServerURI != "unix:///run/trellis/grpc.sock" {
					t.Errorf("server_uri %q", b.XDSServers[0].ServerURI)
				}
			},
		},
		{
			name: "a token cannot be carried", args: []string{"-service", "api", "-token", "secret"}, routes: oneNative,
			stderrHas: []string{"cannot carry a Consul ACL token"},
		},
		{
			name: "files not written yet", args: []string{"-service-id", "api-1"},
			routes:    map[string]reply{"GET /v1/agent/connect/grpc-files/api-1": {body: strings.Replace(grpcFilesAPI1, `"Ready": true`, `"Ready": false`, 1)}},
			stderrHas: []string{"has not written the certificate files of api-1 yet"},
		},
		{name: "no service flag", code: 1, stderrHas: []string{"-service or -service-id is required"}},
		{
			name: "no native instance", args: []string{"-service", "web"}, routes: oneNative, code: 1,
			stderrHas: []string{"No Connect-native service web is registered on the local agent"},
		},
		{
			name: "several instances", args: []string{"-service", "api"}, code: 1,
			routes:    map[string]reply{"GET /v1/agent/services": {body: servicesTwoNativeAPIs}},
			stderrHas: []string{"Run with -service-id and one of the following IDs: api-1, api-2"},
		},
		{
			name: "ID of another service", args: []string{"-service", "web", "-service-id", "api-1"}, routes: oneNative, code: 1,
			stderrHas: []string{"Service api-1 is an instance of api, not web"},
		},
		{
			name: "unknown ID", args: []string{"-service-id", "nope"}, code: 1,
			routes:    map[string]reply{"GET /v1/agent/connect/grpc-files/nope": {status: 404, body: "unknown service ID: nope"}},
			stderrHas: []string{"Failed looking up the certificate files of nope", "unknown service ID: nope"},
		},
		{name: "refresh too short", args: []string{"-service", "api", "-refresh-interval", "10ms"}, code: 1, stderrHas: []string{"at least 1s"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t, tc.routes)
			vars := map[string]string{"CONSUL_HTTP_ADDR": f.addr()}
			for k, v := range tc.vars {
				vars[k] = v
			}
			code, out, errOut := runCLI(append([]string{"connect", "grpc-bootstrap"}, tc.args...), vars, "")
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errOut)
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr %q lacks %q", errOut, s)
				}
			}
			if tc.check != nil {
				var b grpcBootstrapFile
				if err := json.Unmarshal([]byte(out), &b); err != nil {
					t.Fatalf("bootstrap: %v in %s", err, out)
				}
				tc.check(t, b)
			}
		})
	}
}

// TestConnectGRPCBootstrapAcceptedByGRPCGo hands the command's bootstrap
// to grpc-go's own xDS resolver (its bootstrap parser and file_watcher
// plugin) and checks what its xDS client then tells a management server:
// the node that selects the agent's gRPC generators.
func TestConnectGRPCBootstrapAcceptedByGRPCGo(t *testing.T) {
	ads := startRecordingADS(t)
	f := newFakeAgent(t, map[string]reply{
		"GET /v1/agent/services":                 {body: servicesNativeAPI},
		"GET /v1/agent/connect/grpc-files/api-1": {body: grpcFilesAPI1},
	})
	out := filepath.Join(t.TempDir(), "xds.json")
	code, _, errOut := runCLI([]string{"connect", "grpc-bootstrap", "-service", "api", "-out", out},
		map[string]string{"CONSUL_HTTP_ADDR": f.addr(), "CONSUL_GRPC_ADDR": ads.addr}, "")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	contents, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	// From here on, only grpc-go's goroutines: they must end with the
	// connection.
	before := goleak.IgnoreCurrent()
	builder, err := xds.NewXDSResolverWithConfigForTesting(contents)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///api", grpc.WithResolvers(builder), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	conn.Connect()
	var node *corev3.Node
	select {
	case node = <-ads.nodes:
	case <-time.After(30 * time.Second):
		t.Fatal("grpc-go never opened an xDS stream with the bootstrap")
	}
	_ = conn.Close()
	if node.GetId() != "api-1" || node.GetCluster() != "api" {
		t.Errorf("node id %q cluster %q", node.GetId(), node.GetCluster())
	}
	md := node.GetMetadata().GetFields()
	for k, want := range map[string]string{"TRELLIS_GRPC": "true", "namespace": "default", "partition": "default"} {
		if got := md[k].GetStringValue(); got != want {
			t.Errorf("node metadata %s = %q, want %q", k, got, want)
		}
	}
	ads.stop()
	goleak.VerifyNone(t, before)
}

// recordingADS is a management server that records the node of each
// stream's first request and answers nothing.
type recordingADS struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	addr  string
	nodes chan *corev3.Node
	stop  func()
}

func startRecordingADS(t *testing.T) *recordingADS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	r := &recordingADS{addr: ln.Addr().String(), nodes: make(chan *corev3.Node, 16)}
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(srv, r)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	var once bool
	r.stop = func() {
		if once {
			return
		}
		once = true
		srv.Stop()
		<-done
	}
	t.Cleanup(r.stop)
	return r
}

func (r *recordingADS) StreamAggregatedResources(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	req, err := s.Recv()
	if err != nil {
		return err
	}
	select {
	case r.nodes <- req.GetNode():
	default:
	}
	ctx, cancel := context.WithCancel(s.Context())
	defer cancel()
	for ctx.Err() == nil {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
	return nil
}
