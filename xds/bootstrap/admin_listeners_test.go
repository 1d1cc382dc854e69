package bootstrap

import (
	"errors"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// adminProbe is one request to an admin listener and where it must end
// up: the path the admin server sees, or "" for Envoy's own 404.
type adminProbe struct{ path, upstream string }

// wantAdminListener is one static listener a bootstrap must have.
type wantAdminListener struct {
	name, addr, statPrefix string
	probes                 []adminProbe
}

var (
	prometheusProbes = []adminProbe{
		{"/metrics", "/stats/prometheus"},
		{"/metrics/extra", ""},
		{"/stats", ""},
		{"/stats/prometheus", ""},
		{"/ready", ""},
		{"/config_dump", ""},
		{"/quitquitquit", ""},
		{"/", ""},
	}
	statsProbes = []adminProbe{
		{"/stats", "/stats"},
		{"/stats/prometheus", "/stats/prometheus"},
		{"/stats/recentlookups", "/stats/recentlookups"},
		{"/metrics", ""},
		{"/ready", ""},
		{"/config_dump", ""},
		{"/clusters", ""},
		{"/", ""},
	}
	readyProbes = []adminProbe{
		{"/ready", "/ready"},
		{"/ready/x", ""},
		{"/stats", ""},
		{"/metrics", ""},
		{"/", ""},
	}
)

func TestAdminListeners(t *testing.T) {
	base := Config{ProxyID: "web-sidecar-proxy", ProxyCluster: "web"}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	for _, tc := range []struct {
		name      string
		cfg       Config
		listeners []wantAdminListener
		selfAdmin string // ip:port of the self_admin endpoint, "" for no cluster
	}{
		{"none", base, nil, ""},
		{"prometheus alone", with(func(c *Config) { c.PrometheusBindAddr = "0.0.0.0:9102" }),
			[]wantAdminListener{{"envoy_prometheus_metrics_listener", "0.0.0.0:9102", "envoy_prometheus_metrics", prometheusProbes}},
			"127.0.0.1:19000"},
		{"stats alone", with(func(c *Config) { c.StatsBindAddr = "10.0.0.3:9103" }),
			[]wantAdminListener{{"envoy_metrics_listener", "10.0.0.3:9103", "envoy_metrics", statsProbes}},
			"127.0.0.1:19000"},
		{"ready alone", with(func(c *Config) { c.ReadyBindAddr = "10.0.0.3:8443" }),
			[]wantAdminListener{{"envoy_ready_listener", "10.0.0.3:8443", "envoy_ready", readyProbes}},
			"127.0.0.1:19000"},
		{"all three share one self_admin", with(func(c *Config) {
			c.AdminBind = "127.0.0.2:19005"
			c.ReadyBindAddr = "10.0.0.3:8443"
			c.StatsBindAddr = "10.0.0.3:9103"
			c.PrometheusBindAddr = "10.0.0.3:9102"
		}), []wantAdminListener{ // Consul's order
			{"envoy_prometheus_metrics_listener", "10.0.0.3:9102", "envoy_prometheus_metrics", prometheusProbes},
			{"envoy_metrics_listener", "10.0.0.3:9103", "envoy_metrics", statsProbes},
			{"envoy_ready_listener", "10.0.0.3:8443", "envoy_ready", readyProbes},
		}, "127.0.0.2:19005"},
		{"ipv6", with(func(c *Config) { c.AdminBind = "[::1]:19001"; c.PrometheusBindAddr = "[::]:9102" }),
			[]wantAdminListener{{"envoy_prometheus_metrics_listener", "[::]:9102", "envoy_prometheus_metrics", prometheusProbes}},
			"[::1]:19001"},
		{"wildcard admin is reached on loopback", with(func(c *Config) { c.AdminBind = "0.0.0.0:19000"; c.StatsBindAddr = "10.0.0.3:9103" }),
			[]wantAdminListener{{"envoy_metrics_listener", "10.0.0.3:9103", "envoy_metrics", statsProbes}},
			"127.0.0.1:19000"},
		{"ipv6 wildcard admin is reached on loopback", with(func(c *Config) { c.AdminBind = "[::]:19000"; c.StatsBindAddr = "10.0.0.3:9103" }),
			[]wantAdminListener{{"envoy_metrics_listener", "10.0.0.3:9103", "envoy_metrics", statsProbes}},
			"[::1]:19000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Generate(tc.cfg)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			b, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse(Generate()): %v\n%s", err, out)
			}
			checkAdminListeners(t, b, tc.listeners)
			checkSelfAdmin(t, b, tc.selfAdmin)
		})
	}
}

func checkAdminListeners(t *testing.T, b *bootstrapv3.Bootstrap, want []wantAdminListener) {
	t.Helper()
	ls := b.GetStaticResources().GetListeners()
	if len(ls) != len(want) {
		t.Fatalf("%d static listeners %v, want %d", len(ls), ls, len(want))
	}
	for i, w := range want {
		l := ls[i]
		if l.GetName() != w.name || addrString(l.GetAddress()) != w.addr {
			t.Errorf("listener %d is %s on %s, want %s on %s", i, l.GetName(), addrString(l.GetAddress()), w.name, w.addr)
		}
		hcm := adminHCM(t, l)
		if hcm.GetStatPrefix() != w.statPrefix || hcm.GetCodecType() != hcmv3.HttpConnectionManager_HTTP1 {
			t.Errorf("%s: stat_prefix %q codec %v, want %q over HTTP1", w.name, hcm.GetStatPrefix(), hcm.GetCodecType(), w.statPrefix)
		}
		if rc := hcm.GetRouteConfig(); rc.GetName() != "self_admin_route" {
			t.Errorf("%s: route config %q, want self_admin_route", w.name, rc.GetName())
		}
		for _, p := range w.probes {
			if got := routeAdmin(t, hcm, p.path); got != p.upstream {
				t.Errorf("%s: GET %s reaches %q, want %q (\"\" is a 404)", w.name, p.path, got, p.upstream)
			}
		}
	}
}

func checkSelfAdmin(t *testing.T, b *bootstrapv3.Bootstrap, want string) {
	t.Helper()
	var found []string
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != "self_admin" {
			continue
		}
		if c.GetType().String() != "STATIC" || c.GetLoadAssignment().GetClusterName() != "self_admin" {
			t.Errorf("self_admin type %v, load assignment for %q", c.GetType(), c.GetLoadAssignment().GetClusterName())
		}
		found = append(found, addrString(c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress()))
	}
	switch {
	case want == "" && len(found) != 0:
		t.Errorf("self_admin clusters %v without an admin listener", found)
	case want != "" && (len(found) != 1 || found[0] != want):
		t.Errorf("self_admin clusters at %v, want exactly one at %s", found, want)
	}
	if n := len(b.GetStaticResources().GetClusters()); n != 1+len(found) {
		t.Errorf("%d static clusters, want local_agent and %d self_admin", n, len(found))
	}
}

func adminHCM(t *testing.T, l *listenerv3.Listener) *hcmv3.HttpConnectionManager {
	t.Helper()
	fcs := l.GetFilterChains()
	if len(fcs) != 1 || len(fcs[0].GetFilters()) != 1 || fcs[0].GetFilters()[0].GetName() != "envoy.filters.network.http_connection_manager" {
		t.Fatalf("%s: filter chains %v, want one connection manager", l.GetName(), fcs)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := fcs[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatalf("%s: %v", l.GetName(), err)
	}
	return &hcm
}

// routeAdmin routes GET path as Envoy does with these route configs: the
// first route that matches wins; a route to self_admin replaces the
// matched part with its prefix_rewrite. It returns the path the admin
// server sees, or "" for a 404 direct response.
func routeAdmin(t *testing.T, hcm *hcmv3.HttpConnectionManager, path string) string {
	t.Helper()
	vhs := hcm.GetRouteConfig().GetVirtualHosts()
	if len(vhs) != 1 || len(vhs[0].GetDomains()) != 1 || vhs[0].GetDomains()[0] != "*" {
		t.Fatalf("virtual hosts %v, want one for every domain", vhs)
	}
	for _, r := range vhs[0].GetRoutes() {
		m := r.GetMatch()
		var matched string
		switch {
		case m.GetPath() != "" && m.GetPath() == path:
			matched = path
		case m.GetPrefix() != "" && strings.HasPrefix(path, m.GetPrefix()):
			matched = m.GetPrefix()
		default:
			continue
		}
		if dr := r.GetDirectResponse(); dr != nil {
			if dr.GetStatus() != 404 {
				t.Fatalf("direct response %d, want 404", dr.GetStatus())
			}
			return ""
		}
		if r.GetRoute().GetCluster() != "self_admin" {
			t.Fatalf("route to %q, want self_admin", r.GetRoute().GetCluster())
		}
		return r.GetRoute().GetPrefixRewrite() + strings.TrimPrefix(path, matched)
	}
	t.Fatalf("no route matches %s: Envoy would 404, but the config should say so", path)
	return ""
}

func TestAdminListenersRejectBadAddresses(t *testing.T) {
	base := Config{ProxyID: "p", ProxyCluster: "s"}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	for _, tc := range []struct {
		name string
		cfg  Config
		msgs []string
	}{
		{"prometheus hostname", with(func(c *Config) { c.PrometheusBindAddr = "localhost:9102" }),
			[]string{`envoy_prometheus_bind_addr "localhost:9102"`, "not an IP address"}},
		{"prometheus without port", with(func(c *Config) { c.PrometheusBindAddr = "10.0.0.1" }),
			[]string{`envoy_prometheus_bind_addr "10.0.0.1"`, "missing port"}},
		{"stats without host", with(func(c *Config) { c.StatsBindAddr = ":9103" }),
			[]string{`envoy_stats_bind_addr ":9103"`, "not an IP address"}},
		{"stats port zero", with(func(c *Config) { c.StatsBindAddr = "10.0.0.1:0" }),
			[]string{`envoy_stats_bind_addr "10.0.0.1:0"`, "invalid port"}},
		{"stats named port", with(func(c *Config) { c.StatsBindAddr = "10.0.0.1:http" }),
			[]string{`envoy_stats_bind_addr "10.0.0.1:http"`, "invalid port"}},
		{"ready hostname", with(func(c *Config) { c.ReadyBindAddr = "ingress.local:8443" }),
			[]string{`ready bind address "ingress.local:8443"`}},
		{"stats on the prometheus address", with(func(c *Config) { c.PrometheusBindAddr = "10.0.0.1:9102"; c.StatsBindAddr = "10.0.0.1:9102" }),
			[]string{`envoy_stats_bind_addr "10.0.0.1:9102" is also the envoy_prometheus_bind_addr`}},
		{"prometheus on the admin address", with(func(c *Config) { c.PrometheusBindAddr = "127.0.0.1:19000" }),
			[]string{`envoy_prometheus_bind_addr "127.0.0.1:19000" is also the admin bind address`}},
		{"ready on the stats address, spelt otherwise", with(func(c *Config) {
			c.StatsBindAddr = "10.0.0.1:8443"
			c.ReadyBindAddr = "[::ffff:10.0.0.1]:8443"
		}), []string{`ready bind address "[::ffff:10.0.0.1]:8443" is also the envoy_stats_bind_addr`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Generate(tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Generate = %q, %v; want ErrInvalidConfig", out, err)
			}
			for _, m := range tc.msgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
		})
	}
}
