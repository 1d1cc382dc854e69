package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/hashicorp/consul/api"
	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/internal/adstest"
)

// aclAgent is a -dev agent with ACLs on and default deny, bootstrapped:
// its client, the management token and the runtime config.
func aclAgent(t *testing.T) (*api.Client, *api.ACLToken, *config.RuntimeConfig) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.json")
	if err := os.WriteFile(path, []byte(`{"acl": {"enabled": true, "default_policy": "deny"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, rc, _ := startACLTestAgent(t, append(devArgs(t, "dev1"), "-config-file", path))
	c, err := api.NewClient(&api.Config{Address: rc.HTTPAddrForClients()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		root, _, err := c.ACL().Bootstrap()
		if err == nil {
			return c, root, rc
		}
		if time.Now().After(deadline) {
			t.Fatalf("bootstrap: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tokenWith creates a token whose one policy has rules.
func tokenWith(t *testing.T, c *api.Client, root *api.ACLToken, name, rules string) *api.ACLToken {
	t.Helper()
	w := &api.WriteOptions{Token: root.SecretID}
	pol, _, err := c.ACL().PolicyCreate(&api.ACLPolicy{Name: name, Rules: rules}, w)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := c.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, w)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestAgentEndpointsACL: each agent-local endpoint refuses a token that
// lacks its rule with Consul's 403 text and changes nothing, and serves
// one that has it.
func TestAgentEndpointsACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	node := rc.NodeName
	weak := tokenWith(t, c, root, "weak", `key_prefix "" { policy = "read" }`)
	strong := tokenWith(t, c, root, "strong", fmt.Sprintf(`
agent "%s" { policy = "write" }
node_prefix "" { policy = "write" }
service_prefix "" { policy = "write" }
operator = "read"
`, node))
	mgmt := &api.QueryOptions{Token: root.SecretID}
	if err := c.Agent().ServiceRegisterOpts(&api.AgentServiceRegistration{Name: "db", Port: 5432,
		Check: &api.AgentServiceCheck{CheckID: "db-ttl", TTL: "1h"}}, api.ServiceRegisterOpts{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	if err := c.Agent().CheckRegisterOpts(&api.AgentCheckRegistration{ID: "node-ttl", Name: "node", AgentServiceCheck: api.AgentServiceCheck{TTL: "1h"}}, mgmt); err != nil {
		t.Fatal(err)
	}
	denied := func(perm, seg string) string {
		s := fmt.Sprintf("Permission denied: token with AccessorID '%s' lacks permission '%s'", weak.AccessorID, perm)
		if seg != "" {
			s += fmt.Sprintf(" on %q", seg)
		}
		return s
	}
	for _, tc := range []struct {
		method, path, body string
		want               string
	}{
		{"GET", "/v1/agent/self", "", denied("agent:read", node)},
		{"GET", "/v1/agent/metrics", "", denied("agent:read", node)},
		{"GET", "/v1/agent/host", "", denied("operator:read", "")},
		{"PUT", "/v1/agent/reload", "", denied("agent:write", node)},
		{"PUT", "/v1/agent/force-leave/ghost", "", denied("operator:write", "")},
		{"PUT", "/v1/agent/service/register", `{"Name": "web", "Port": 80}`, denied("service:write", "web")},
		{"PUT", "/v1/agent/service/deregister/db", "", denied("service:write", "db")},
		{"PUT", "/v1/agent/service/maintenance/db?enable=true", "", denied("service:write", "db")},
		{"PUT", "/v1/agent/maintenance?enable=true", "", denied("node:write", node)},
		{"PUT", "/v1/agent/check/register", `{"Name": "c2", "TTL": "1h"}`, denied("node:write", node)},
		{"PUT", "/v1/agent/check/register", `{"Name": "c3", "TTL": "1h", "ServiceID": "db"}`, denied("service:write", "db")},
		{"PUT", "/v1/agent/check/pass/db-ttl", "", denied("service:write", "db")},
		{"PUT", "/v1/agent/check/fail/node-ttl", "", denied("node:write", node)},
		{"PUT", "/v1/agent/check/update/db-ttl", `{"Status": "warning"}`, denied("service:write", "db")},
		{"PUT", "/v1/agent/check/deregister/node-ttl", "", denied("node:write", node)},
		{"GET", "/v1/agent/service/db", "", denied("service:read", "db")},
		{"GET", "/v1/agent/connect/ca/leaf/db", "", denied("service:write", "db")},
		{"GET", "/v1/agent/connect/grpc-files/db", "", denied("service:write", "db")},
		{"POST", "/v1/agent/connect/authorize", `{"Target": "db", "ClientCertURI": "spiffe://11111111-2222-3333-4444-555555555555.consul/ns/default/dc/dc1/svc/web"}`, denied("service:write", "db")},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, body := aclDo(t, rc, tc.method, tc.path, tc.body, weak.SecretID)
			if code != http.StatusForbidden || body != tc.want {
				t.Fatalf("weak token: %d %q, want 403 %q", code, body, tc.want)
			}
			if tc.method == "GET" && !strings.Contains(tc.path, "/leaf/") {
				code, body = aclDo(t, rc, tc.method, tc.path, tc.body, strong.SecretID)
				if code == http.StatusForbidden {
					t.Fatalf("strong token: %d %q", code, body)
				}
			}
		})
	}
	// Every answer advertises the default policy, as Consul's do.
	resp, err := http.Get("http://" + rc.HTTPListenAddrs()[0] + "/v1/agent/self")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := resp.Header.Get("X-Consul-Default-ACL-Policy"); got != "deny" {
		t.Errorf("X-Consul-Default-ACL-Policy = %q, want deny", got)
	}
	// Nothing the weak token asked for happened.
	svcs, err := c.Agent().ServicesWithFilterOpts("", &api.QueryOptions{Token: root.SecretID})
	if err != nil || len(svcs) != 1 || svcs["db"] == nil {
		t.Fatalf("services after denials: %v %v", svcs, err)
	}
	checks, err := c.Agent().ChecksWithFilterOpts("", &api.QueryOptions{Token: root.SecretID})
	if err != nil || len(checks) != 2 || checks["db-ttl"].Status != api.HealthCritical || checks["node-ttl"].Status != api.HealthCritical {
		t.Fatalf("checks after denials: %v %v", checks, err)
	}
	// The strong token's writes go through.
	for _, p := range []string{"/v1/agent/check/pass/db-ttl", "/v1/agent/check/pass/node-ttl"} {
		if code, body := aclDo(t, rc, "PUT", p, "", strong.SecretID); code != http.StatusOK {
			t.Fatalf("%s: %d %s", p, code, body)
		}
	}
	// Lists are filtered: the weak token sees no service, check or member.
	if svcs, err := c.Agent().ServicesWithFilterOpts("", &api.QueryOptions{Token: weak.SecretID}); err != nil || len(svcs) != 0 {
		t.Fatalf("weak services: %v %v", svcs, err)
	}
	if checks, err := c.Agent().ChecksWithFilterOpts("", &api.QueryOptions{Token: weak.SecretID}); err != nil || len(checks) != 0 {
		t.Fatalf("weak checks: %v %v", checks, err)
	}
	if code, body := aclDo(t, rc, "GET", "/v1/agent/members", "", weak.SecretID); code != http.StatusOK || body != "[]" {
		t.Fatalf("weak members: %d %s", code, body)
	}
	if svcs, err := c.Agent().ServicesWithFilterOpts("", &api.QueryOptions{Token: strong.SecretID}); err != nil || len(svcs) != 1 {
		t.Fatalf("strong services: %v %v", svcs, err)
	}
}

func aclDo(t *testing.T, rc *config.RuntimeConfig, method, path, body, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+rc.HTTPAddrForClients()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Consul-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBlockingQueryTokenDeletedACL: a blocking query whose token is
// deleted while it waits answers 403, not the data.
func TestBlockingQueryTokenDeletedACL(t *testing.T) {
	c, root, _ := aclAgent(t)
	tok := tokenWith(t, c, root, "kv", `key_prefix "" { policy = "read" }`)
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("1")}, &api.WriteOptions{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	_, meta, err := c.KV().Get("k", &api.QueryOptions{Token: tok.SecretID})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := c.KV().Get("k", &api.QueryOptions{Token: tok.SecretID, WaitIndex: meta.LastIndex, WaitTime: time.Minute})
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // let the query start waiting
	if _, err := c.ACL().TokenDelete(tok.AccessorID, &api.WriteOptions{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV().Put(&api.KVPair{Key: "k", Value: []byte("2")}, &api.WriteOptions{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "ACL not found") {
		t.Fatalf("blocking query after its token was deleted: %v", err)
	}
}

// TestXDSStreamACL: an ADS stream without service:write on the proxy's
// destination ends with PermissionDenied and Consul's text; with it, the
// stream is served.
func TestXDSStreamACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	weak := tokenWith(t, c, root, "weak", `service "web" { policy = "read" }`)
	// What Consul documents a sidecar's token needs (the rules of a
	// service identity): write on the service and its proxy, read on
	// every service and node. Intentions, config entries, discovery
	// chains and the leaf are all read with it, the token the sidecar is
	// registered with.
	strong := tokenWith(t, c, root, "strong", proxyRules("web"))
	registerSidecar(t, c, "web", 8080, strong.SecretID, "api")
	registerSidecar(t, c, "api", 9090, root.SecretID)
	addrs := rc.GRPCListenAddrs()
	conn, err := grpc.NewClient(addrs[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	stream := func(token string, wait time.Duration) (*discoveryv3.DeltaDiscoveryResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-consul-token", token)
		s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "web-sidecar-proxy"},
			TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}); err != nil {
			return nil, err
		}
		return s.Recv()
	}
	_, err = stream(weak.SecretID, 30*time.Second)
	want := fmt.Sprintf(`Permission denied: token with AccessorID '%s' lacks permission 'service:write' on "web"`, weak.AccessorID)
	if st, _ := status.FromError(err); st.Code() != codes.PermissionDenied || st.Message() != want {
		t.Fatalf("weak token: %v, want PermissionDenied %q", err, want)
	}
	if _, err := stream("no-such-token", 30*time.Second); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("unknown token: %v", err)
	}
	// The token the stream may have gets the proxy's whole configuration:
	// its public listener and the upstream's, the upstream's cluster and
	// endpoints, and the leaf.
	awaitConfig(t, rc, "web-sidecar-proxy", strong.SecretID, "a complete configuration", func(v adstest.View) bool {
		return len(v.Listeners) == 2 && v.EndpointCount("api.") == 1 && len(v.Leaves()) > 0
	})
}

// TestDNSACL: DNS answers only what the agent's token (anonymous here)
// may read: nothing under default deny, the service once anonymous may
// read it.
func TestDNSACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	if err := c.Agent().ServiceRegisterOpts(&api.AgentServiceRegistration{Name: "web", Port: 80, Address: "10.0.0.9"}, api.ServiceRegisterOpts{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	ask := func() *dns.Msg {
		m := new(dns.Msg).SetQuestion("web.service.consul.", dns.TypeA)
		r, err := dns.Exchange(m, rc.DNSListenAddrs()[0])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ask(); len(r.Answer) != 0 {
		t.Fatalf("anonymous under default deny got %v", r.Answer)
	}
	// The agent's default token answers DNS, as Consul's does.
	reader := tokenWith(t, c, root, "dns-reader", `service "web" { policy = "read" }
node_prefix "" { policy = "read" }`)
	if _, err := c.Agent().UpdateDefaultACLToken(reader.SecretID, &api.WriteOptions{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	if r := ask(); len(r.Answer) != 1 {
		t.Fatalf("with a default token that may read web: %v", r)
	}
	if _, err := c.Agent().UpdateDefaultACLToken("", &api.WriteOptions{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	if r := ask(); len(r.Answer) != 0 {
		t.Fatalf("anonymous again under default deny got %v", r.Answer)
	}
	w := &api.WriteOptions{Token: root.SecretID}
	pol, _, err := c.ACL().PolicyCreate(&api.ACLPolicy{Name: "anon", Rules: `service "web" { policy = "read" }
node_prefix "" { policy = "read" }`}, w)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ACL().TokenUpdate(&api.ACLToken{AccessorID: "00000000-0000-0000-0000-000000000002",
		Policies: []*api.ACLTokenPolicyLink{{ID: pol.ID}}}, w); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := ask()
		if len(r.Answer) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("anonymous with service:read got %v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLeafSignedWithCallerTokenACL: with default deny and an agent
// without a token of its own, a service's leaf is signed with the
// caller's token, as Consul's agent signs it, so that a caller allowed to
// write the service gets its certificate; a caller without service:write
// does not.
func TestLeafSignedWithCallerTokenACL(t *testing.T) {
	c, root, _ := aclAgent(t)
	web := tokenWith(t, c, root, "web-writer", `service "web" { policy = "write" }`)
	reg := &api.AgentServiceRegistration{Name: "web", Port: 8080}
	if err := c.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{Token: web.SecretID}); err != nil {
		t.Fatalf("register with a token that may write web: %v", err)
	}
	leaf, _, err := c.Agent().ConnectCALeaf("web", &api.QueryOptions{Token: web.SecretID})
	if err != nil {
		t.Fatalf("leaf for web with its registration token: %v", err)
	}
	if leaf.Service != "web" || leaf.CertPEM == "" {
		t.Fatalf("leaf %+v", leaf)
	}
	other := tokenWith(t, c, root, "db-writer", `service "db" { policy = "write" }`)
	if _, _, err := c.Agent().ConnectCALeaf("web", &api.QueryOptions{Token: other.SecretID}); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("leaf for web with a token for db: %v, want Permission denied", err)
	}
}

// TestProxylessStreamACL: a gRPC client's own stream (TRELLIS_GRPC node
// metadata, its node the Connect-native service's ID) needs service:write
// on that service, as a sidecar's stream does.
func TestProxylessStreamACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	if err := c.Agent().ServiceRegisterOpts(&api.AgentServiceRegistration{ID: "web-1", Name: "web", Port: 8080,
		Connect: &api.AgentServiceConnect{Native: true}}, api.ServiceRegisterOpts{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	weak := tokenWith(t, c, root, "weak-native", `service "web" { policy = "read" }`)
	conn, err := grpc.NewClient(rc.GRPCListenAddrs()[0], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	md, _ := structpb.NewStruct(map[string]any{"TRELLIS_GRPC": "true", "namespace": "default", "partition": "default"})
	cases := []struct {
		name, token string
		want        codes.Code
		text        string
	}{
		{"weak token", weak.SecretID, codes.PermissionDenied,
			fmt.Sprintf(`Permission denied: token with AccessorID '%s' lacks permission 'service:write' on "web"`, weak.AccessorID)},
		{"unknown token", "no-such-token", codes.Unauthenticated, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ctx = metadata.AppendToOutgoingContext(ctx, "x-consul-token", tc.token)
			s, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Send(&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "web-1", Cluster: "web", Metadata: md},
				TypeUrl: "type.googleapis.com/envoy.config.listener.v3.Listener", ResourceNames: []string{"api"}}); err != nil {
				t.Fatal(err)
			}
			_, err = s.Recv()
			st, _ := status.FromError(err)
			if st.Code() != tc.want || (tc.text != "" && st.Message() != tc.text) {
				t.Fatalf("%v, want %v %q", err, tc.want, tc.text)
			}
		})
	}
}
