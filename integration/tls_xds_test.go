package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/trellis-mesh/trellis/integration/harness"
	"github.com/trellis-mesh/trellis/xds/bootstrap"
)

// TestXDSOverGRPCTLS: an agent serving xDS on ports.grpc_tls only (the
// plaintext gRPC port off). `connect envoy -bootstrap -grpc-addr https://...
// -ca-file F` makes a bootstrap that passes the strict parse, speaks TLS to
// that port and names F as the trusted CA; an ADS client that trusts what
// the bootstrap names gets the proxy's whole configuration over TLS, and a
// plaintext client to the same port gets nothing.
func TestXDSOverGRPCTLS(t *testing.T) {
	bin := requireBinary(t)
	ctx := scenarioContext(t)
	pki := newTestPKI(t, "pki")
	srvCert, srvKey := pki.issue(t, "dc1-server-consul-0", "server.dc1.consul", time.Now(), 30)
	ports := newPorts(t)
	grpcTLS, err := ports.Port()
	if err != nil {
		t.Fatal(err)
	}
	conf := tlsConfig(pki.caFile, srvCert, srvKey)
	// Envoy presents no client certificate to the agent (Consul's
	// bootstrap configures none), so gRPC-TLS verifies only the server.
	conf["tls"].(map[string]any)["grpc"] = map[string]any{"verify_incoming": false}
	c := harness.StartDev(t, harness.DevConfig{Binary: bin, Ports: ports,
		ExtraArgs: append(configFile(t, "dev-tls.json", conf), "-grpc-port", "-1", "-grpc-tls-port", strconv.Itoa(grpcTLS))})
	dev := waitLeader(t, c, clusterStartTimeout)
	tlsAddr := net.JoinHostPort(harness.Loopback, strconv.Itoa(grpcTLS))

	rc := newRawClient(t)
	if err := registerService(ctx, rc, dev.HTTPAddr(), sidecarService("web", "web", 8080)); err != nil {
		t.Fatal(err)
	}

	res := runCLI(ctx, t, "connect", "envoy", "-bootstrap", "-proxy-id", "web-sidecar-proxy",
		"-http-addr", dev.HTTPAddr(), "-grpc-addr", "https://"+tlsAddr, "-ca-file", pki.caFile)
	if res.code != 0 {
		t.Fatalf("%v", res)
	}
	b, err := bootstrap.Parse([]byte(res.stdout))
	if err != nil {
		t.Fatalf("the bootstrap fails the strict parse: %v\n%s", err, res.stdout)
	}
	agent := b.GetStaticResources().GetClusters()[0]
	sa := agent.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if got := net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))); got != tlsAddr {
		t.Errorf("bootstrap dials the agent at %s, want the gRPC-TLS port %s", got, tlsAddr)
	}
	var up tlsv3.UpstreamTlsContext
	if err := agent.GetTransportSocket().GetTypedConfig().UnmarshalTo(&up); err != nil {
		t.Fatalf("the agent cluster has no TLS transport socket: %v", err)
	}
	named := up.GetCommonTlsContext().GetValidationContext().GetTrustedCa().GetFilename()
	if named != pki.caFile {
		t.Fatalf("bootstrap trusts CA file %q, want %q", named, pki.caFile)
	}

	// The ADS client trusts what the bootstrap names, as Envoy would.
	caPEM, err := os.ReadFile(named)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	for _, proto := range []string{protoDelta, protoSotW} {
		ads := startADS(t, adsClientConfig{Label: "web " + proto + "@grpc-tls", Protocol: proto, Addr: tlsAddr,
			ProxyID: "web-sidecar-proxy", TLS: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}})
		v := ads.waitSettled(meshSettleTimeout, settleQuiet)
		if len(v.Held[ldsType]) == 0 || len(v.Held[cdsType]) == 0 {
			t.Errorf("%s: settled without listeners or clusters: %v", proto, v)
		}
	}

	t.Run("plaintext to the gRPC-TLS port is refused", func(t *testing.T) {
		conn, err := grpc.NewClient(tlsAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(sctx)
		if err == nil {
			_ = s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsType})
			var resp *discoveryv3.DeltaDiscoveryResponse
			if resp, err = s.Recv(); err == nil {
				t.Fatalf("a plaintext stream got a response: %v", resp)
			}
		}
		t.Logf("plaintext stream refused: %v", err)
	})
}
