package integration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// TestClientAgentsJoinAndServe: a cluster of 3 servers and 2 client agents.
// Both clients are alive members (role "node") in /v1/agent/members of
// every node and are in /v1/catalog/nodes; a service with a sidecar
// registered on a client through PUT /v1/agent/service/register is returned
// by /v1/health/service/<name> on every server, and its sidecar
// (<id>-sidecar-proxy, Kind connect-proxy, a port in 21000-21255, Consul's
// two default checks) by /v1/health/connect/<name>.
func TestClientAgentsJoinAndServe(t *testing.T) {
	c, _ := startAgentCluster(t, agentClusterConfig{clients: 2})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	clients := c.Clients()

	eventually(t, syncTimeout, "members on every node", func() error {
		var errs []error
		for _, a := range c.Agents() {
			errs = append(errs, checkMembersOf(ctx, rc, a, c))
		}
		return errors.Join(errs...)
	})

	eventually(t, syncTimeout, "clients in /v1/catalog/nodes", func() error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			var nodes []catalogNode
			if _, err := rc.getJSON(ctx, s.HTTPAddr(), "/v1/catalog/nodes", &nodes); err != nil {
				return err
			}
			byName := map[string]catalogNode{}
			for _, n := range nodes {
				byName[n.Node] = n
			}
			var errs []error
			for _, a := range c.Agents() {
				n, ok := byName[a.Node()]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("node %s missing from %d nodes", a.Node(), len(nodes)))
				case n.Address != harness.Loopback:
					errs = append(errs, fmt.Errorf("node %s has Address %q, want %s", a.Node(), n.Address, harness.Loopback))
				case n.ID == "":
					errs = append(errs, fmt.Errorf("node %s has no ID", a.Node()))
				}
			}
			return errors.Join(errs...)
		})
	})

	client := clients[1]
	const name, id, port = "s1-web", "s1-web-1", 8080
	if err := registerService(ctx, rc, client.HTTPAddr(), map[string]any{
		"Name":    name,
		"ID":      id,
		"Port":    port,
		"Tags":    []string{"v1"},
		"Meta":    map[string]string{"owner": "s1"},
		"Connect": map[string]any{"SidecarService": map[string]any{}},
	}); err != nil {
		t.Fatal(err)
	}

	// The agent's own view first: it owns the service and its sidecar.
	local, err := agentServices(ctx, rc, client.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	sidecarID := id + "-sidecar-proxy"
	if _, ok := local[id]; !ok {
		t.Errorf("agent/services of %s lacks %s: %v", client.Node(), id, keysOf(local))
	}
	if sc, ok := local[sidecarID]; !ok {
		t.Errorf("agent/services of %s lacks %s: %v", client.Node(), sidecarID, keysOf(local))
	} else {
		if err := checkSidecar(sc, name, id, port); err != nil {
			t.Errorf("agent/services of %s: %v", client.Node(), err)
		}
		// Consul's sidecar defaults: the parent's tags and meta.
		if len(sc.Tags) != 1 || sc.Tags[0] != "v1" || sc.Meta["owner"] != "s1" {
			t.Errorf("sidecar Tags %v, Meta %v: want the parent's [v1] and owner=s1", sc.Tags, sc.Meta)
		}
	}

	eventually(t, syncTimeout, "the service in health/service on every server", func() error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			// With no check of its own, the service is as healthy as its
			// node: passing.
			return serviceInHealth(ctx, rc, s.HTTPAddr(), name, client.Node(), id, passingQuery, "passing")
		})
	})
	eventually(t, syncTimeout, "the sidecar in health/connect on every server", func() error {
		return everyServer(ctx, c, func(ctx context.Context, s *harness.Agent) error {
			for _, q := range []url.Values{nil, {"stale": {""}}} {
				entries, err := healthService(ctx, rc, s.HTTPAddr(), "connect", name, q)
				if err != nil {
					return err
				}
				e, ok := entryFor(entries, client.Node(), sidecarID)
				if !ok {
					return fmt.Errorf("health/connect/%s?%s lists no %s: %s", name, encodeQuery(q), sidecarID, describeEntries(entries))
				}
				if len(entries) != 1 {
					return fmt.Errorf("health/connect/%s?%s lists %d entries, want 1: %s", name, encodeQuery(q), len(entries), describeEntries(entries))
				}
				if err := checkSidecar(e.Service, name, id, port); err != nil {
					return err
				}
				for _, want := range []string{"service:" + sidecarID + ":1", "service:" + sidecarID + ":2"} {
					if _, ok := e.check(want); !ok {
						return fmt.Errorf("sidecar entry lacks Consul's default check %s: %s", want, describeEntries([]healthEntry{e}))
					}
				}
			}
			return nil
		})
	})
	// The parent is not a Connect proxy: health/service lists it once.
	for _, s := range c.Servers() {
		entries, err := healthService(ctx, rc, s.HTTPAddr(), "service", name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 || entries[0].Service.Kind != "" {
			t.Errorf("%s: health/service/%s = %s, want the one typical instance", s.Node(), name, describeEntries(entries))
		}
	}
}

// checkMembersOf checks GET /v1/agent/members on a: every agent of the
// cluster is listed, alive, with its Serf address and Consul's role tag
// ("consul" for servers, "node" for clients).
func checkMembersOf(ctx context.Context, rc *rawClient, a *harness.Agent, c *harness.Cluster) error {
	var members []agentMember
	if _, err := rc.getJSON(ctx, a.HTTPAddr(), "/v1/agent/members", &members); err != nil {
		return err
	}
	byName := map[string]agentMember{}
	for _, m := range members {
		byName[m.Name] = m
	}
	var errs []error
	for _, want := range c.Agents() {
		m, ok := byName[want.Node()]
		role := "node"
		if want.IsServer() {
			role = "consul"
		}
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: members lack %s (%d listed)", a.Node(), want.Node(), len(members)))
		case m.Status != memberAlive:
			errs = append(errs, fmt.Errorf("%s: member %s has Status %d, want %d (alive)", a.Node(), want.Node(), m.Status, memberAlive))
		case fmt.Sprintf("%s:%d", m.Addr, m.Port) != want.SerfLANAddr():
			errs = append(errs, fmt.Errorf("%s: member %s at %s:%d, want %s", a.Node(), want.Node(), m.Addr, m.Port, want.SerfLANAddr()))
		case m.Tags["role"] != role:
			errs = append(errs, fmt.Errorf("%s: member %s has role tag %q, want %q", a.Node(), want.Node(), m.Tags["role"], role))
		}
	}
	return errors.Join(errs...)
}

// checkSidecar checks a sidecar registration Consul's agent would have
// made for service parentID (name parentName, port parentPort).
func checkSidecar(sc agentService, parentName, parentID string, parentPort int) error {
	var errs []error
	if sc.ID != parentID+"-sidecar-proxy" {
		errs = append(errs, fmt.Errorf("sidecar ID %q, want %q", sc.ID, parentID+"-sidecar-proxy"))
	}
	if sc.Service != parentName+"-sidecar-proxy" {
		errs = append(errs, fmt.Errorf("sidecar name %q, want %q", sc.Service, parentName+"-sidecar-proxy"))
	}
	if sc.Kind != "connect-proxy" {
		errs = append(errs, fmt.Errorf("sidecar Kind %q, want connect-proxy", sc.Kind))
	}
	if sc.Port < sidecarPortMin || sc.Port > sidecarPortMax {
		errs = append(errs, fmt.Errorf("sidecar Port %d outside %d-%d", sc.Port, sidecarPortMin, sidecarPortMax))
	}
	switch p := sc.Proxy; {
	case p == nil:
		errs = append(errs, errors.New("sidecar has no Proxy block"))
	case p.DestinationServiceName != parentName || p.DestinationServiceID != parentID:
		errs = append(errs, fmt.Errorf("sidecar destination %q/%q, want %q/%q", p.DestinationServiceName, p.DestinationServiceID, parentName, parentID))
	case p.LocalServiceAddress != "127.0.0.1" || p.LocalServicePort != parentPort:
		errs = append(errs, fmt.Errorf("sidecar local service %s:%d, want 127.0.0.1:%d", p.LocalServiceAddress, p.LocalServicePort, parentPort))
	}
	return errors.Join(errs...)
}

// keysOf lists a map's keys for messages.
func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
