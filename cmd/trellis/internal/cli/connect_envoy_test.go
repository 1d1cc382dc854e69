package cli

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/xds/bootstrap"
)

// Agent answers the connect envoy tests use.
const (
	servicesOneSidecar = `{
		"web": {"ID": "web", "Service": "web", "Port": 8080},
		"web-sidecar-proxy": {"Kind": "connect-proxy", "ID": "web-sidecar-proxy", "Service": "web-sidecar-proxy", "Port": 21000,
			"Proxy": {"DestinationServiceName": "web", "DestinationServiceID": "web"}},
		"api-sidecar-proxy": {"Kind": "connect-proxy", "ID": "api-sidecar-proxy", "Service": "api-sidecar-proxy", "Port": 21001,
			"Proxy": {"DestinationServiceName": "api", "DestinationServiceID": "api"}}}`
	servicesTwoSidecars = `{
		"web": {"ID": "web", "Service": "web"},
		"web-sidecar-proxy": {"Kind": "connect-proxy", "ID": "web-sidecar-proxy", "Service": "web-sidecar-proxy",
			"Proxy": {"DestinationServiceName": "web", "DestinationServiceID": "web"}},
		"web-proxy-2": {"Kind": "connect-proxy", "ID": "web-proxy-2", "Service": "web-sidecar-proxy",
			"Proxy": {"DestinationServiceName": "web", "DestinationServiceID": "WEB"}}}`
	webSidecar = `{"Kind": "connect-proxy", "ID": "web-sidecar-proxy", "Service": "web-sidecar-proxy", "Port": 21000,
		"Proxy": {"DestinationServiceName": "web", "DestinationServiceID": "web"}, "Datacenter": "dc1"}`
	servicesGateways = `{
		"term-1": {"Kind": "terminating-gateway", "ID": "term-1", "Service": "legacy-gw", "Port": 8443, "Proxy": {}},
		"mesh-a": {"Kind": "mesh-gateway", "ID": "mesh-a", "Service": "mesh-gateway", "Port": 8443, "Proxy": {}},
		"mesh-b": {"Kind": "mesh-gateway", "ID": "mesh-b", "Service": "mesh-gateway", "Port": 8444, "Proxy": {}}}`
)

// proxyDefaultsRequest is the read of the global proxy-defaults entry
// that every bootstrap of a proxy or gateway makes.
func proxyDefaultsRequest(token string) sentRequest {
	return sentRequest{Method: "GET", Path: "/v1/config/proxy-defaults/global", Token: token}
}

// envoyCase runs `connect envoy` against the fake agent.
type envoyCase struct {
	name   string
	args   []string
	vars   map[string]string
	routes map[string]reply
	want   []sentRequest // exact requests; a Body is compared as JSON
	code   int
	// check inspects the bootstrap printed on stdout (-bootstrap), after
	// it was parsed and validated.
	check     func(t *testing.T, b *bootstrapv3.Bootstrap)
	stdout    string // exact stdout when check is nil
	stderrHas []string
}

func runEnvoyCases(t *testing.T, cases []envoyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t, tc.routes)
			vars := map[string]string{"CONSUL_HTTP_ADDR": f.addr()}
			for k, v := range tc.vars {
				vars[k] = v
			}
			code, out, errOut := runCLI(append([]string{"connect", "envoy"}, tc.args...), vars, "")
			if code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			for _, s := range tc.stderrHas {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr %q lacks %q", errOut, s)
				}
			}
			if tc.check != nil {
				b, err := bootstrap.Parse([]byte(out))
				if err != nil {
					t.Fatalf("stdout is not a valid bootstrap: %v\n%s", err, out)
				}
				tc.check(t, b)
			} else if out != tc.stdout {
				t.Errorf("stdout %q, want %q", out, tc.stdout)
			}
			got := f.requests()
			if len(got) != len(tc.want) {
				t.Fatalf("requests %+v, want %+v", got, tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.Method != w.Method || g.Path != w.Path || g.Query != w.Query || g.Token != w.Token {
					t.Errorf("request %d: %s %s?%s token %q, want %s %s?%s token %q",
						i, g.Method, g.Path, g.Query, g.Token, w.Method, w.Path, w.Query, w.Token)
				}
				if w.Body != "" && !sameJSON(t, g.Body, w.Body) {
					t.Errorf("request %d body:\n%s\nwant:\n%s", i, g.Body, w.Body)
				}
			}
		})
	}
}

// node checks the node identity of a bootstrap.
func node(id, cluster string, meta map[string]string) func(*testing.T, *bootstrapv3.Bootstrap) {
	return func(t *testing.T, b *bootstrapv3.Bootstrap) {
		t.Helper()
		if b.GetNode().GetId() != id || b.GetNode().GetCluster() != cluster {
			t.Errorf("node %q/%q, want %q/%q", b.GetNode().GetId(), b.GetNode().GetCluster(), id, cluster)
		}
		for k, v := range meta {
			if got := b.GetNode().GetMetadata().GetFields()[k].GetStringValue(); got != v {
				t.Errorf("node metadata %s=%q, want %q", k, got, v)
			}
		}
	}
}

// agentAddr returns the local_agent endpoint as ip:port or unix:<path>.
func agentAddr(b *bootstrapv3.Bootstrap) string {
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == "local_agent" {
			a := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress()
			if p := a.GetPipe(); p != nil {
				return "unix:" + p.GetPath()
			}
			return net.JoinHostPort(a.GetSocketAddress().GetAddress(), strconv.FormatUint(uint64(a.GetSocketAddress().GetPortValue()), 10))
		}
	}
	return ""
}

func adsToken(b *bootstrapv3.Bootstrap) string {
	for _, md := range b.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetInitialMetadata() {
		if md.GetKey() == "x-consul-token" {
			return md.GetValue()
		}
	}
	return ""
}

func all(checks ...func(*testing.T, *bootstrapv3.Bootstrap)) func(*testing.T, *bootstrapv3.Bootstrap) {
	return func(t *testing.T, b *bootstrapv3.Bootstrap) {
		t.Helper()
		for _, c := range checks {
			c(t, b)
		}
	}
}

func TestConnectEnvoySidecar(t *testing.T) {
	getServices := sentRequest{Method: "GET", Path: "/v1/agent/services"}
	getWeb := sentRequest{Method: "GET", Path: "/v1/agent/service/web-sidecar-proxy"}
	routes := map[string]reply{
		"GET /v1/agent/services":                  {body: servicesOneSidecar},
		"GET /v1/agent/service/web-sidecar-proxy": {body: webSidecar},
	}
	runEnvoyCases(t, []envoyCase{
		{name: "sidecar-for finds the proxy", args: []string{"-sidecar-for", "web", "-bootstrap"}, routes: routes,
			want: []sentRequest{getServices, getWeb, proxyDefaultsRequest("")},
			check: all(node("web-sidecar-proxy", "web", map[string]string{"namespace": "default", "partition": "default"}),
				func(t *testing.T, b *bootstrapv3.Bootstrap) {
					if got := agentAddr(b); got != "127.0.0.1:8502" {
						t.Errorf("agent address %s, want the default 127.0.0.1:8502", got)
					}
					if a := b.GetAdmin().GetAddress().GetSocketAddress(); a.GetAddress() != "127.0.0.1" || a.GetPortValue() != 19000 {
						t.Errorf("admin %v, want 127.0.0.1:19000", a)
					}
					if tok := adsToken(b); tok != "" {
						t.Errorf("token %q without one given", tok)
					}
					if _, ok := b.GetNode().GetMetadata().GetFields()["node_name"]; ok {
						t.Error("node_name metadata without -node-name")
					}
				})},
		{name: "token grpc and admin from flags and env", routes: routes,
			args: []string{"-sidecar-for", "web", "-bootstrap", "-admin-bind", "127.0.0.1:19005"},
			vars: map[string]string{"CONSUL_HTTP_TOKEN": "tok-1", "CONSUL_GRPC_ADDR": "http://10.1.1.1:9502", "CONNECT_SIDECAR_FOR": "api"},
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/services", Token: "tok-1"},
				{Method: "GET", Path: "/v1/agent/service/web-sidecar-proxy", Token: "tok-1"}, proxyDefaultsRequest("tok-1")},
			check: all(node("web-sidecar-proxy", "web", nil), func(t *testing.T, b *bootstrapv3.Bootstrap) {
				if tok := adsToken(b); tok != "tok-1" {
					t.Errorf("x-consul-token %q, want tok-1", tok)
				}
				if got := agentAddr(b); got != "10.1.1.1:9502" {
					t.Errorf("agent address %s, want 10.1.1.1:9502", got)
				}
				if p := b.GetAdmin().GetAddress().GetSocketAddress().GetPortValue(); p != 19005 {
					t.Errorf("admin port %d, want 19005", p)
				}
			})},
		{name: "sidecar-for from the environment", routes: routes, args: []string{"-bootstrap", "-token", "flag-tok"},
			vars: map[string]string{"CONNECT_SIDECAR_FOR": "web", "CONSUL_HTTP_TOKEN": "env-tok"},
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/services", Token: "flag-tok"},
				{Method: "GET", Path: "/v1/agent/service/web-sidecar-proxy", Token: "flag-tok"}, proxyDefaultsRequest("flag-tok")},
			check: func(t *testing.T, b *bootstrapv3.Bootstrap) {
				if tok := adsToken(b); tok != "flag-tok" {
					t.Errorf("x-consul-token %q, want the -token flag's", tok)
				}
			}},
		{name: "no sidecar", args: []string{"-sidecar-for", "db", "-bootstrap"}, routes: routes,
			want: []sentRequest{getServices}, code: 1, stderrHas: []string{"No sidecar proxy registered for db"}},
		{name: "several sidecars", args: []string{"-sidecar-for", "web", "-bootstrap"},
			routes: map[string]reply{"GET /v1/agent/services": {body: servicesTwoSidecars}},
			want:   []sentRequest{getServices}, code: 1,
			stderrHas: []string{"More than one sidecar proxy registered for web.",
				"Start proxy with -proxy-id and one of the following IDs: web-proxy-2, web-sidecar-proxy"}},
		{name: "agent error", args: []string{"-sidecar-for", "web", "-bootstrap"},
			routes: map[string]reply{"GET /v1/agent/services": {status: 403, body: "Permission denied"}},
			want:   []sentRequest{getServices}, code: 1,
			stderrHas: []string{"Failed looking up sidecar proxy info for web: Unexpected response code: 403 (Permission denied)"}},
		{name: "proxy-id skips the lookup", args: []string{"-proxy-id", "web-sidecar-proxy", "-bootstrap"}, routes: routes,
			want: []sentRequest{getWeb, proxyDefaultsRequest("")}, check: node("web-sidecar-proxy", "web", nil)},
		{name: "unknown proxy-id", args: []string{"-proxy-id", "nope", "-bootstrap"}, routes: routes,
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/service/nope"}}, code: 1,
			stderrHas: []string{"failed fetch proxy config from local agent: Unexpected response code: 404"}},
		{name: "not a proxy", args: []string{"-proxy-id", "web", "-bootstrap"},
			routes: map[string]reply{"GET /v1/agent/service/web": {body: `{"ID":"web","Service":"web"}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/service/web"}}, code: 1,
			stderrHas: []string{"service is not a Connect proxy or gateway"}},
		{name: "no proxy at all", args: []string{"-bootstrap"}, code: 1,
			stderrHas: []string{"No proxy ID specified. One of -proxy-id, -sidecar-for, or -gateway is required"}},
		{name: "node name", args: []string{"-proxy-id", "web-sidecar-proxy", "-node-name", "client-2", "-bootstrap"},
			routes: map[string]reply{"GET /v1/catalog/node/client-2": {body: `{"Node":{"Node":"client-2","Datacenter":"dc3"},
				"Services":{"web-sidecar-proxy":` + webSidecar + `}}`}},
			want:  []sentRequest{{Method: "GET", Path: "/v1/catalog/node/client-2"}, proxyDefaultsRequest("")},
			check: node("web-sidecar-proxy", "web", map[string]string{"node_name": "client-2"})},
		{name: "node name, proxy missing", args: []string{"-proxy-id", "x", "-node-name", "client-2", "-bootstrap"},
			routes: map[string]reply{"GET /v1/catalog/node/client-2": {body: `{"Node":{"Node":"client-2"},"Services":{}}`}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/catalog/node/client-2"}}, code: 1,
			stderrHas: []string{`Proxy service with ID "x" not found`}},
		{name: "node name without proxy-id", args: []string{"-sidecar-for", "web", "-node-name", "n"}, code: 1,
			stderrHas: []string{"'-node-name' requires '-proxy-id'"}},
	})
}

func TestConnectEnvoyGRPCAddress(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	pem, _, err := ca.NewAgentCA(ca.AgentCARequest{Domain: "consul", Days: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeTestFile(caFile, pem); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := writeTestFile(notPEM, "not a certificate"); err != nil {
		t.Fatal(err)
	}
	// A relative -ca-file is named by its absolute path: Envoy need not
	// start in the same directory.
	t.Chdir(dir)
	routes := map[string]reply{"GET /v1/agent/service/web-sidecar-proxy": {body: webSidecar}}
	getWeb := []sentRequest{{Method: "GET", Path: "/v1/agent/service/web-sidecar-proxy"}, proxyDefaultsRequest("")}
	tlsCA := func(want string) func(*testing.T, *bootstrapv3.Bootstrap) {
		return func(t *testing.T, b *bootstrapv3.Bootstrap) {
			t.Helper()
			ts := b.GetStaticResources().GetClusters()[0].GetTransportSocket()
			if want == "-" {
				if ts != nil {
					t.Errorf("transport socket %v, want plaintext", ts)
				}
				return
			}
			var up tlsv3.UpstreamTlsContext
			if err := ts.GetTypedConfig().UnmarshalTo(&up); err != nil {
				t.Fatalf("transport socket %v: %v", ts, err)
			}
			// The bootstrap names the file (Envoy reads it) and inlines
			// nothing.
			trusted := up.GetCommonTlsContext().GetValidationContext().GetTrustedCa()
			if trusted.GetFilename() != want || trusted.GetInlineString() != "" {
				t.Errorf("trusted CA %v, want the file %q", trusted, want)
			}
		}
	}
	addr := func(want string) func(*testing.T, *bootstrapv3.Bootstrap) {
		return func(t *testing.T, b *bootstrapv3.Bootstrap) {
			t.Helper()
			if got := agentAddr(b); got != want {
				t.Errorf("agent address %s, want %s", got, want)
			}
		}
	}
	base := []string{"-proxy-id", "web-sidecar-proxy", "-bootstrap"}
	runEnvoyCases(t, []envoyCase{
		{name: "flag beats env", args: append(base, "-grpc-addr", "127.0.0.9:8600"), routes: routes, want: getWeb,
			vars: map[string]string{"CONSUL_GRPC_ADDR": "127.0.0.8:8502"}, check: all(addr("127.0.0.9:8600"), tlsCA("-"))},
		{name: "localhost is resolved", args: append(base, "-grpc-addr", "localhost:8502", "-admin-bind", "localhost:19001"),
			routes: routes, want: getWeb, check: all(addr("127.0.0.1:8502"), func(t *testing.T, b *bootstrapv3.Bootstrap) {
				if a := b.GetAdmin().GetAddress().GetSocketAddress().GetAddress(); a != "127.0.0.1" {
					t.Errorf("admin address %s, want localhost resolved to 127.0.0.1", a)
				}
			})},
		{name: "https with CA file", args: append(base, "-grpc-addr", "https://127.0.0.1:8503", "-grpc-ca-file", caFile),
			routes: routes, want: getWeb, check: all(addr("127.0.0.1:8503"), tlsCA(caFile))},
		{name: "CA file named by its absolute path", args: append(base, "-grpc-addr", "https://127.0.0.1:8503", "-grpc-ca-file", "ca.pem"),
			routes: routes, want: getWeb, check: tlsCA(caFile)},
		{name: "CONSUL_GRPC_ADDR and CONSUL_GRPC_CACERT", args: base, routes: routes, want: getWeb,
			vars:  map[string]string{"CONSUL_GRPC_ADDR": "https://127.0.0.1:8503", "CONSUL_GRPC_CACERT": caFile},
			check: all(addr("127.0.0.1:8503"), tlsCA(caFile))},
		{name: "CA file without a certificate", args: append(base, "-grpc-addr", "https://127.0.0.1:8503", "-grpc-ca-file", notPEM),
			routes: routes, want: getWeb, code: 1, stderrHas: []string{"Error loading gRPC CA file", "no PEM certificate"}},
		{name: "https with the HTTP CA", args: append(base, "-grpc-addr", "https://127.0.0.1:8503"),
			vars: map[string]string{"CONSUL_CACERT": caFile}, routes: routes, want: getWeb, check: tlsCA(caFile)},
		{name: "https with -ca-file", args: append(base, "-grpc-addr", "https://127.0.0.1:8503", "-ca-file", caFile),
			routes: routes, want: getWeb, check: all(addr("127.0.0.1:8503"), tlsCA(caFile))},
		{name: "http ignores the CA", args: append(base, "-grpc-addr", "http://127.0.0.1:8502", "-grpc-ca-file", caFile),
			routes: routes, want: getWeb, check: tlsCA("-")},
		{name: "unix socket", args: append(base, "-grpc-addr", "unix:///run/trellis/xds.sock"), routes: routes, want: getWeb,
			check: all(addr("unix:/run/trellis/xds.sock"), tlsCA("-"))},
		{name: "missing CA file", args: append(base, "-grpc-addr", "https://127.0.0.1:8503", "-grpc-ca-file", filepath.Join(dir, "nope")),
			routes: routes, want: getWeb, code: 1, stderrHas: []string{"Error loading gRPC CA file"}},
		{name: "bad grpc address", args: append(base, "-grpc-addr", "127.0.0.1"), routes: routes, want: getWeb, code: 1,
			stderrHas: []string{`Invalid agent gRPC address "127.0.0.1"`}},
		{name: "bad admin bind", args: append(base, "-admin-bind", "127.0.0.1:99999"), routes: routes, want: getWeb, code: 1,
			stderrHas: []string{"Error generating the Envoy bootstrap", "invalid port"}},
	})
}

func TestConnectEnvoyGateway(t *testing.T) {
	meshGW := `{"Kind":"mesh-gateway","ID":"%s","Service":"%s","Port":8443,"Proxy":{},"Datacenter":"dc1"}`
	gw := func(id, svc string) string {
		return strings.Replace(strings.Replace(meshGW, "%s", id, 1), "%s", svc, 1)
	}
	register := func(body string) sentRequest {
		return sentRequest{Method: "PUT", Path: "/v1/agent/service/register", Body: body}
	}
	runEnvoyCases(t, []envoyCase{
		{name: "register mesh gateway", args: []string{"-gateway=mesh", "-register", "-service", "my-mesh",
			"-address", "10.0.0.5:8443", "-wan-address", "198.51.100.1:443", "-bootstrap"},
			routes: map[string]reply{"PUT /v1/agent/service/register": {}, "GET /v1/agent/service/my-mesh": {body: gw("my-mesh", "my-mesh")}},
			want: []sentRequest{register(`{"Kind":"mesh-gateway","ID":"my-mesh","Name":"my-mesh","Port":8443,"Address":"10.0.0.5",
				"TaggedAddresses":{"lan":{"Address":"10.0.0.5","Port":8443},"wan":{"Address":"198.51.100.1","Port":443}},
				"Check":{"Name":"mesh-gateway listening","TCP":"10.0.0.5:8443","Interval":"10s","DeregisterCriticalServiceAfter":"6h"}}`),
				{Method: "GET", Path: "/v1/agent/service/my-mesh"}, proxyDefaultsRequest("")},
			check: node("my-mesh", "my-mesh", nil)},
		{name: "register with defaults, then no envoy", args: []string{"-gateway", "terminating", "-register", "-deregister-after-critical", "1m"},
			vars: map[string]string{"PATH": t.TempDir()},
			routes: map[string]reply{"PUT /v1/agent/service/register": {},
				"GET /v1/agent/service/terminating-gateway": {body: `{"Kind":"terminating-gateway","ID":"terminating-gateway","Service":"terminating-gateway","Proxy":{}}`}},
			want: []sentRequest{register(`{"Kind":"terminating-gateway","ID":"terminating-gateway","Name":"terminating-gateway","Port":443,
				"Check":{"Name":"terminating-gateway listening","TCP":"127.0.0.1:443","Interval":"10s","DeregisterCriticalServiceAfter":"1m"}}`),
				{Method: "GET", Path: "/v1/agent/service/terminating-gateway"}, proxyDefaultsRequest("")},
			code: 1, stdout: "Registered service: terminating-gateway\n",
			stderrHas: []string{`Couldn't find envoy binary: exec: "envoy": executable file not found in $PATH`}},
		{name: "registration refused", args: []string{"-gateway=mesh", "-register", "-bootstrap"},
			routes: map[string]reply{"PUT /v1/agent/service/register": {status: 400, body: "Invalid Service Meta"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/service/register"}}, code: 1,
			stderrHas: []string{`Error registering service "mesh-gateway": Unexpected response code: 400 (Invalid Service Meta)`}},
		{name: "ingress gets a ready listener", args: []string{"-gateway=ingress", "-register", "-address", "127.0.0.1:8080", "-bootstrap"},
			routes: map[string]reply{"PUT /v1/agent/service/register": {},
				"GET /v1/agent/service/ingress-gateway": {body: `{"Kind":"ingress-gateway","ID":"ingress-gateway","Service":"ingress-gateway","Address":"127.0.0.1","Port":8080,"Proxy":{}}`}},
			want: []sentRequest{{Method: "PUT", Path: "/v1/agent/service/register"}, {Method: "GET", Path: "/v1/agent/service/ingress-gateway"},
				proxyDefaultsRequest("")},
			check: all(node("ingress-gateway", "ingress-gateway", nil), func(t *testing.T, b *bootstrapv3.Bootstrap) {
				ls := b.GetStaticResources().GetListeners()
				if len(ls) != 1 || ls[0].GetName() != "envoy_ready_listener" ||
					ls[0].GetAddress().GetSocketAddress().GetPortValue() != 8080 {
					t.Errorf("listeners %v, want envoy_ready_listener on 127.0.0.1:8080", ls)
				}
			})},
		{name: "find the one gateway of a kind", args: []string{"-gateway=terminating", "-bootstrap"},
			routes: map[string]reply{"GET /v1/agent/services": {body: servicesGateways},
				"GET /v1/agent/service/term-1": {body: `{"Kind":"terminating-gateway","ID":"term-1","Service":"legacy-gw","Proxy":{}}`}},
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/services"}, {Method: "GET", Path: "/v1/agent/service/term-1"},
				proxyDefaultsRequest("")},
			check: node("term-1", "legacy-gw", nil)},
		{name: "several gateways of a kind", args: []string{"-gateway=mesh", "-bootstrap"},
			routes: map[string]reply{"GET /v1/agent/services": {body: servicesGateways}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/services"}}, code: 1,
			stderrHas: []string{"Cannot lookup the mesh-gateway's proxy ID because multiple are registered with the agent"}},
		{name: "no gateway of a kind", args: []string{"-gateway=ingress", "-bootstrap"},
			routes: map[string]reply{"GET /v1/agent/services": {body: servicesGateways}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/services"}}, code: 1,
			stderrHas: []string{"No ingress-gateway services registered with this agent"}},
		{name: "bad kind", args: []string{"-gateway=api", "-register"}, code: 1,
			stderrHas: []string{"Gateway must be one of: terminating, mesh, or ingress"}},
		{name: "register without gateway", args: []string{"-register", "-proxy-id", "x"}, code: 1,
			stderrHas: []string{"Auto-Registration can only be used for gateways"}},
		{name: "bad address flag", args: []string{"-gateway=mesh", "-register", "-address", "10.0.0.1:http"}, code: 1,
			stderrHas: []string{`invalid value "10.0.0.1:http" for flag -address`}},
	})
}

func TestConnectEnvoyFindBinary(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "envoy")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	routes := map[string]reply{"GET /v1/agent/service/web-sidecar-proxy": {body: webSidecar}}
	getWeb := []sentRequest{{Method: "GET", Path: "/v1/agent/service/web-sidecar-proxy"}, proxyDefaultsRequest("")}
	runEnvoyCases(t, []envoyCase{
		{name: "no PATH", args: []string{"-proxy-id", "web-sidecar-proxy"}, routes: routes, want: getWeb, code: 1,
			stderrHas: []string{`executable file not found in $PATH`}},
		{name: "not executable on PATH", args: []string{"-proxy-id", "web-sidecar-proxy"}, vars: map[string]string{"PATH": dir},
			routes: routes, want: getWeb, code: 1, stderrHas: []string{`executable file not found in $PATH`}},
		{name: "missing -envoy-binary", args: []string{"-proxy-id", "web-sidecar-proxy", "-envoy-binary", filepath.Join(dir, "nope")},
			routes: routes, want: getWeb, code: 1, stderrHas: []string{"Couldn't find envoy binary:", "no such file"}},
		{name: "-envoy-binary not executable", args: []string{"-proxy-id", "web-sidecar-proxy", "-envoy-binary", notExec},
			routes: routes, want: getWeb, code: 1, stderrHas: []string{"Couldn't find envoy binary:", "permission denied"}},
	})
}

func TestEnvoyArgs(t *testing.T) {
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{nil, "envoy --config-path /dev/fd/3 --disable-hot-restart"},
		{[]string{"--log-level", "debug"}, "envoy --config-path /dev/fd/3 --disable-hot-restart --log-level debug"},
		{[]string{"--restart-epoch", "2"}, "envoy --config-path /dev/fd/3 --restart-epoch 2"},
		{[]string{"--drain-time-s=5"}, "envoy --config-path /dev/fd/3 --drain-time-s=5"},
	} {
		if got := strings.Join(envoyArgs("envoy", "/dev/fd/3", tc.extra), " "); got != tc.want {
			t.Errorf("envoyArgs(%q) = %q, want %q", tc.extra, got, tc.want)
		}
	}
}

// The group lists the new subcommand.
func TestConnectGroupListsEnvoy(t *testing.T) {
	code, out, _ := runCLI([]string{"connect", "-h"}, nil, "")
	if code != 0 || !strings.Contains(out, "envoy") || !strings.Contains(out, "ca ") {
		t.Fatalf("connect -h (%d): %q", code, out)
	}
	if code, _, errOut := runCLI([]string{"connect", "envoy", "-h"}, nil, ""); code != 0 || !strings.Contains(errOut, "Usage: trellis connect envoy") {
		t.Fatalf("connect envoy -h (%d): %q", code, errOut)
	}
}
