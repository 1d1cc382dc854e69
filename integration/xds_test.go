package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// The xDS scenarios of issue 6: Envoy-like ADS clients (delta and
// state-of-the-world) against a real cluster, connected to the client
// agent that hosts the proxy and to a server that does not.
//
//	go test ./integration/ -run 'TestXDS' -v

// meshStreams are the streams of one proxy: delta and state-of-the-world,
// each to the client agent hosting it and to a server.
type meshStreams struct {
	proxyID                                          string
	deltaClient, deltaServer, sotwClient, sotwServer *adsClient
}

func (s meshStreams) all() []*adsClient {
	return []*adsClient{s.deltaClient, s.deltaServer, s.sotwClient, s.sotwServer}
}

// agentOf returns the agent a stream of s is connected to.
func (m *mesh) agentOf(c *adsClient) *harness.Agent {
	if c.cfg.Addr == m.client.GRPCAddr() {
		return m.client
	}
	for _, a := range m.c.Agents() {
		if a.GRPCAddr() == c.cfg.Addr {
			return a
		}
	}
	m.t.Fatalf("no agent at %s", c.cfg.Addr)
	return nil
}

// openStreams connects the four streams of a proxy registered on the
// client agent; the server streams name the client's node.
func (m *mesh) openStreams(proxyID string, nack func(protocol string) nackPolicy) meshStreams {
	open := func(protocol string, a *harness.Agent) *adsClient {
		cfg := adsClientConfig{
			Label:    fmt.Sprintf("%s %s@%s", proxyID, protocol, a.Node()),
			Protocol: protocol,
			Addr:     a.GRPCAddr(),
			ProxyID:  proxyID,
		}
		if a != m.client {
			cfg.NodeName = m.client.Node()
		}
		if nack != nil {
			cfg.Nack = nack(protocol)
		}
		return startADS(m.t, cfg)
	}
	return meshStreams{
		proxyID:     proxyID,
		deltaClient: open(protoDelta, m.client),
		deltaServer: open(protoDelta, m.server),
		sotwClient:  open(protoSotW, m.client),
		sotwServer:  open(protoSotW, m.server),
	}
}

// settleAll waits for every stream to hold a complete, valid
// configuration.
func settleAll(streams ...*adsClient) map[*adsClient]adsView {
	out := map[*adsClient]adsView{}
	for _, c := range streams {
		out[c] = c.waitSettled(meshSettleTimeout, settleQuiet)
	}
	return out
}

// checkSameConfig requires every stream of a proxy to hold the same
// configuration: identical on one agent whatever the protocol, identical
// but for the agent's own leaf certificate across agents.
func checkSameConfig(t *testing.T, s meshStreams, logLeaves bool) {
	t.Helper()
	v := map[*adsClient]adsView{}
	for _, c := range s.all() {
		v[c] = c.view()
	}
	pairs := []struct {
		a, b      *adsClient
		sameAgent bool
	}{
		{s.deltaClient, s.sotwClient, true},
		{s.deltaServer, s.sotwServer, true},
		{s.deltaClient, s.deltaServer, false},
		{s.sotwClient, s.sotwServer, false},
	}
	for _, p := range pairs {
		leafOnly, err := sameConfig(v[p.a], v[p.b], p.sameAgent)
		if err != nil {
			t.Errorf("%s vs %s: %v", p.a.cfg.Label, p.b.cfg.Label, err)
		}
		if !p.sameAgent && logLeaves {
			t.Logf("%s vs %s: equal but for the agents' leaves in %v", p.a.cfg.Label, p.b.cfg.Label, leafOnly)
		}
		if !p.sameAgent {
			// Exactly the resources carrying the proxy's leaf may differ:
			// the public listener and the upstream clusters.
			for _, n := range leafOnly {
				if !strings.HasPrefix(n, "LDS/public_listener:") && !strings.HasPrefix(n, "CDS/") {
					t.Errorf("%s vs %s: %s differs beyond the leaf", p.a.cfg.Label, p.b.cfg.Label, n)
				}
			}
		}
	}
	// State-of-the-world version_info of a type is equal across agents
	// when its content is: endpoints never carry a leaf.
	if a, b := v[s.sotwClient].Acks[edsType].AckedVersion, v[s.sotwServer].Acks[edsType].AckedVersion; a != b {
		t.Errorf("sotw EDS version_info %q on the client agent, %q on the server", a, b)
	}
}

func TestXDSRealCluster(t *testing.T) {
	m := startMesh(t)
	start := time.Now()
	web := m.openStreams("web-sidecar-proxy", nil)
	api := m.openStreams("api-sidecar-proxy", nil)
	all := append(web.all(), api.all()...)
	settleAll(all...)
	t.Logf("8 streams settled after %s", time.Since(start).Round(time.Millisecond))

	// What web must hold: its public listener, the outbound listener of
	// api, local_app and api's cluster, api's one endpoint.
	apiCluster := m.sni("api")
	for _, c := range web.all() {
		v := c.view()
		if !slices.Equal(v.names(cdsType), []string{apiCluster, "local_app"}) {
			t.Errorf("%s: clusters %v", c.cfg.Label, v.names(cdsType))
		}
		lds := v.names(ldsType)
		if len(lds) != 2 || lds[0] != fmt.Sprintf("api:127.0.0.1:%d", apiBindPort) || !strings.HasPrefix(lds[1], "public_listener:") {
			t.Errorf("%s: listeners %v", c.cfg.Label, lds)
		}
		if n := endpointCount(v, apiCluster); n != 1 {
			t.Errorf("%s: %d endpoints of %s, want 1", c.cfg.Label, n, apiCluster)
		}
	}
	phase(t, "same config on the client agent and on a server")
	{
		checkSameConfig(t, web, true)
		checkSameConfig(t, api, true)
		roots, err := m.roots()
		if err != nil {
			t.Fatal(err)
		}
		root, err := roots.activeRoot()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range all {
			l, err := publicListener(c.view())
			if err != nil {
				t.Fatal(err)
			}
			svc := strings.TrimSuffix(c.cfg.ProxyID, "-sidecar-proxy")
			if err := m.checkLeaf(leafOf(l.GetFilterChains()[0].GetTransportSocket()), svc, root); err != nil {
				t.Errorf("%s: %v", c.cfg.Label, err)
			}
		}
	}

	phase(t, "proxy-status matches what each client acknowledged")
	{
		for _, c := range all {
			st := m.waitStatusMatches(m.agentOf(c), c)
			if c.cfg.NodeName != "" && st.Node != c.cfg.NodeName {
				t.Errorf("%s: proxy-status node %q, want %q", c.cfg.Label, st.Node, c.cfg.NodeName)
			}
		}
	}

	phase(t, "a new api instance reaches every web stream within 1s")
	{
		seq := map[*adsClient]int{}
		for _, c := range all {
			seq[c] = c.view().Seq
		}
		registered := time.Now()
		m.register(m.client, sidecarService("api-2", "api", 8082))
		for _, c := range web.all() {
			v := c.waitFor(updateTimeout, "second api endpoint", func(v adsView) error {
				if n := endpointCount(v, apiCluster); n != 2 {
					return fmt.Errorf("%d endpoints of %s", n, apiCluster)
				}
				return nil
			})
			took := v.Last.Sub(registered)
			t.Logf("%s: endpoint update %s after the registration returned", c.cfg.Label, took.Round(time.Millisecond))
			if took > endpointBudget {
				t.Errorf("%s: endpoint update took %s, budget %s", c.cfg.Label, took.Round(time.Millisecond), endpointBudget)
			}
		}
		for _, c := range web.all() {
			c.waitSettled(meshSettleTimeout, settleQuiet)
			// Only endpoints changed, so only endpoints were sent.
			for _, r := range c.responsesSince(seq[c]) {
				if r.TypeURL != edsType {
					t.Errorf("%s: an endpoint change sent %s", c.cfg.Label, r)
				}
			}
		}
		checkSameConfig(t, web, false)
		// api's sidecar has no upstreams: nothing changed for it.
		for _, c := range api.all() {
			if got := c.responsesSince(seq[c]); len(got) > 0 {
				t.Errorf("%s: responses for a change that is not its own: %v", c.cfg.Label, got)
			}
		}
	}

	phase(t, "a failing sidecar check removes its endpoint, a passing one brings it back")
	{
		for _, st := range []struct {
			state string
			want  int
		}{{"fail", 1}, {"pass", 2}} {
			changed := time.Now()
			if err := agentPutOK(m.ctx, m.rc, m.client.HTTPAddr(), "/v1/agent/check/"+st.state+"/service:api-2-sidecar-proxy", nil); err != nil {
				t.Fatal(err)
			}
			for _, c := range web.all() {
				v := c.waitFor(updateTimeout, "api endpoints after check "+st.state, func(v adsView) error {
					if n := endpointCount(v, apiCluster); n != st.want {
						return fmt.Errorf("%d endpoints of %s, want %d", n, apiCluster, st.want)
					}
					return nil
				})
				if took := v.Last.Sub(changed); took > endpointBudget {
					t.Errorf("%s: check %s took %s to reach the endpoints", c.cfg.Label, st.state, took.Round(time.Millisecond))
				}
			}
		}
		for _, c := range web.all() {
			c.waitSettled(meshSettleTimeout, settleQuiet)
		}
		checkSameConfig(t, web, false)
	}

	phase(t, "intentions change the RBAC filter of the destination's public listener")
	{
		for _, c := range all {
			if got, err := publicRBAC(c.view()); err != nil || got != "DENY" {
				t.Fatalf("%s: RBAC %q (%v), want DENY with no policy (default allow)", c.cfg.Label, got, err)
			}
		}
		steps := []struct {
			source, destination string
			affected, other     meshStreams
			want                string
		}{
			{"web", "api", api, web, "DENY consul-intentions-layer4=[web]"},
			{"intruder", "web", web, api, "DENY consul-intentions-layer4=[intruder]"},
		}
		for _, st := range steps {
			seq := map[*adsClient]int{}
			for _, c := range st.other.all() {
				seq[c] = c.view().Seq
			}
			changed := time.Now()
			m.intention(st.source, st.destination, "deny")
			for _, c := range st.affected.all() {
				v := c.waitFor(updateTimeout, "RBAC after "+st.source+"->"+st.destination, func(v adsView) error {
					got, err := publicRBAC(v)
					if err != nil {
						return err
					}
					if got != st.want {
						return fmt.Errorf("RBAC %q, want %q", got, st.want)
					}
					return nil
				})
				t.Logf("%s: RBAC denies %s %s after the write returned", c.cfg.Label, st.source, v.Last.Sub(changed).Round(time.Millisecond))
			}
			for _, c := range st.affected.all() {
				c.waitSettled(meshSettleTimeout, settleQuiet)
			}
			checkSameConfig(t, st.affected, false)
			for _, c := range st.other.all() {
				if got := c.responsesSince(seq[c]); len(got) > 0 {
					t.Errorf("%s: intention %s->%s sent %v", c.cfg.Label, st.source, st.destination, got)
				}
			}
		}
		for _, c := range all {
			m.waitStatusMatches(m.agentOf(c), c)
		}
	}

	phase(t, "a delta client reconnecting with its versions gets only what differs")
	{
		// Envoy loses its stream to the client agent and reconnects, once
		// to the same agent and once to a server, announcing what it holds.
		// Versions are content hashes, equal on every agent, so only the
		// resources that carry the agent's own leaf come again (and the
		// endpoints of a re-sent cluster, which Envoy drops on re-warming).
		held := web.deltaClient.view().Held
		web.deltaClient.close()
		same := startADS(t, adsClientConfig{Label: "web delta@client (resumed)", Protocol: protoDelta,
			Addr: m.client.GRPCAddr(), ProxyID: web.proxyID, Resume: held})
		other := startADS(t, adsClientConfig{Label: "web delta@server (resumed)", Protocol: protoDelta,
			Addr: m.server.GRPCAddr(), ProxyID: web.proxyID, NodeName: m.client.Node(), Resume: held})
		same.waitSettled(meshSettleTimeout, settleQuiet)
		other.waitSettled(meshSettleTimeout, settleQuiet)
		for _, r := range same.responsesSince(0) {
			if len(r.Resources) > 0 || len(r.Removed) > 0 {
				t.Errorf("%s: resent %s", same.cfg.Label, r)
			}
		}
		var got []string
		for _, r := range other.responsesSince(0) {
			for _, n := range r.names() {
				got = append(got, shortType(r.TypeURL)+"/"+n)
			}
		}
		slices.Sort(got)
		l, err := publicListener(same.view())
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"CDS/" + apiCluster, "EDS/" + apiCluster, "LDS/" + l.GetName()}
		if !slices.Equal(got, want) {
			t.Errorf("%s: received %v, want only the leaf-bearing resources and the refreshed endpoints %v", other.cfg.Label, got, want)
		}
		if _, err := sameConfig(same.view(), web.sotwClient.view(), true); err != nil {
			t.Errorf("resumed on the client agent: %v", err)
		}
		if _, err := sameConfig(other.view(), web.deltaServer.view(), true); err != nil {
			t.Errorf("resumed on the server: %v", err)
		}
	}
}
