package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/internal/adstest"
)

// proxyRules is what Consul documents a sidecar's token needs, the rules
// of a service identity for service: write on the service and its
// sidecar, read on every service and node.
func proxyRules(service string) string {
	return fmt.Sprintf(`service %q { policy = "write" }
service "%s-sidecar-proxy" { policy = "write" }
service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }`, service, service)
}

// registerSidecar registers service on port with a sidecar whose
// upstreams are bound from port 19000 on, with token. The sidecar's one
// check is a passing TTL, so that it is a healthy endpoint (nothing
// listens on its port for the default checks).
func registerSidecar(t *testing.T, c *api.Client, service string, port int, token string, upstreams ...string) {
	t.Helper()
	registerSidecarID(t, c, "", service, port, token, upstreams...)
}

// registerSidecarID is registerSidecar for an instance with its own ID.
func registerSidecarID(t *testing.T, c *api.Client, id, service string, port int, token string, upstreams ...string) {
	t.Helper()
	proxy := &api.AgentServiceConnectProxyConfig{}
	for i, u := range upstreams {
		proxy.Upstreams = append(proxy.Upstreams, api.Upstream{DestinationName: u, LocalBindPort: 19000 + i})
	}
	reg := &api.AgentServiceRegistration{ID: id, Name: service, Port: port,
		Connect: &api.AgentServiceConnect{SidecarService: &api.AgentServiceRegistration{Proxy: proxy,
			Checks: api.AgentServiceChecks{{Name: "alive", TTL: "1h", Status: api.HealthPassing}}}}}
	if err := c.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{Token: token}); err != nil {
		t.Fatalf("register %s: %v", service, err)
	}
}

// awaitConfig opens an ADS stream for proxyID with token and waits until
// what it holds satisfies cond, failing the test if the stream ends or
// nothing satisfies it within 30 s. The stream is closed with the test.
func awaitConfig(t *testing.T, rc *config.RuntimeConfig, proxyID, token, what string, cond func(adstest.View) bool) (*adstest.Stream, adstest.View) {
	t.Helper()
	s, err := adstest.Open(adstest.Config{Addr: rc.GRPCListenAddrs()[0], ProxyID: proxyID, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, awaitView(t, s, what, cond)
}

func awaitView(t *testing.T, s *adstest.Stream, what string, cond func(adstest.View) bool) adstest.View {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := s.Await(ctx, cond)
	if err != nil {
		counts := map[string]int{}
		for name := range v.Endpoints {
			counts[name] = v.EndpointCount(name)
		}
		t.Fatalf("%s: %v; holding listeners %v, clusters %v, endpoints %v, %d leaves", what, err,
			keys(v.Listeners), keys(v.Clusters), counts, len(v.Leaves()))
	}
	return v
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestXDSUpstreamWithoutReadACL: a sidecar whose token may read one of
// its upstreams but not the other gets a configuration with the first
// upstream's endpoints and none of the second's: the denied reads leave
// that upstream empty, they neither block the rest nor leak it; once the
// token's policy grants the read, the endpoints follow.
func TestXDSUpstreamWithoutReadACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	registerSidecar(t, c, "api", 9090, root.SecretID)
	registerSidecar(t, c, "db", 5432, root.SecretID)
	tok := tokenWith(t, c, root, "web-api-only", `service "web" { policy = "write" }
service "web-sidecar-proxy" { policy = "write" }
service_prefix "api" { policy = "read" }
node_prefix "" { policy = "read" }`)
	registerSidecar(t, c, "web", 8080, tok.SecretID, "api", "db")
	s, _ := awaitConfig(t, rc, "web-sidecar-proxy", tok.SecretID, "api's endpoints and the leaf", func(v adstest.View) bool {
		return v.EndpointCount("api.") == 1 && len(v.Leaves()) > 0
	})
	// Whatever else arrives, db's endpoints never do.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, _ := s.Await(ctx, func(v adstest.View) bool { return v.EndpointCount("db.") > 0 })
	if n := v.EndpointCount("db."); n != 0 {
		t.Fatalf("db's %d endpoints reached a proxy whose token may not read db", n)
	}
	// The token's policy is given read on db: its refused reads, retried,
	// now succeed, and db's endpoints arrive on the same stream.
	pol := &api.ACLPolicy{ID: tok.Policies[0].ID, Name: "web-api-only", Rules: `service "web" { policy = "write" }
service "web-sidecar-proxy" { policy = "write" }
service_prefix "api" { policy = "read" }
service_prefix "db" { policy = "read" }
node_prefix "" { policy = "read" }`}
	if _, _, err := c.ACL().PolicyUpdate(pol, &api.WriteOptions{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	awaitView(t, s, "db's endpoints once the token may read db", func(v adstest.View) bool { return v.EndpointCount("db.") == 1 })
}

// TestXDSRegistrationTokenReplacedACL: a sidecar re-registered with
// another token reads its configuration with the new one: once the old
// token is deleted, a stream with the new one still follows changes of
// its upstream.
func TestXDSRegistrationTokenReplacedACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	registerSidecar(t, c, "api", 9090, root.SecretID)
	first := tokenWith(t, c, root, "web-first", proxyRules("web"))
	registerSidecar(t, c, "web", 8080, first.SecretID, "api")
	awaitConfig(t, rc, "web-sidecar-proxy", first.SecretID, "the configuration with the first token", func(v adstest.View) bool {
		return v.EndpointCount("api.") == 1 && len(v.Leaves()) > 0
	})
	w := &api.WriteOptions{Token: root.SecretID}
	second, _, err := c.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{Name: "web-first"}}}, w)
	if err != nil {
		t.Fatal(err)
	}
	registerSidecar(t, c, "web", 8080, second.SecretID, "api")
	if _, err := c.ACL().TokenDelete(first.AccessorID, w); err != nil {
		t.Fatal(err)
	}
	s, _ := awaitConfig(t, rc, "web-sidecar-proxy", second.SecretID, "the configuration with the second token", func(v adstest.View) bool {
		return v.EndpointCount("api.") == 1 && len(v.Leaves()) > 0
	})
	// A second api instance: only watches that run with the live token
	// can see it.
	registerSidecarID(t, c, "api-2", "api", 9091, root.SecretID)
	awaitView(t, s, "the second api instance", func(v adstest.View) bool { return v.EndpointCount("api.") == 2 })
}

// TestXDSGatewayACL: an ingress gateway registered with a token that may
// write its own service and read the others gets its listener, the
// cluster and endpoints of the service its config entry exposes, and its
// leaf.
func TestXDSGatewayACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	registerSidecar(t, c, "api", 9090, root.SecretID)
	w := &api.WriteOptions{Token: root.SecretID}
	entry := &api.IngressGatewayConfigEntry{Kind: api.IngressGateway, Name: "ingress", Listeners: []api.IngressListener{{
		Port: 21000, Protocol: "tcp", Services: []api.IngressService{{Name: "api"}},
	}}}
	if _, _, err := c.ConfigEntries().Set(entry, w); err != nil {
		t.Fatal(err)
	}
	tok := tokenWith(t, c, root, "ingress", `service "ingress" { policy = "write" }
service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }`)
	reg := &api.AgentServiceRegistration{Kind: api.ServiceKindIngressGateway, Name: "ingress", Port: 8443}
	if err := c.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{Token: tok.SecretID}); err != nil {
		t.Fatal(err)
	}
	awaitConfig(t, rc, "ingress", tok.SecretID, "the gateway's configuration", func(v adstest.View) bool {
		return len(v.Listeners) == 1 && v.EndpointCount("api.") == 1 && len(v.Leaves()) > 0
	})
}

// TestXDSGrantWakesFilteredReadACL: a read the token's rules filter
// (api's instances, on a node the token may not read) is re-run when the
// token's policy changes, not only when the data does: once node read is
// granted, api's endpoints arrive with nothing else changing.
func TestXDSGrantWakesFilteredReadACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	registerSidecar(t, c, "api", 9090, root.SecretID)
	waitConnect(t, c, root, "api", 1)
	rules := `service "web" { policy = "write" }
service "web-sidecar-proxy" { policy = "write" }
service_prefix "" { policy = "read" }`
	tok := tokenWith(t, c, root, "web-no-nodes", rules)
	registerSidecar(t, c, "web", 8080, tok.SecretID, "api")
	s, _ := awaitConfig(t, rc, "web-sidecar-proxy", tok.SecretID, "api's cluster without endpoints", func(v adstest.View) bool {
		_, ok := v.Endpoints[firstPrefixed(v.Clusters, "api.")]
		return ok && v.EndpointCount("api.") == 0 && len(v.Leaves()) > 0
	})
	pol := &api.ACLPolicy{ID: tok.Policies[0].ID, Name: "web-no-nodes", Rules: rules + "\nnode_prefix \"\" { policy = \"read\" }"}
	if _, _, err := c.ACL().PolicyUpdate(pol, &api.WriteOptions{Token: root.SecretID}); err != nil {
		t.Fatal(err)
	}
	awaitView(t, s, "api's endpoints once the token may read its node", func(v adstest.View) bool { return v.EndpointCount("api.") == 1 })
}

// firstPrefixed is a key of m that starts with prefix ("" if none).
func firstPrefixed[V any](m map[string]V, prefix string) string {
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			return k
		}
	}
	return ""
}

// waitConnect waits until the catalog has n Connect endpoints of service.
func waitConnect(t *testing.T, c *api.Client, root *api.ACLToken, service string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, _, err := c.Health().Connect(service, "", false, &api.QueryOptions{Token: root.SecretID})
		if err == nil && len(e) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d Connect endpoints (%v), want %d", service, len(e), err, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestXDSTerminatingGatewayACL: a terminating gateway presents each
// linked service's leaf, signed with the gateway's token, so Consul's
// rule holds: a linked service the token may write is served (its
// cluster, its endpoints, its leaf); one it may only read is left out, as
// Consul leaves out a service whose leaf it lacks, and the rest is served
// all the same.
func TestXDSTerminatingGatewayACL(t *testing.T) {
	c, root, rc := aclAgent(t)
	w := &api.WriteOptions{Token: root.SecretID}
	for _, name := range []string{"legacy", "old"} {
		if _, err := c.Catalog().Register(&api.CatalogRegistration{Node: "external-" + name, Address: "203.0.113.20",
			Service: &api.AgentService{ID: name, Service: name, Port: 80}}, w); err != nil {
			t.Fatal(err)
		}
	}
	entry := &api.TerminatingGatewayConfigEntry{Kind: api.TerminatingGateway, Name: "term",
		Services: []api.LinkedService{{Name: "legacy"}, {Name: "old"}}}
	if _, _, err := c.ConfigEntries().Set(entry, w); err != nil {
		t.Fatal(err)
	}
	tok := tokenWith(t, c, root, "term", `service "term" { policy = "write" }
service "legacy" { policy = "write" }
service_prefix "" { policy = "read" }
node_prefix "" { policy = "read" }`)
	reg := &api.AgentServiceRegistration{Kind: api.ServiceKindTerminatingGateway, Name: "term", Port: 8443}
	if err := c.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{Token: tok.SecretID}); err != nil {
		t.Fatal(err)
	}
	s, _ := awaitConfig(t, rc, "term", tok.SecretID, "legacy served by the gateway", func(v adstest.View) bool {
		return len(v.Listeners) == 1 && v.EndpointCount("legacy.") == 1 && len(v.Leaves()) == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, _ := s.Await(ctx, func(v adstest.View) bool { return firstPrefixed(v.Clusters, "old.") != "" || len(v.Leaves()) > 1 })
	if name := firstPrefixed(v.Clusters, "old."); name != "" || len(v.Leaves()) != 1 {
		t.Fatalf("a service the token may not write is served: cluster %q, %d leaves", name, len(v.Leaves()))
	}
}
