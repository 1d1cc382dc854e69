package integration

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// The proxyless gRPC scenarios: grpc-go's own xDS resolver, balancer and
// xDS-enabled servers, configured only by `trellis connect grpc-bootstrap`,
// against a 1-server cluster with one client agent. The backends and the
// client run in the test process; every process and listener binds
// 127.0.0.1.

// startGRPCMesh starts the cluster, waits for the CA and makes api speak
// gRPC (the protocol that routes and splits need).
func startGRPCMesh(t *testing.T) *mesh {
	t.Helper()
	ctx := scenarioContext(t)
	c, leader := startAgentCluster(t, agentClusterConfig{servers: 1, clients: 1})
	m := &mesh{t: t, ctx: ctx, rc: newRawClient(t), c: c, leader: leader, client: c.Clients()[0], server: leader}
	t.Cleanup(m.checkAgents)
	eventually(t, 10*time.Second, "CA roots", func() error {
		r, err := m.roots()
		if err != nil {
			return err
		}
		if r.TrustDomain == "" || r.ActiveRootID == "" {
			return fmt.Errorf("no active root yet: %+v", r)
		}
		m.trustDomain = r.TrustDomain
		return nil
	})
	m.configEntry(map[string]any{"Kind": "service-defaults", "Name": "api", "Protocol": "grpc"})
	return m
}

// nativeService is the registration of a Connect-native instance.
func nativeService(id, name string, port int, meta map[string]string) map[string]any {
	def := map[string]any{"ID": id, "Name": name, "Address": harness.Loopback, "Port": port, "Connect": map[string]any{"Native": true}}
	if meta != nil {
		def["Meta"] = meta
	}
	return def
}

// deregister removes a service from an agent.
func (m *mesh) deregister(a *harness.Agent, id string) {
	m.t.Helper()
	if err := agentPutOK(m.ctx, m.rc, a.HTTPAddr(), "/v1/agent/service/deregister/"+url.PathEscape(id), nil); err != nil {
		m.t.Fatalf("deregister %s: %v", id, err)
	}
}

// grpcBootstrap runs `trellis connect grpc-bootstrap` against an agent
// for one of its service instances and returns the JSON.
func (m *mesh) grpcBootstrap(a *harness.Agent, serviceID string) []byte {
	m.t.Helper()
	r := runCLI(m.ctx, m.t, "connect", "grpc-bootstrap", "-service-id", serviceID,
		"-http-addr", a.HTTPAddr(), "-grpc-addr", a.GRPCAddr(), "-refresh-interval", "1s")
	if r.code != 0 {
		m.t.Fatalf("%v", r)
	}
	return []byte(r.stdout)
}
