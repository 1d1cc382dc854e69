package integration

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
)

// TestConsulAPIAgent: the official Go client against a client agent of a
// 3-server cluster. Agent().ServiceRegister with two checks and a sidecar
// (with an upstream), Agent().Services and Service (with hash blocking),
// Checks, UpdateTTL, Members, Self, NodeName and ServiceDeregister, with
// the effects seen through Health() on a server.
func TestConsulAPIAgent(t *testing.T) {
	c, leader := startAgentCluster(t, agentClusterConfig{clients: 1})
	client := c.Clients()[0]
	agent := newConsulClient(t, client.HTTPAddr()).Agent()
	server := newConsulClient(t, leader.HTTPAddr())
	target := newCheckTarget(t, false)

	const name, id, ttlID, tcpID = "s7-web", "s7-web-1", "s7-web-ttl", "s7-web-tcp"
	sidecarID := id + "-sidecar-proxy"
	reg := &api.AgentServiceRegistration{
		ID: id, Name: name, Port: 8181, Address: "127.0.0.1",
		Tags: []string{"api", "v1"}, Meta: map[string]string{"team": "mesh"},
		Checks: api.AgentServiceChecks{
			{CheckID: ttlID, Name: "ttl", TTL: "30s"},
			{CheckID: tcpID, Name: "tcp", TCP: target.addr, Interval: "1s", Timeout: "1s"},
		},
		Connect: &api.AgentServiceConnect{SidecarService: &api.AgentServiceRegistration{
			Proxy: &api.AgentServiceConnectProxyConfig{
				Upstreams: []api.Upstream{{DestinationName: "s7-db", LocalBindPort: 19191}},
			},
		}},
	}
	if err := agent.ServiceRegister(reg); err != nil {
		t.Fatalf("ServiceRegister: %v", err)
	}

	t.Run("Services", func(t *testing.T) {
		services, err := agent.Services()
		if err != nil {
			t.Fatal(err)
		}
		web, ok := services[id]
		if !ok {
			t.Fatalf("Services() lacks %s: %v", id, keysOf(services))
		}
		if web.Service != name || web.Port != 8181 || web.Address != "127.0.0.1" ||
			!slices.Equal(web.Tags, []string{"api", "v1"}) || web.Meta["team"] != "mesh" {
			t.Errorf("Services()[%s] = %+v", id, web)
		}
		if web.Weights != (api.AgentWeights{Passing: 1, Warning: 1}) {
			t.Errorf("Weights = %+v, want Consul's default {1 1}", web.Weights)
		}
		if ta := web.TaggedAddresses["lan_ipv4"]; ta.Address != "127.0.0.1" || ta.Port != 8181 {
			t.Errorf("TaggedAddresses[lan_ipv4] = %+v, want 127.0.0.1:8181", ta)
		}
		if web.Connect != nil && web.Connect.SidecarService != nil {
			t.Errorf("the parent is returned with its SidecarService block: %+v", web.Connect)
		}
		sc, ok := services[sidecarID]
		if !ok {
			t.Fatalf("Services() lacks %s: %v", sidecarID, keysOf(services))
		}
		if sc.Kind != api.ServiceKindConnectProxy || sc.Port < sidecarPortMin || sc.Port > sidecarPortMax || sc.Proxy == nil {
			t.Fatalf("sidecar = %+v", sc)
		}
		p := sc.Proxy
		if p.DestinationServiceName != name || p.DestinationServiceID != id || p.LocalServiceAddress != "127.0.0.1" || p.LocalServicePort != 8181 {
			t.Errorf("sidecar Proxy = %+v", p)
		}
		if len(p.Upstreams) != 1 || p.Upstreams[0].DestinationName != "s7-db" || p.Upstreams[0].LocalBindPort != 19191 {
			t.Errorf("sidecar Upstreams = %+v", p.Upstreams)
		}
	})

	t.Run("Checks and UpdateTTL", func(t *testing.T) {
		checks, err := agent.Checks()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{ttlID, tcpID, "service:" + sidecarID + ":1", "service:" + sidecarID + ":2"} {
			if _, ok := checks[want]; !ok {
				t.Errorf("Checks() lacks %s: %v", want, keysOf(checks))
			}
		}
		if ch := checks[ttlID]; ch != nil && (ch.Status != api.HealthCritical || ch.ServiceID != id || ch.Type != "ttl") {
			t.Errorf("new TTL check = %+v, want critical, ServiceID %s, Type ttl", ch, id)
		}
		// Not passing on a server while the TTL check is critical.
		entries, _, err := server.Health().Service(name, "", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Errorf("Health().Service(%s, passing) before UpdateTTL = %d entries", name, len(entries))
		}
		if err := agent.UpdateTTL(ttlID, "all good", api.HealthPassing); err != nil {
			t.Fatalf("UpdateTTL: %v", err)
		}
		checks, err = agent.Checks()
		if err != nil {
			t.Fatal(err)
		}
		if ch := checks[ttlID]; ch == nil || ch.Status != api.HealthPassing || ch.Output != "all good" {
			t.Errorf("TTL check after UpdateTTL = %+v", ch)
		}
		if err := agent.UpdateTTL("no-such-check", "x", api.HealthPassing); !isStatus(err, 404) {
			t.Errorf("UpdateTTL of an unknown check: %v, want a 404", err)
		}
		eventually(t, syncTimeout, "the service passing on a server", func() error {
			entries, _, err := server.Health().Service(name, "", true, nil)
			if err != nil {
				return err
			}
			if len(entries) != 1 || entries[0].Service.ID != id || entries[0].Node.Node != client.Node() {
				return fmt.Errorf("Health().Service(%s, passing) = %d entries", name, len(entries))
			}
			return nil
		})
		entries, _, err = server.Health().Connect(name, "", false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Service.ID != sidecarID {
			t.Errorf("Health().Connect(%s) = %d entries, want the sidecar", name, len(entries))
		}
	})

	t.Run("Service hash blocking", func(t *testing.T) {
		svc, _, err := agent.Service(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if svc.ID != id || svc.ContentHash == "" {
			t.Fatalf("Service(%s) = ID %q, ContentHash %q", id, svc.ID, svc.ContentHash)
		}
		// Nothing changes: the call waits and returns the same hash.
		start := time.Now()
		again, _, err := agent.Service(id, &api.QueryOptions{WaitHash: svc.ContentHash, WaitTime: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 800*time.Millisecond || again.ContentHash != svc.ContentHash {
			t.Errorf("unchanged hash-blocking Service: returned after %s with hash %q (was %q)", waited, again.ContentHash, svc.ContentHash)
		}
		// A re-registration with another tag wakes it with a new hash.
		changed := *reg
		changed.Tags = []string{"api", "v2"}
		var wg sync.WaitGroup
		var regErr error
		wg.Go(func() {
			time.Sleep(300 * time.Millisecond)
			regErr = agent.ServiceRegister(&changed)
		})
		start = time.Now()
		woke, _, err := agent.Service(id, &api.QueryOptions{WaitHash: svc.ContentHash, WaitTime: 10 * time.Second})
		wg.Wait()
		if regErr != nil {
			t.Fatalf("re-register: %v", regErr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 5*time.Second || woke.ContentHash == svc.ContentHash || !slices.Equal(woke.Tags, changed.Tags) {
			t.Errorf("hash-blocking Service after a change: after %s, hash %q (was %q), tags %v", took, woke.ContentHash, svc.ContentHash, woke.Tags)
		}
		// The re-registration kept the sidecar's port.
		services, err := agent.Services()
		if err != nil {
			t.Fatal(err)
		}
		if sc, ok := services[sidecarID]; !ok || sc.Port < sidecarPortMin || sc.Port > sidecarPortMax {
			t.Errorf("sidecar after re-registration: %+v (present %v)", sc, ok)
		}
	})

	t.Run("Members", func(t *testing.T) {
		members, err := agent.Members(false)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*api.AgentMember{}
		for _, m := range members {
			byName[m.Name] = m
		}
		for _, a := range c.Agents() {
			m, ok := byName[a.Node()]
			if !ok {
				t.Errorf("Members() lacks %s", a.Node())
				continue
			}
			if m.Status != memberAlive || fmt.Sprintf("%s:%d", m.Addr, m.Port) != a.SerfLANAddr() {
				t.Errorf("member %s = %+v", a.Node(), m)
			}
		}
		if len(members) != len(c.Agents()) {
			t.Errorf("Members() = %d members, want %d", len(members), len(c.Agents()))
		}
	})

	t.Run("Self and NodeName", func(t *testing.T) {
		self, err := agent.Self()
		if err != nil {
			t.Fatal(err)
		}
		cfg := self["Config"]
		if cfg["NodeName"] != client.Node() || cfg["Server"] != false || cfg["Datacenter"] != "dc1" {
			t.Errorf("Self()[Config] = NodeName %v, Server %v, Datacenter %v", cfg["NodeName"], cfg["Server"], cfg["Datacenter"])
		}
		if self["Member"]["Name"] != client.Node() {
			t.Errorf("Self()[Member][Name] = %v", self["Member"]["Name"])
		}
		nodeName, err := agent.NodeName()
		if err != nil || nodeName != client.Node() {
			t.Errorf("NodeName() = %q, %v", nodeName, err)
		}
	})

	t.Run("ServiceDeregister", func(t *testing.T) {
		if err := agent.ServiceDeregister(id); err != nil {
			t.Fatalf("ServiceDeregister: %v", err)
		}
		services, err := agent.Services()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := services[id]; ok {
			t.Errorf("Services() still lists %s", id)
		}
		if _, ok := services[sidecarID]; ok {
			t.Errorf("Services() still lists the sidecar %s after its parent was deregistered", sidecarID)
		}
		checks, err := agent.Checks()
		if err != nil {
			t.Fatal(err)
		}
		if len(checks) != 0 {
			t.Errorf("Checks() after deregistering the only service = %v", keysOf(checks))
		}
		eventually(t, syncTimeout, "the service gone from the catalog", func() error {
			var errs []error
			svcs, _, err := server.Catalog().Service(name, "", nil)
			if err != nil {
				return err
			}
			if len(svcs) != 0 {
				errs = append(errs, fmt.Errorf("Catalog().Service(%s) = %d instances", name, len(svcs)))
			}
			proxies, _, err := server.Health().Connect(name, "", false, nil)
			if err != nil {
				return err
			}
			if len(proxies) != 0 {
				errs = append(errs, fmt.Errorf("Health().Connect(%s) = %d entries", name, len(proxies)))
			}
			return errors.Join(errs...)
		})
		if err := agent.ServiceDeregister("no-such-service"); !isStatus(err, 404) {
			t.Errorf("ServiceDeregister of an unknown ID: %v, want a 404", err)
		}
	})
}

// isStatus reports whether err is the official client's StatusError with
// that HTTP code.
func isStatus(err error, code int) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == code
}
