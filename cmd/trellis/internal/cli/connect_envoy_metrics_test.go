package cli

import (
	"net"
	"strconv"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
)

// sidecarWithConfig is the web sidecar's registration with an opaque
// Proxy.Config (a JSON object, "" for none).
func sidecarWithConfig(config string) string {
	proxy := `{"DestinationServiceName": "web", "DestinationServiceID": "web"`
	if config != "" {
		proxy += `, "Config": ` + config
	}
	return `{"Kind": "connect-proxy", "ID": "web-sidecar-proxy", "Service": "web-sidecar-proxy", "Port": 21000,
		"Proxy": ` + proxy + `}, "Datacenter": "dc1"}`
}

// proxyDefaults is the global proxy-defaults entry as GET /v1/config
// returns it, with an opaque Config.
func proxyDefaults(config string) string {
	return `{"Kind": "proxy-defaults", "Name": "global", "Config": ` + config + `, "CreateIndex": 7, "ModifyIndex": 7}`
}

// staticListeners checks the bootstrap's static listeners, name to
// ip:port, exactly, and that they share one self_admin cluster.
func staticListeners(want map[string]string) func(*testing.T, *bootstrapv3.Bootstrap) {
	return func(t *testing.T, b *bootstrapv3.Bootstrap) {
		t.Helper()
		got := map[string]string{}
		for _, l := range b.GetStaticResources().GetListeners() {
			sa := l.GetAddress().GetSocketAddress()
			got[l.GetName()] = net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
		}
		if len(got) != len(want) {
			t.Errorf("static listeners %v, want %v", got, want)
		}
		for name, addr := range want {
			if got[name] != addr {
				t.Errorf("listener %s on %q, want %q (all: %v)", name, got[name], addr, got)
			}
		}
		selfAdmin := 0
		for _, c := range b.GetStaticResources().GetClusters() {
			if c.GetName() == "self_admin" {
				selfAdmin++
			}
		}
		if wantN := min(len(want), 1); selfAdmin != wantN {
			t.Errorf("%d self_admin clusters, want %d", selfAdmin, wantN)
		}
	}
}

// The routes and requests of a bootstrap for the web sidecar, whose
// registration and proxy-defaults the CLI reads.
const (
	svcPath  = "GET /v1/agent/service/web-sidecar-proxy"
	defsPath = "GET /v1/config/proxy-defaults/global"
)

// webSidecarBootstrap returns the arguments of a bootstrap for the web
// sidecar and the requests it makes.
func webSidecarBootstrap() ([]string, []sentRequest) {
	return []string{"-proxy-id", "web-sidecar-proxy", "-bootstrap"},
		[]sentRequest{{Method: "GET", Path: "/v1/agent/service/web-sidecar-proxy"}, proxyDefaultsRequest("")}
}

func TestConnectEnvoyMetricsListeners(t *testing.T) {
	args, getWeb := webSidecarBootstrap()
	const prom, stats = "envoy_prometheus_metrics_listener", "envoy_metrics_listener"
	runEnvoyCases(t, []envoyCase{
		{name: "none configured", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"protocol": "http"}`)}},
			check:  staticListeners(nil)},
		{name: "prometheus from the registration", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_prometheus_bind_addr": "0.0.0.0:9102"}`)}},
			check:  staticListeners(map[string]string{prom: "0.0.0.0:9102"})},
		{name: "stats from the registration", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_stats_bind_addr": "127.0.0.1:9103"}`)}},
			check:  staticListeners(map[string]string{stats: "127.0.0.1:9103"})},
		{name: "both only in proxy-defaults", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig("")},
				defsPath: {body: proxyDefaults(`{"envoy_prometheus_bind_addr": "0.0.0.0:9102", "envoy_stats_bind_addr": "0.0.0.0:9103"}`)}},
			check: staticListeners(map[string]string{prom: "0.0.0.0:9102", stats: "0.0.0.0:9103"})},
		{name: "the registration wins key by key", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_prometheus_bind_addr": "10.0.0.5:9102"}`)},
				defsPath: {body: proxyDefaults(`{"envoy_prometheus_bind_addr": "0.0.0.0:9999", "envoy_stats_bind_addr": "0.0.0.0:9103"}`)}},
			check: staticListeners(map[string]string{prom: "10.0.0.5:9102", stats: "0.0.0.0:9103"})},
		{name: "an empty value in the registration opts out", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_prometheus_bind_addr": ""}`)},
				defsPath: {body: proxyDefaults(`{"envoy_prometheus_bind_addr": "0.0.0.0:9102"}`)}},
			check: staticListeners(nil)},
		{name: "proxy-defaults without Config", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_stats_bind_addr": "127.0.0.1:9103"}`)},
				defsPath: {body: `{"Kind": "proxy-defaults", "Name": "global"}`}},
			check: staticListeners(map[string]string{stats: "127.0.0.1:9103"})},
		{name: "host names are resolved", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_prometheus_bind_addr": "localhost:9102"}`)}},
			check:  staticListeners(map[string]string{prom: "127.0.0.1:9102"})},
		{name: "an ingress gateway gets all three", args: []string{"-gateway=ingress", "-bootstrap"},
			routes: map[string]reply{"GET /v1/agent/services": {body: `{"ingress-gateway": {"Kind": "ingress-gateway", "ID": "ingress-gateway", "Service": "ingress-gateway"}}`},
				"GET /v1/agent/service/ingress-gateway": {body: `{"Kind": "ingress-gateway", "ID": "ingress-gateway", "Service": "ingress-gateway",
					"Address": "127.0.0.1", "Port": 8080, "Proxy": {"Config": {"envoy_stats_bind_addr": "127.0.0.1:9103"}}}`},
				defsPath: {body: proxyDefaults(`{"envoy_prometheus_bind_addr": "127.0.0.1:9102"}`)}},
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/services"}, {Method: "GET", Path: "/v1/agent/service/ingress-gateway"},
				proxyDefaultsRequest("")},
			check: staticListeners(map[string]string{prom: "127.0.0.1:9102", stats: "127.0.0.1:9103", "envoy_ready_listener": "127.0.0.1:8080"})},
		{name: "a proxy from the catalog gets proxy-defaults too", args: []string{"-proxy-id", "web-sidecar-proxy", "-node-name", "client-2", "-bootstrap"},
			routes: map[string]reply{"GET /v1/catalog/node/client-2": {body: `{"Node": {"Node": "client-2", "Datacenter": "dc1"},
				"Services": {"web-sidecar-proxy": ` + sidecarWithConfig("") + `}}`},
				defsPath: {body: proxyDefaults(`{"envoy_prometheus_bind_addr": "0.0.0.0:9102"}`)}},
			want:  []sentRequest{{Method: "GET", Path: "/v1/catalog/node/client-2"}, proxyDefaultsRequest("")},
			check: staticListeners(map[string]string{prom: "0.0.0.0:9102"})},
		{name: "the token reads proxy-defaults too", args: append(args, "-token", "tok-9"),
			routes: map[string]reply{svcPath: {body: sidecarWithConfig("")}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/service/web-sidecar-proxy", Token: "tok-9"}, proxyDefaultsRequest("tok-9")},
			check:  staticListeners(nil)},

		{name: "no port", args: args, want: getWeb, code: 1,
			routes:    map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_prometheus_bind_addr": "10.0.0.1"}`)}},
			stderrHas: []string{`Invalid envoy_prometheus_bind_addr "10.0.0.1"`, "missing port"}},
		{name: "no host", args: args, want: getWeb, code: 1,
			routes:    map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_stats_bind_addr": ":9103"}`)}},
			stderrHas: []string{`Invalid envoy_stats_bind_addr ":9103"`, "an IP address or host name is required"}},
		{name: "bad port from proxy-defaults", args: args, want: getWeb, code: 1,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig("")},
				defsPath: {body: proxyDefaults(`{"envoy_stats_bind_addr": "127.0.0.1:99999"}`)}},
			stderrHas: []string{"Error generating the Envoy bootstrap", "envoy_stats_bind_addr", "invalid port"}},
		{name: "not a string", args: args, want: getWeb, code: 1,
			routes:    map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_prometheus_bind_addr": 9102}`)}},
			stderrHas: []string{"failed parsing Proxy.Config: envoy_prometheus_bind_addr"}},
		{name: "same address twice", args: args, want: getWeb, code: 1,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig(`{"envoy_prometheus_bind_addr": "127.0.0.1:9102"}`)},
				defsPath: {body: proxyDefaults(`{"envoy_stats_bind_addr": "127.0.0.1:9102"}`)}},
			stderrHas: []string{`envoy_stats_bind_addr "127.0.0.1:9102" is also the envoy_prometheus_bind_addr`}},
		{name: "proxy-defaults unreadable", args: args, want: getWeb, code: 1,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig("")},
				defsPath: {status: 500, body: "rpc error: no leader"}},
			stderrHas: []string{"failed to fetch the global proxy-defaults: Unexpected response code: 500 (rpc error: no leader)"}},
	})
}
