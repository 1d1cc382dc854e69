package integration

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// The terminating-gateway scenario of issue 19: legacy, a service outside
// the mesh registered in the catalog on an external node, becomes
// reachable from a sidecar's upstream once a terminating-gateway entry
// links it (the upstream's EDS carries the gateway's address, as Consul's
// does), and unreachable again once the entry is removed.
//
//	go test ./integration/ -run 'TestTerminatingGatewayReachability' -v

const (
	gatewayPort    = 8443
	legacyBindPort = apiBindPort + 10
)

func TestTerminatingGatewayReachability(t *testing.T) {
	m := startMesh(t)
	if err := m.rc.putTrue(m.ctx, m.leader.HTTPAddr(), "/v1/catalog/register", jsonBody(t, map[string]any{
		"Node": "external", "Address": "203.0.113.20",
		"Service": map[string]any{"ID": "legacy", "Service": "legacy", "Port": 80},
	})); err != nil {
		t.Fatalf("register legacy: %v", err)
	}
	m.register(m.client, map[string]any{
		"ID": "term", "Name": "term", "Kind": "terminating-gateway", "Port": gatewayPort,
		"Checks": []any{map[string]any{"Name": "gateway ready", "TTL": "10m", "Status": "passing"}},
	})
	shop := sidecarService("shop", "shop", 8090)
	shop["Connect"].(map[string]any)["SidecarService"].(map[string]any)["Proxy"] = map[string]any{
		"Upstreams": []any{map[string]any{"DestinationName": "legacy", "LocalBindPort": legacyBindPort}},
	}
	m.register(m.client, shop)
	m.waitInCatalog("term")
	m.waitInCatalog("shop-sidecar-proxy")

	c := startADS(t, adsClientConfig{Label: "shop delta@client", Protocol: protoDelta, Addr: m.client.GRPCAddr(), ProxyID: "shop-sidecar-proxy"})
	legacy := m.sni("legacy")
	gatewayAddr := fmt.Sprintf("127.0.0.1:%d", gatewayPort) // the client agent's address
	legacyEndpoints := func(v adsView) ([]string, error) {
		r, ok := v.Held[edsType][legacy]
		if !ok {
			return nil, fmt.Errorf("no endpoints %q among %v", legacy, v.names(edsType))
		}
		out := []string{}
		for _, l := range r.Msg.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				sa := e.GetEndpoint().GetAddress().GetSocketAddress()
				out = append(out, fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue()))
			}
		}
		return out, nil
	}
	wantEndpoints := func(want ...string) func(adsView) error {
		return func(v adsView) error {
			got, err := legacyEndpoints(v)
			if err != nil {
				return err
			}
			if !slices.Equal(got, append([]string{}, want...)) {
				return fmt.Errorf("endpoints of %s: %v, want %v", legacy, got, want)
			}
			return nil
		}
	}

	phase(t, "not linked: the upstream has no endpoints")
	c.waitSettled(meshSettleTimeout, settleQuiet)
	c.waitFor(updateTimeout, "legacy unreachable before the link", wantEndpoints())

	phase(t, "terminating-gateway entry written")
	m.configEntry(map[string]any{"Kind": "terminating-gateway", "Name": "term", "Services": []any{map[string]any{"Name": "legacy"}}})
	c.waitFor(updateTimeout, "legacy through the gateway", wantEndpoints(gatewayAddr))
	c.waitSettled(meshSettleTimeout, settleQuiet) // and the whole configuration validates
	eventually(t, syncTimeout, "health/connect/legacy", func() error {
		entries, err := healthService(m.ctx, m.rc, m.server.HTTPAddr(), "connect", "legacy", nil)
		if err != nil {
			return err
		}
		if len(entries) != 1 || entries[0].Service.ID != "term" {
			return fmt.Errorf("connect endpoints of legacy: %s", describeEntries(entries))
		}
		return nil
	})
	var links []struct {
		Gateway, Service struct{ Name string }
		GatewayKind      string
	}
	if _, err := m.rc.getJSON(m.ctx, m.server.HTTPAddr(), "/v1/catalog/gateway-services/term", &links); err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0].Service.Name != "legacy" || links[0].Gateway.Name != "term" || links[0].GatewayKind != "terminating-gateway" {
		t.Fatalf("gateway-services/term = %+v", links)
	}

	phase(t, "terminating-gateway entry removed")
	r, err := m.rc.do(m.ctx, http.MethodDelete, m.leader.HTTPAddr(), "/v1/config/terminating-gateway/term", nil)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("delete entry: %v %+v", err, r)
	}
	c.waitFor(updateTimeout, "legacy unreachable after the removal", wantEndpoints())
}
