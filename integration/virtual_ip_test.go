package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// tproxyOutbound is the transparent proxy's outbound listener.
const tproxyOutbound = "outbound_listener:127.0.0.1:15001"

// outboundChains reads the outbound listener's filter chains as
// name -> matched addresses; an error when the listener is missing or a
// chain matches a port.
func outboundChains(v adsView) (map[string][]string, error) {
	r, ok := v.Held[ldsType][tproxyOutbound]
	if !ok {
		return nil, fmt.Errorf("no %s among %v", tproxyOutbound, v.names(ldsType))
	}
	out := map[string][]string{}
	for _, fc := range r.Msg.(*listenerv3.Listener).GetFilterChains() {
		m := fc.GetFilterChainMatch()
		if m.GetDestinationPort() != nil {
			return nil, fmt.Errorf("chain %s matches port %d", fc.GetName(), m.GetDestinationPort().GetValue())
		}
		for _, p := range m.GetPrefixRanges() {
			out[fc.GetName()] = append(out[fc.GetName()], p.GetAddressPrefix())
		}
	}
	return out, nil
}

// connectVirtualIPs reads the consul-virtual tagged address of every
// Connect endpoint of a service from a server's health endpoint.
func (m *mesh) connectVirtualIPs(service string) ([]string, error) {
	var entries []struct {
		Service struct {
			TaggedAddresses map[string]struct {
				Address string
				Port    int
			}
		}
	}
	if _, err := m.rc.getJSON(m.ctx, m.server.HTTPAddr(), "/v1/health/connect/"+service, &entries); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Service.TaggedAddresses["consul-virtual"].Address)
	}
	return out, nil
}

// TestVirtualIPsReachTransparentProxies: a transparent proxy's outbound
// listener holds one chain per upstream, matching the upstream's virtual
// IP (the consul-virtual address the catalog shows) on any port; a new
// service's chain arrives within a second of its registration, and its
// instances changing afterwards sends only endpoints, never the listener.
func TestVirtualIPsReachTransparentProxies(t *testing.T) {
	m := startMesh(t)
	m.register(m.client, map[string]any{
		"ID": "tp", "Name": "tp", "Port": 8090,
		"Connect": map[string]any{"SidecarService": map[string]any{
			"Checks": []any{map[string]any{"Name": "envoy ready", "TTL": "10m", "Status": "passing"}},
			"Proxy":  map[string]any{"Mode": "transparent"},
		}},
	})
	m.waitInCatalog("tp-sidecar-proxy")
	tp := startADS(t, adsClientConfig{Label: "tp delta@client", Protocol: protoDelta, Addr: m.client.GRPCAddr(), ProxyID: "tp-sidecar-proxy"})

	phase(t, "every mesh service's virtual IP has a chain")
	tp.waitFor(meshSettleTimeout, "chains for api and web", func(v adsView) error {
		chains, err := outboundChains(v)
		if err != nil {
			return err
		}
		for _, svc := range []string{"api", "web"} {
			vips, err := m.connectVirtualIPs(svc)
			if err != nil {
				return err
			}
			if len(vips) == 0 || !strings.HasPrefix(vips[0], "240.") {
				return fmt.Errorf("%s's endpoints carry virtual IPs %v", svc, vips)
			}
			if !slices.Equal(chains[svc], vips[:1]) {
				return fmt.Errorf("chain %s matches %v, want %v (chains %v)", svc, chains[svc], vips[:1], chains)
			}
		}
		return nil
	})
	tp.waitSettled(meshSettleTimeout, settleQuiet)

	phase(t, "a new service's virtual IP reaches the listener within 1s")
	registered := time.Now()
	m.register(m.client, sidecarService("billing", "billing", 8083))
	v := tp.waitFor(updateTimeout, "a chain for billing", func(v adsView) error {
		chains, err := outboundChains(v)
		if err != nil {
			return err
		}
		if len(chains["billing"]) != 1 || !strings.HasPrefix(chains["billing"][0], "240.") {
			return fmt.Errorf("chains %v", chains)
		}
		return nil
	})
	took := v.Last.Sub(registered)
	t.Logf("billing's chain %s after the registration returned", took.Round(time.Millisecond))
	if took > endpointBudget {
		t.Errorf("billing's chain took %s, budget %s", took.Round(time.Millisecond), endpointBudget)
	}
	chains, _ := outboundChains(v)
	if vips, err := m.connectVirtualIPs("billing"); err != nil || !slices.Equal(vips, chains["billing"]) {
		t.Errorf("billing's endpoints carry %v (%v), its chain matches %v", vips, err, chains["billing"])
	}
	m.waitConnectEndpoints("billing", 1)
	tp.waitSettled(meshSettleTimeout, settleQuiet)

	phase(t, "billing's instances changing leaves the listener alone")
	seq := tp.view().Seq
	billing := m.sni("billing")
	m.register(m.client, sidecarService("billing-2", "billing", 8084))
	tp.waitFor(updateTimeout, "second billing endpoint", func(v adsView) error {
		if n := endpointCount(v, billing); n != 2 {
			return fmt.Errorf("%d endpoints of %s", n, billing)
		}
		return nil
	})
	if err := agentPutOK(m.ctx, m.rc, m.client.HTTPAddr(), "/v1/agent/service/deregister/billing", nil); err != nil {
		t.Fatal(err)
	}
	tp.waitFor(updateTimeout, "one billing endpoint again", func(v adsView) error {
		if n := endpointCount(v, billing); n != 1 {
			return fmt.Errorf("%d endpoints of %s", n, billing)
		}
		return nil
	})
	after := tp.waitSettled(meshSettleTimeout, settleQuiet)
	for _, r := range tp.responsesSince(seq) {
		if r.TypeURL == ldsType {
			t.Errorf("an instance change sent listeners: %s", r)
		}
	}
	if got, _ := outboundChains(after); !slices.Equal(got["billing"], chains["billing"]) {
		t.Errorf("billing's chain matches %v, was %v", got["billing"], chains["billing"])
	}
	tp.validateSettled()
}
