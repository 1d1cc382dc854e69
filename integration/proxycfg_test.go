package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// The proxycfg scenario of issue 5, observed through ADS: on a client
// agent (local config source, data from the servers over deduplicated
// RPCs) and on a server (the catalog config source for a proxy of the
// client agent, and the local source for a proxy of its own; data from
// the server's state store), each kind of change produces a new
// configuration for the proxies it concerns and nothing for the others.
//
//	go test ./integration/ -run 'TestProxycfg' -v

// watchedProxy is one proxy stream, the service the proxy represents and
// whether the changes concern it.
type watchedProxy struct {
	c        *adsClient
	service  string
	affected bool
}

func TestProxycfgUpdates(t *testing.T) {
	m := startMesh(t)
	// Proxies the changes below do not concern: upstream zzz, service
	// other. And a web instance registered on the server itself, served
	// there by the local source (the catalog source's hand-off).
	m.register(m.client, sidecarService("other", "other", 8085, "zzz"))
	m.register(m.server, sidecarService("web-on-server", "web", 8086, "api"))
	m.register(m.server, sidecarService("other-on-server", "other", 8087, "zzz"))
	m.waitInCatalog("other-sidecar-proxy")

	stream := func(protocol, proxyID, service string, a *harness.Agent, nodeName string, affected bool) watchedProxy {
		return watchedProxy{service: service, affected: affected, c: startADS(t, adsClientConfig{
			Label:    fmt.Sprintf("%s %s@%s", proxyID, protocol, a.Node()),
			Protocol: protocol, Addr: a.GRPCAddr(), ProxyID: proxyID, NodeName: nodeName,
		})}
	}
	proxies := []watchedProxy{
		stream(protoDelta, "web-sidecar-proxy", "web", m.client, "", true),
		stream(protoDelta, "web-sidecar-proxy", "web", m.server, m.client.Node(), true),
		stream(protoDelta, "web-on-server-sidecar-proxy", "web", m.server, "", true),
		stream(protoSotW, "web-sidecar-proxy", "web", m.client, "", true),
		stream(protoDelta, "other-sidecar-proxy", "other", m.client, "", false),
		stream(protoDelta, "other-sidecar-proxy", "other", m.server, m.client.Node(), false),
		stream(protoDelta, "other-on-server-sidecar-proxy", "other", m.server, "", false),
		stream(protoSotW, "other-sidecar-proxy", "other", m.server, m.client.Node(), false),
	}
	for _, p := range proxies {
		p.c.waitSettled(meshSettleTimeout, settleQuiet)
	}
	apiCluster, apiV2Cluster := m.sni("api"), m.sni("api-v2")
	apiRoute := "api"
	roots, err := m.roots()
	if err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name   string
		change func()
		// done holds once an affected proxy has the change.
		done func(p watchedProxy, v adsView) error
		// all is set for changes that concern every proxy.
		all bool
	}{
		{
			name:   "an upstream instance registers",
			change: func() { m.register(m.client, sidecarService("api-2", "api", 8082)) },
			done: func(_ watchedProxy, v adsView) error {
				if n := endpointCount(v, apiCluster); n != 2 {
					return fmt.Errorf("%d endpoints of %s", n, apiCluster)
				}
				return nil
			},
		},
		{
			name:   "an intention changes",
			change: func() { m.intention("intruder", "web", "deny") },
			done: func(_ watchedProxy, v adsView) error {
				got, err := publicRBAC(v)
				if err != nil {
					return err
				}
				if got != "DENY consul-intentions-layer4=[intruder]" {
					return fmt.Errorf("RBAC %q", got)
				}
				return nil
			},
		},
		{
			name: "the upstream's protocol becomes http",
			change: func() {
				m.configEntry(map[string]any{"Kind": "service-defaults", "Name": "api", "Protocol": "http"})
			},
			done: func(_ watchedProxy, v adsView) error {
				got, err := routeClusters(v, apiRoute)
				if err != nil {
					return err
				}
				if !slices.Equal(got, []string{apiCluster}) {
					return fmt.Errorf("route %s sends to %v", apiRoute, got)
				}
				return nil
			},
		},
		{
			name: "a splitter changes",
			change: func() {
				m.configEntry(map[string]any{"Kind": "service-defaults", "Name": "api-v2", "Protocol": "http"})
				m.configEntry(map[string]any{"Kind": "service-splitter", "Name": "api", "Splits": []any{
					map[string]any{"Weight": 90},
					map[string]any{"Weight": 10, "Service": "api-v2"},
				}})
			},
			done: func(_ watchedProxy, v adsView) error {
				got, err := routeClusters(v, apiRoute)
				if err != nil {
					return err
				}
				want := []string{apiCluster + ":9000", apiV2Cluster + ":1000"}
				if !slices.Equal(got, want) {
					return fmt.Errorf("route %s sends to %v, want %v", apiRoute, got, want)
				}
				if _, ok := v.Held[cdsType][apiV2Cluster]; !ok {
					return fmt.Errorf("no cluster %s among %v", apiV2Cluster, v.names(cdsType))
				}
				return nil
			},
		},
		{
			// A new root concerns every proxy: every listener and cluster
			// must trust it (and still the old one, which signed the
			// leaves in use) at once.
			name:   "the CA rotates to a new key type",
			change: func() { m.rotateCA("rsa", 2048) },
			all:    true,
			done: func(_ watchedProxy, v adsView) error {
				r, err := m.roots()
				if err != nil {
					return err
				}
				if r.ActiveRootID == roots.ActiveRootID {
					return fmt.Errorf("root not rotated yet")
				}
				for name, ts := range meshSockets(v) {
					ca := trustedCA(ts)
					for _, id := range []string{r.ActiveRootID, roots.ActiveRootID} {
						if !strings.Contains(ca, strings.TrimSpace(rootPEM(r, id))) {
							return fmt.Errorf("%s does not trust root %s", name, id)
						}
					}
				}
				return nil
			},
		},
	}
	changedAt := make([]time.Time, len(steps))
	for i, st := range steps {
		seq := map[*adsClient]int{}
		for _, p := range proxies {
			seq[p.c] = p.c.view().Seq
		}
		changed := time.Now()
		changedAt[i] = changed
		st.change()
		for _, p := range proxies {
			if !p.affected && !st.all {
				continue
			}
			v := p.c.waitFor(updateTimeout, st.name, func(v adsView) error { return st.done(p, v) })
			t.Logf("%s: %s: updated %s after the write returned", st.name, p.c.cfg.Label, v.Last.Sub(changed).Round(time.Millisecond))
		}
		// The affected proxies have the change; an unaffected one had as
		// long plus noUpdateWindow to receive something.
		time.Sleep(noUpdateWindow)
		for _, p := range proxies {
			got := p.c.responsesSince(seq[p.c])
			switch {
			case (p.affected || st.all) && len(got) == 0:
				t.Errorf("%s: %s: no update", st.name, p.c.cfg.Label)
			case !p.affected && !st.all && len(got) > 0:
				t.Errorf("%s: %s is not concerned but received %v", st.name, p.c.cfg.Label, got)
			}
		}
		for _, p := range proxies {
			p.c.waitSettled(meshSettleTimeout, settleQuiet)
		}
	}

	// Each agent re-issues its leaves under the new root within Consul's
	// jitter window (30 s, so that a rotation does not send every CSR of
	// the datacenter at once); every proxy then presents a leaf of the new
	// root, in its public listener and its upstream clusters.
	r, err := m.roots()
	if err != nil {
		t.Fatal(err)
	}
	root, err := r.activeRoot()
	if err != nil {
		t.Fatal(err)
	}
	rotated := changedAt[len(steps)-1]
	for _, p := range proxies {
		p.c.waitFor(leafReissueTimeout-time.Since(rotated), "leaves of the new root", func(v adsView) error {
			for name, ts := range meshSockets(v) {
				if err := m.checkLeaf(leafOf(ts), p.service, root); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			return nil
		})
		t.Logf("%s: leaves of the new root by %s after the rotation", p.c.cfg.Label, time.Since(rotated).Round(time.Millisecond))
	}
	for _, p := range proxies {
		p.c.waitSettled(meshSettleTimeout, settleQuiet)
		m.waitStatusMatches(m.agentOf(p.c), p.c)
	}
}

// leafReissueTimeout bounds leaf re-issue after a rotation: Consul's
// 30 s jitter window plus a margin.
const leafReissueTimeout = 40 * time.Second

// meshSockets returns the mesh TLS transport sockets of a connect proxy:
// its public listener's and its upstream clusters', by resource name.
func meshSockets(v adsView) map[string]*corev3.TransportSocket {
	out := map[string]*corev3.TransportSocket{}
	if l, err := publicListener(v); err == nil {
		out[l.GetName()] = l.GetFilterChains()[0].GetTransportSocket()
	}
	for _, name := range v.names(cdsType) {
		if ts := v.Held[cdsType][name].Msg.(*clusterv3.Cluster).GetTransportSocket(); ts != nil {
			out[name] = ts
		}
	}
	return out
}

// rootPEM returns a root's certificate.
func rootPEM(r caRoots, id string) string {
	for _, root := range r.Roots {
		if root.ID == id {
			return root.RootCert
		}
	}
	return "no root " + id
}

// trustedCA returns the roots a mesh TLS context (either direction)
// trusts.
func trustedCA(ts *corev3.TransportSocket) string {
	for _, m := range []interface {
		proto.Message
		GetCommonTlsContext() *tlsv3.CommonTlsContext
	}{&tlsv3.DownstreamTlsContext{}, &tlsv3.UpstreamTlsContext{}} {
		if ts.GetTypedConfig().MessageIs(m) && ts.GetTypedConfig().UnmarshalTo(m) == nil {
			return m.GetCommonTlsContext().GetValidationContext().GetTrustedCa().GetInlineString()
		}
	}
	return ""
}
