package bootstrap

import (
	"bytes"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

const testCA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

// want is what one generated bootstrap must say.
type want struct {
	id, cluster string
	meta        map[string]string // exact node metadata
	admin       string            // ip:port
	agent       string            // ip:port, or "unix:<path>"
	token       string            // "" means no initial metadata at all
	tls         bool
	caPEM       string
	caFile      string // the CA named rather than inlined
	dc          string // consul.source.datacenter tag, "" for none
}

func TestGenerate(t *testing.T) {
	defMeta := map[string]string{"namespace": "default", "partition": "default"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want want
	}{
		{"sidecar defaults", Config{ProxyID: "web-sidecar-proxy", ProxyCluster: "web", Datacenter: "dc1"},
			want{id: "web-sidecar-proxy", cluster: "web", meta: defMeta, admin: "127.0.0.1:19000", agent: "127.0.0.1:8502", dc: "dc1"}},
		{"mesh gateway", Config{ProxyID: "mesh-gateway", ProxyCluster: "mesh-gateway", AgentAddress: "10.0.0.7:8502"},
			want{id: "mesh-gateway", cluster: "mesh-gateway", meta: defMeta, admin: "127.0.0.1:19000", agent: "10.0.0.7:8502"}},
		{"ingress gateway with node name", Config{ProxyID: "ingress-1", ProxyCluster: "ingress", NodeName: "client-3"},
			want{id: "ingress-1", cluster: "ingress", admin: "127.0.0.1:19000", agent: "127.0.0.1:8502",
				meta: map[string]string{"namespace": "default", "partition": "default", "node_name": "client-3"}}},
		{"with token", Config{ProxyID: "web-sidecar-proxy", ProxyCluster: "web", Token: "c9a52720-bf6c-4aa6-b8bc-66881a5ade95"},
			want{id: "web-sidecar-proxy", cluster: "web", meta: defMeta, admin: "127.0.0.1:19000", agent: "127.0.0.1:8502",
				token: "c9a52720-bf6c-4aa6-b8bc-66881a5ade95"}},
		{"custom admin bind", Config{ProxyID: "p", ProxyCluster: "s", AdminBind: "127.0.0.2:19005"},
			want{id: "p", cluster: "s", meta: defMeta, admin: "127.0.0.2:19005", agent: "127.0.0.1:8502"}},
		{"ipv6 admin and agent", Config{ProxyID: "p", ProxyCluster: "s", AdminBind: "[::1]:19001", AgentAddress: "[::1]:18502"},
			want{id: "p", cluster: "s", meta: defMeta, admin: "[::1]:19001", agent: "[::1]:18502"}},
		{"unix socket agent", Config{ProxyID: "p", ProxyCluster: "s", AgentSocket: "/run/trellis/grpc.sock"},
			want{id: "p", cluster: "s", meta: defMeta, admin: "127.0.0.1:19000", agent: "unix:/run/trellis/grpc.sock"}},
		{"TLS to the agent", Config{ProxyID: "p", ProxyCluster: "s", AgentTLS: true, AgentCAPEM: testCA},
			want{id: "p", cluster: "s", meta: defMeta, admin: "127.0.0.1:19000", agent: "127.0.0.1:8502", tls: true, caPEM: testCA}},
		{"TLS to the agent, CA file named", Config{ProxyID: "p", ProxyCluster: "s", AgentTLS: true, AgentCAFile: "/etc/trellis/ca.pem", AgentAddress: "127.0.0.1:8503"},
			want{id: "p", cluster: "s", meta: defMeta, admin: "127.0.0.1:19000", agent: "127.0.0.1:8503", tls: true, caFile: "/etc/trellis/ca.pem"}},
		{"TLS to the agent, system roots", Config{ProxyID: "p", ProxyCluster: "s", AgentTLS: true},
			want{id: "p", cluster: "s", meta: defMeta, admin: "127.0.0.1:19000", agent: "127.0.0.1:8502", tls: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Generate(tc.cfg)
			if err != nil {
				t.Fatalf("Generate: %v", err)
			}
			again, err := Generate(tc.cfg)
			if err != nil || !bytes.Equal(out, again) {
				t.Fatalf("output is not deterministic (%v)", err)
			}
			b, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse(Generate()): %v\n%s", err, out)
			}
			checkBootstrap(t, b, tc.want)
		})
	}
}

func checkBootstrap(t *testing.T, b *bootstrapv3.Bootstrap, w want) {
	t.Helper()
	if b.GetNode().GetId() != w.id || b.GetNode().GetCluster() != w.cluster {
		t.Errorf("node %q/%q, want %q/%q", b.GetNode().GetId(), b.GetNode().GetCluster(), w.id, w.cluster)
	}
	meta := map[string]string{}
	for k, v := range b.GetNode().GetMetadata().GetFields() {
		meta[k] = v.GetStringValue()
	}
	if len(meta) != len(w.meta) {
		t.Errorf("node metadata %v, want %v", meta, w.meta)
	}
	for k, v := range w.meta {
		if meta[k] != v {
			t.Errorf("node metadata %s=%q, want %q", k, meta[k], v)
		}
	}
	if got := addrString(b.GetAdmin().GetAddress()); got != w.admin {
		t.Errorf("admin address %s, want %s", got, w.admin)
	}
	logs := b.GetAdmin().GetAccessLog()
	var fal filev3.FileAccessLog
	if len(logs) != 1 || logs[0].GetTypedConfig().UnmarshalTo(&fal) != nil || fal.GetPath() != "/dev/null" {
		t.Errorf("admin access log %v, want a file logger to /dev/null", logs)
	}

	clusters := b.GetStaticResources().GetClusters()
	if len(clusters) != 1 || clusters[0].GetName() != "local_agent" {
		t.Fatalf("static clusters %v, want only local_agent", clusters)
	}
	c := clusters[0]
	if c.GetType().String() != "STATIC" || c.GetLoadAssignment().GetClusterName() != "local_agent" {
		t.Errorf("local_agent type %v, load assignment for %q", c.GetType(), c.GetLoadAssignment().GetClusterName())
	}
	eps := c.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		t.Fatalf("local_agent endpoints %v", eps)
	}
	if got := addrString(eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress()); got != w.agent {
		t.Errorf("agent address %s, want %s", got, w.agent)
	}
	var h2 httpv3.HttpProtocolOptions
	if err := c.GetTypedExtensionProtocolOptions()["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(&h2); err != nil ||
		h2.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("local_agent is not explicitly HTTP/2 (%v): %v", err, c.GetTypedExtensionProtocolOptions())
	}
	if ts := c.GetTransportSocket(); w.tls {
		var up tlsv3.UpstreamTlsContext
		if ts.GetName() != "envoy.transport_sockets.tls" || ts.GetTypedConfig().UnmarshalTo(&up) != nil {
			t.Errorf("transport socket %v, want TLS", ts)
		} else if ca := up.GetCommonTlsContext().GetValidationContext().GetTrustedCa(); ca.GetInlineString() != w.caPEM || ca.GetFilename() != w.caFile {
			t.Errorf("trusted CA %v, want inline %q, file %q", ca, w.caPEM, w.caFile)
		}
	} else if ts != nil {
		t.Errorf("transport socket %v, want plaintext", ts)
	}

	dyn := b.GetDynamicResources()
	for name, cs := range map[string]*corev3.ConfigSource{"lds": dyn.GetLdsConfig(), "cds": dyn.GetCdsConfig()} {
		if cs.GetAds() == nil || cs.GetResourceApiVersion() != corev3.ApiVersion_V3 {
			t.Errorf("%s_config %v, want ADS v3", name, cs)
		}
	}
	ads := dyn.GetAdsConfig()
	if ads.GetApiType() != corev3.ApiConfigSource_DELTA_GRPC || ads.GetTransportApiVersion() != corev3.ApiVersion_V3 {
		t.Errorf("ads_config %v, want DELTA_GRPC v3", ads)
	}
	gs := ads.GetGrpcServices()
	if len(gs) != 1 || gs[0].GetEnvoyGrpc().GetClusterName() != "local_agent" {
		t.Fatalf("ADS gRPC services %v, want local_agent", gs)
	}
	md := gs[0].GetInitialMetadata()
	switch {
	case w.token == "" && len(md) != 0:
		t.Errorf("initial metadata %v without a token", md)
	case w.token != "" && (len(md) != 1 || md[0].GetKey() != "x-consul-token" || md[0].GetValue() != w.token):
		t.Errorf("initial metadata %v, want x-consul-token=%s", md, w.token)
	}

	fixed := map[string]string{}
	for _, tag := range b.GetStatsConfig().GetStatsTags() {
		if tag.GetFixedValue() != "" {
			fixed[tag.GetTagName()] = tag.GetFixedValue()
		}
	}
	wantFixed := map[string]string{"local_cluster": w.cluster, "consul.source.service": w.cluster,
		"consul.source.namespace": "default", "consul.source.partition": "default"}
	if w.dc != "" {
		wantFixed["consul.source.datacenter"] = w.dc
	}
	if len(fixed) != len(wantFixed) {
		t.Errorf("fixed stats tags %v, want %v", fixed, wantFixed)
	}
	for k, v := range wantFixed {
		if fixed[k] != v {
			t.Errorf("stats tag %s=%q, want %q", k, fixed[k], v)
		}
	}
	if !b.GetStatsConfig().GetUseAllDefaultTags().GetValue() {
		t.Error("use_all_default_tags is off")
	}
}

func addrString(a *corev3.Address) string {
	if p := a.GetPipe(); p != nil {
		return "unix:" + p.GetPath()
	}
	sa := a.GetSocketAddress()
	return net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
}

func TestGenerateRejectsBadConfig(t *testing.T) {
	ok := Config{ProxyID: "p", ProxyCluster: "s"}
	with := func(f func(*Config)) Config { c := ok; f(&c); return c }
	for _, tc := range []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"no proxy ID", with(func(c *Config) { c.ProxyID = "" }), "proxy ID is required"},
		{"no cluster", with(func(c *Config) { c.ProxyCluster = "" }), "proxy cluster"},
		{"admin hostname", with(func(c *Config) { c.AdminBind = "localhost:19000" }), `"localhost" is not an IP address`},
		{"admin no port", with(func(c *Config) { c.AdminBind = "127.0.0.1" }), "admin bind address"},
		{"admin port zero", with(func(c *Config) { c.AdminBind = "127.0.0.1:0" }), "invalid port"},
		{"agent port too big", with(func(c *Config) { c.AgentAddress = "127.0.0.1:70000" }), "invalid port"},
		{"agent hostname", with(func(c *Config) { c.AgentAddress = "agent.internal:8502" }), "not an IP address"},
		{"address and socket", with(func(c *Config) { c.AgentAddress = "127.0.0.1:8502"; c.AgentSocket = "/s" }), "exclusive"},
		{"CA without TLS", with(func(c *Config) { c.AgentCAPEM = testCA }), "TLS to the agent is off"},
		{"CA file without TLS", with(func(c *Config) { c.AgentCAFile = "/ca.pem" }), "TLS to the agent is off"},
		{"CA file and inline CA", with(func(c *Config) { c.AgentTLS = true; c.AgentCAFile = "/ca.pem"; c.AgentCAPEM = testCA }), "exclusive"},
		{"relative CA file", with(func(c *Config) { c.AgentTLS = true; c.AgentCAFile = "ca.pem" }), `"ca.pem" is not an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Generate(tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Generate = %q, %v; want ErrInvalidConfig containing %q", out, err, tc.msg)
			}
		})
	}
}

// TestValidateDescendsIntoAny shows why Validate exists: ValidateAll alone
// accepts a bootstrap whose packed configs Envoy would reject.
func TestValidateDescendsIntoAny(t *testing.T) {
	for _, tc := range []struct {
		name        string
		mutate      func(t *testing.T, b *bootstrapv3.Bootstrap)
		validateAll bool // whether plain ValidateAll still passes
		msg         string
	}{
		{"empty access log path inside Any", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			b.Admin.AccessLog[0].ConfigType = &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{})}
		}, true, "FileAccessLog"},
		{"Any of an unknown type", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			b.StaticResources.Clusters[0].TypedExtensionProtocolOptions["x"] = &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type"}
		}, true, "no.such.Type"},
		{"garbage inside Any", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			a := mustAny(t, &httpv3.HttpProtocolOptions{})
			a.Value = []byte{0xff, 0xff, 0xff}
			b.StaticResources.Clusters[0].TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] = a
		}, true, "unpacking"},
		{"ADS cluster not defined", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			b.StaticResources.Clusters[0].Name = "other"
			b.StaticResources.Clusters[0].LoadAssignment.ClusterName = "other"
		}, true, `names cluster "local_agent"`},
		{"top-level rule", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			b.StaticResources.Clusters[0].Name = ""
		}, false, "Name"},
		{"nested Any in a list", func(t *testing.T, b *bootstrapv3.Bootstrap) {
			b.Admin.AccessLog = append(b.Admin.AccessLog, &accesslogv3.AccessLog{Name: "second",
				ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustAny(t, &filev3.FileAccessLog{})}})
		}, true, "access_log[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Build(Config{ProxyID: "p", ProxyCluster: "s"})
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(t, b)
			if err := b.ValidateAll(); (err == nil) != tc.validateAll {
				t.Fatalf("ValidateAll = %v, expected to pass: %v", err, tc.validateAll)
			}
			err = Validate(b)
			if !errors.Is(err, ErrInvalidBootstrap) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Validate = %v, want ErrInvalidBootstrap containing %q", err, tc.msg)
			}
		})
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestParseRejects(t *testing.T) {
	good, err := Generate(Config{ProxyID: "p", ProxyCluster: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, json, msg string
	}{
		{"not JSON", "{", "invalid envoy bootstrap"},
		{"unknown field", strings.Replace(string(good), `"node": {`, `"nodes": {`, 1), "nodes"},
		{"bad enum", strings.Replace(string(good), `"DELTA_GRPC"`, `"DELTA_GRPC2"`, 1), "DELTA_GRPC2"},
		{"port out of range", strings.Replace(string(good), `"port_value": 19000`, `"port_value": 70000`, 1), "PortValue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.json)); !errors.Is(err, ErrInvalidBootstrap) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Parse = %v, want ErrInvalidBootstrap containing %q", err, tc.msg)
			}
		})
	}
}

func TestReadyListener(t *testing.T) {
	cfg := Config{ProxyID: "ingress", ProxyCluster: "ingress", AdminBind: "127.0.0.1:19100", ReadyBindAddr: "10.1.2.3:8443"}
	out, err := Generate(cfg)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	b, err := Parse(out)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	ls := b.GetStaticResources().GetListeners()
	if len(ls) != 1 || ls[0].GetName() != "envoy_ready_listener" || addrString(ls[0].GetAddress()) != "10.1.2.3:8443" {
		t.Fatalf("static listeners %v, want envoy_ready_listener on 10.1.2.3:8443", ls)
	}
	var hcm hcmv3.HttpConnectionManager
	if err := ls[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatalf("ready listener filter: %v", err)
	}
	routes := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	if len(routes) != 2 || routes[0].GetMatch().GetPath() != "/ready" || routes[0].GetRoute().GetCluster() != "self_admin" ||
		routes[1].GetDirectResponse().GetStatus() != 404 {
		t.Errorf("ready routes %v, want /ready to self_admin and a 404 for the rest", routes)
	}
	var admin *corev3.Address
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() == "self_admin" {
			admin = c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress()
		}
	}
	if addrString(admin) != "127.0.0.1:19100" {
		t.Errorf("self_admin points at %s, want the admin address 127.0.0.1:19100", addrString(admin))
	}

	// The example from the xDS issue: a connection manager without a
	// stat_prefix passes ValidateAll (it sits in an Any) but not Validate.
	hcm.StatPrefix = ""
	ls[0].FilterChains[0].Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, &hcm)}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("ValidateAll: %v", err)
	}
	if err := Validate(b); !errors.Is(err, ErrInvalidBootstrap) || !strings.Contains(err.Error(), "StatPrefix") {
		t.Fatalf("Validate = %v, want the missing stat_prefix", err)
	}

	cfg.ReadyBindAddr = "ingress.local:8443"
	if _, err := Generate(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Generate with a hostname ready address = %v, want ErrInvalidConfig", err)
	}
}
