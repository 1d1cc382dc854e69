package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trellis-mesh/trellis/integration/harness"
	"github.com/trellis-mesh/trellis/internal/adstest"
)

// The mesh with ACLs on and default deny, on real processes: a sidecar on
// a client agent, registered with a token that has exactly what Consul
// documents a proxy's token needs, gets its whole configuration from the
// servers with that token, and loses its stream when the token is
// deleted.
//
//	go test ./integration/ -run 'TestACLMesh' -v

// aclMeshManagement is the cluster's initial management token.
const aclMeshManagement = "7d3c1c55-3b52-4c5c-9b8e-1a8c9b6f0e21"

func TestACLMeshSidecar(t *testing.T) {
	ctx := scenarioContext(t)
	acl := map[string]any{"enabled": true, "default_policy": "deny",
		// The agents' own token registers their nodes; the test's
		// services carry tokens of their own.
		"tokens": map[string]any{"initial_management": aclMeshManagement, "agent": aclMeshManagement}}
	c := harness.StartCluster(t, harness.ClusterConfig{
		Binary: requireBinary(t), Ports: newPorts(t), Servers: 1, Clients: 1,
		ServerArgs: configFile(t, "server.json", map[string]any{"performance": map[string]any{"raft_multiplier": 1},
			"retry_interval": joinRetryInterval, "acl": acl}),
		ClientArgs: configFile(t, "client.json", map[string]any{"retry_interval": joinRetryInterval, "acl": acl}),
	})
	waitLeader(t, c, clusterStartTimeout)
	wctx, cancel := context.WithTimeout(ctx, clientsReadyTimeout)
	defer cancel()
	if err := c.WaitForClients(wctx); err != nil {
		t.Fatal(err)
	}
	client := c.Clients()[0]
	cl, err := api.NewClient(&api.Config{Address: client.HTTPAddr(), Token: aclMeshManagement})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the initial management token", func() error {
		_, _, err := cl.ACL().TokenReadSelf(nil)
		return err
	})

	pol, _, err := cl.ACL().PolicyCreate(&api.ACLPolicy{Name: "web-proxy", Rules: `service "web" { policy = "write" }
service "web-sidecar-proxy" { policy = "write" }
service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	web, _, err := cl.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	register := func(name string, port int, token string, upstreams ...string) {
		t.Helper()
		proxy := &api.AgentServiceConnectProxyConfig{}
		for i, u := range upstreams {
			proxy.Upstreams = append(proxy.Upstreams, api.Upstream{DestinationName: u, LocalBindPort: 19000 + i})
		}
		reg := &api.AgentServiceRegistration{Name: name, Port: port, Connect: &api.AgentServiceConnect{
			SidecarService: &api.AgentServiceRegistration{Proxy: proxy,
				// Passing from the start: nothing listens on the sidecar's
				// port for the default checks.
				Checks: api.AgentServiceChecks{{Name: "alive", TTL: "1h", Status: api.HealthPassing}}}}}
		if err := cl.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{Token: token}); err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
	}
	register("api", 8081, aclMeshManagement)
	register("web", 8080, web.SecretID, "api")
	eventually(t, 20*time.Second, "api's sidecar in the catalog", func() error {
		e, _, err := cl.Health().Connect("api", "", true, nil)
		if err == nil && len(e) != 1 {
			err = fmt.Errorf("%d connect endpoints", len(e))
		}
		return err
	})

	// The client agent serves its own proxy (local source, reads by RPC
	// with the token); the server serves it too for a stream naming the
	// client's node (catalog source, reads of its own store under the
	// same rules).
	complete := func(v adstest.View) bool {
		api := false
		for name := range v.Clusters {
			api = api || strings.HasPrefix(name, "api.")
		}
		return len(v.Listeners) == 2 && api && v.EndpointCount("api.") == 1 && len(v.Leaves()) > 0
	}
	var s *adstest.Stream
	for _, tc := range []struct {
		name     string
		addr     string
		nodeName string
	}{
		{"on the client agent", client.GRPCAddr(), ""},
		{"on the server", c.Servers()[0].GRPCAddr(), client.Node()},
	} {
		st, err := adstest.Open(adstest.Config{Addr: tc.addr, ProxyID: "web-sidecar-proxy", NodeName: tc.nodeName, Token: web.SecretID})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		actx, acancel := context.WithTimeout(ctx, 30*time.Second)
		v, err := st.Await(actx, complete)
		acancel()
		if err != nil {
			t.Fatalf("web's configuration %s with its token: %v (listeners %d, clusters %d, api endpoints %d, leaves %d)",
				tc.name, err, len(v.Listeners), len(v.Clusters), v.EndpointCount("api."), len(v.Leaves()))
		}
		t.Logf("web-sidecar-proxy %s: %d listeners, %d clusters, api endpoints %d, %d leaves",
			tc.name, len(v.Listeners), len(v.Clusters), v.EndpointCount("api."), len(v.Leaves()))
		if s == nil {
			s = st
		}
	}

	// The token is deleted: the stream ends within the agent's recheck
	// period (30 s) and the half of it between offers, with Consul's code
	// for a token that no longer exists.
	if _, err := cl.ACL().TokenDelete(web.AccessorID, nil); err != nil {
		t.Fatal(err)
	}
	ectx, ecancel := context.WithTimeout(ctx, 60*time.Second)
	defer ecancel()
	_, err = s.Await(ectx, func(adstest.View) bool { return false })
	if code := status.Code(err); code != codes.Unauthenticated && code != codes.PermissionDenied {
		t.Fatalf("stream after its token was deleted: %v, want it ended as unauthenticated", err)
	}
}
