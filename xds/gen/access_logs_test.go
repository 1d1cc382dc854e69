package gen

import (
	"strings"
	"testing"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// consulDefaultJSONFormat is Consul's default access log format, as its
// agent/xds/accesslogs writes it: the generated Struct must equal it.
const consulDefaultJSONFormat = `{
	"start_time": "%START_TIME%",
	"route_name": "%ROUTE_NAME%",
	"method": "%REQ(:METHOD)%",
	"path": "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
	"protocol": "%PROTOCOL%",
	"response_code": "%RESPONSE_CODE%",
	"response_flags": "%RESPONSE_FLAGS%",
	"response_code_details": "%RESPONSE_CODE_DETAILS%",
	"connection_termination_details": "%CONNECTION_TERMINATION_DETAILS%",
	"bytes_received": "%BYTES_RECEIVED%",
	"bytes_sent": "%BYTES_SENT%",
	"duration": "%DURATION%",
	"upstream_service_time": "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
	"x_forwarded_for": "%REQ(X-FORWARDED-FOR)%",
	"user_agent": "%REQ(USER-AGENT)%",
	"request_id": "%REQ(X-REQUEST-ID)%",
	"authority": "%REQ(:AUTHORITY)%",
	"upstream_host": "%UPSTREAM_HOST%",
	"upstream_cluster": "%UPSTREAM_CLUSTER%",
	"upstream_local_address": "%UPSTREAM_LOCAL_ADDRESS%",
	"downstream_local_address": "%DOWNSTREAM_LOCAL_ADDRESS%",
	"downstream_remote_address": "%DOWNSTREAM_REMOTE_ADDRESS%",
	"requested_server_name": "%REQUESTED_SERVER_NAME%",
	"upstream_transport_failure_reason": "%UPSTREAM_TRANSPORT_FAILURE_REASON%"
}`

// accessLogWant is how many access logs every listener and every
// connection manager or tcp_proxy must have, and what each must be.
type accessLogWant struct {
	listener, filter int
	check            func(t *testing.T, where string, l *accesslogv3.AccessLog)
}

// requireAccessLogs checks every listener of res, every filter chain
// (the default one too) and every HCM and tcp_proxy in it.
func requireAccessLogs(t *testing.T, res Resources, want accessLogWant) {
	t.Helper()
	check := func(where string, logs []*accesslogv3.AccessLog, n int, listener bool) {
		t.Helper()
		if len(logs) != n {
			t.Errorf("%s: %d access logs, want %d", where, len(logs), n)
			return
		}
		for _, l := range logs {
			wantName, hasFilter := filterAccessLogName, false
			if listener {
				wantName, hasFilter = listenerAccessLogName, true
			}
			if l.GetName() != wantName {
				t.Errorf("%s: access log named %q, want %q", where, l.GetName(), wantName)
			}
			if got := l.GetFilter().GetResponseFlagFilter().GetFlags(); hasFilter != (len(got) == 1 && got[0] == "NR") || (!hasFilter && l.GetFilter() != nil) {
				t.Errorf("%s: access log filter %v", where, l.GetFilter())
			}
			if want.check != nil {
				want.check(t, where, l)
			}
		}
	}
	filters := 0
	for name, m := range res[ListenerType] {
		l := m.(*listenerv3.Listener)
		check("listener "+name, l.GetAccessLog(), want.listener, true)
		chains := l.GetFilterChains()
		if l.GetDefaultFilterChain() != nil {
			chains = append(append([]*listenerv3.FilterChain{}, chains...), l.GetDefaultFilterChain())
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				where := "listener " + name + " chain " + fc.GetName() + " filter " + f.GetName()
				inner, err := f.GetTypedConfig().UnmarshalNew()
				if err != nil {
					t.Fatalf("%s: %v", where, err)
				}
				switch c := inner.(type) {
				case *hcmv3.HttpConnectionManager:
					filters++
					check(where, c.GetAccessLog(), want.filter, false)
				case *tcpproxyv3.TcpProxy:
					filters++
					check(where, c.GetAccessLog(), want.filter, false)
				}
			}
		}
	}
	if filters == 0 {
		t.Error("no connection manager or tcp_proxy checked")
	}
}

// logFormatOf unpacks an access log's sink: its type name, format and
// file path.
func logFormatOf(t *testing.T, where string, l *accesslogv3.AccessLog) (string, *corev3.SubstitutionFormatString, string) {
	t.Helper()
	inner, err := l.GetTypedConfig().UnmarshalNew()
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	switch c := inner.(type) {
	case *streamv3.StdoutAccessLog:
		return "stdout", c.GetLogFormat(), ""
	case *streamv3.StderrAccessLog:
		return "stderr", c.GetLogFormat(), ""
	case *filev3.FileAccessLog:
		return "file", c.GetLogFormat(), c.GetPath()
	}
	t.Fatalf("%s: access log of type %T", where, inner)
	return "", nil, ""
}

// expectLog returns a check that the sink, path and format are as given:
// json (a JSON object) or text.
func expectLog(sink, path, json, text string) func(t *testing.T, where string, l *accesslogv3.AccessLog) {
	return func(t *testing.T, where string, l *accesslogv3.AccessLog) {
		t.Helper()
		gotSink, format, gotPath := logFormatOf(t, where, l)
		if gotSink != sink || gotPath != path {
			t.Errorf("%s: sink %s %q, want %s %q", where, gotSink, gotPath, sink, path)
		}
		if json != "" {
			var want structpb.Struct
			if err := want.UnmarshalJSON([]byte(json)); err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(format.GetJsonFormat(), &want) {
				t.Errorf("%s: JSON format %v, want %v", where, format.GetJsonFormat(), &want)
			}
		}
		if text != "" {
			if got := format.GetTextFormatSource().GetInlineString(); got != text {
				t.Errorf("%s: text format %q, want %q", where, got, text)
			}
		}
	}
}

var checkStdoutDefaultJSON = func(t *testing.T, where string, l *accesslogv3.AccessLog) {
	t.Helper()
	expectLog("stdout", "", consulDefaultJSONFormat, "")(t, where, l)
}

// TestAccessLogs generates sidecars under each AccessLogs setting and
// checks every listener and filter of the result.
func TestAccessLogs(t *testing.T) {
	tcpAndHTTP := accessLogsSidecar
	transparent := func() *structs.NodeService {
		s := accessLogsSidecar()
		s.Proxy.Mode = structs.ProxyModeTransparent
		return s
	}
	httpPublic := func() *structs.NodeService {
		s := accessLogsSidecar()
		s.Proxy.Config = map[string]any{"protocol": "http"}
		s.Proxy.Expose.Paths = []structs.ExposePath{{Path: "/health", ListenerPort: 21500, LocalPathPort: 8080, Protocol: "http"}}
		return s
	}
	cases := []struct {
		name string
		edit func(*structs.AccessLogsConfig)
		svc  func() *structs.NodeService
		want accessLogWant
	}{
		{name: "disabled", edit: func(c *structs.AccessLogsConfig) { *c = structs.AccessLogsConfig{} }, svc: tcpAndHTTP},
		{name: "settings without Enabled", edit: func(c *structs.AccessLogsConfig) {
			*c = structs.AccessLogsConfig{Type: structs.FileLogSinkType, Path: "/var/log/envoy.log"}
		}, svc: tcpAndHTTP},
		{name: "stdout default JSON", svc: tcpAndHTTP, want: accessLogWant{listener: 1, filter: 1, check: checkStdoutDefaultJSON}},
		{name: "explicit stdout", edit: func(c *structs.AccessLogsConfig) { c.Type = structs.StdOutLogSinkType }, svc: tcpAndHTTP,
			want: accessLogWant{listener: 1, filter: 1, check: checkStdoutDefaultJSON}},
		{name: "stderr", edit: func(c *structs.AccessLogsConfig) { c.Type = structs.StdErrLogSinkType }, svc: tcpAndHTTP,
			want: accessLogWant{listener: 1, filter: 1, check: expectLog("stderr", "", consulDefaultJSONFormat, "")}},
		{name: "file with path", edit: func(c *structs.AccessLogsConfig) { c.Type, c.Path = structs.FileLogSinkType, "/var/log/envoy.log" }, svc: tcpAndHTTP,
			want: accessLogWant{listener: 1, filter: 1, check: expectLog("file", "/var/log/envoy.log", consulDefaultJSONFormat, "")}},
		{name: "text format gets a newline", edit: func(c *structs.AccessLogsConfig) { c.TextFormat = "[%START_TIME%] %RESPONSE_CODE%" }, svc: tcpAndHTTP,
			want: accessLogWant{listener: 1, filter: 1, check: expectLog("stdout", "", "", "[%START_TIME%] %RESPONSE_CODE%\n")}},
		{name: "text format with its newline", edit: func(c *structs.AccessLogsConfig) { c.TextFormat = "%DURATION%\n" }, svc: tcpAndHTTP,
			want: accessLogWant{listener: 1, filter: 1, check: expectLog("stdout", "", "", "%DURATION%\n")}},
		{name: "custom JSON format", edit: func(c *structs.AccessLogsConfig) {
			c.Type, c.JSONFormat = structs.StdErrLogSinkType, `{"code": "%RESPONSE_CODE%", "nested": {"d": "%DURATION%"}}`
		}, svc: tcpAndHTTP,
			want: accessLogWant{listener: 1, filter: 1, check: expectLog("stderr", "", `{"code": "%RESPONSE_CODE%", "nested": {"d": "%DURATION%"}}`, "")}},
		// Valid JSON at write time, but not an object: Consul leaves the
		// logs out rather than fail the proxy.
		{name: "JSON format not an object", edit: func(c *structs.AccessLogsConfig) { c.JSONFormat = `["%DURATION%"]` }, svc: tcpAndHTTP},
		{name: "listener logs disabled", edit: func(c *structs.AccessLogsConfig) { c.DisableListenerLogs = true }, svc: tcpAndHTTP,
			want: accessLogWant{listener: 0, filter: 1, check: checkStdoutDefaultJSON}},
		{name: "transparent outbound listener and passthrough", svc: transparent,
			want: accessLogWant{listener: 1, filter: 1, check: checkStdoutDefaultJSON}},
		{name: "HTTP public listener and exposed path", svc: httpPublic,
			want: accessLogWant{listener: 1, filter: 1, check: checkStdoutDefaultJSON}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := tc.svc()
			res, err := Generate(snapshot(t, accessLogsWorld(tc.edit)(), svc, 2))
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(res); err != nil {
				t.Fatal(err)
			}
			requireAccessLogs(t, res, tc.want)
			if svc.Proxy.Mode == structs.ProxyModeTransparent {
				requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "db:127.0.0.1:9191", "api:127.0.0.1:9292", "outbound_listener:127.0.0.1:15001")
			}
			if len(svc.Proxy.Expose.Paths) > 0 {
				if nameWithSuffix(t, res, ListenerType, ":21500") == "" {
					t.Fatal("no exposed path listener")
				}
			}
		})
	}
}

// TestAccessLogsGateways: as in Consul, every gateway kind gets
// proxy-defaults' access logs (through its own resolved service config)
// on its listeners and on each of their connection managers and
// tcp_proxies, HTTP and TCP alike; disabled, it gets none.
func TestAccessLogsGateways(t *testing.T) {
	withLogs := func(mk func() *world, logs structs.AccessLogsConfig) *world {
		w := mk()
		w.entries = append(w.entries, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal, AccessLogs: logs})
		return w
	}
	gateways := []struct {
		name  string
		world func() *world
		svc   *structs.NodeService
		want  int
		// filters are the connection managers and tcp_proxies the
		// gateway must have, to know each kind of filter is checked.
		filters []string
	}{
		{name: "ingress", world: ingressWorld, svc: gateway(structs.ServiceKindIngressGateway, "ingress", 0), want: 4,
			filters: []string{wellknown.HTTPConnectionManager, wellknown.TCPProxy}},
		{name: "terminating", world: terminatingWorld, svc: gateway(structs.ServiceKindTerminatingGateway, "terminating", 8443), want: 2,
			filters: []string{wellknown.HTTPConnectionManager, wellknown.TCPProxy}},
		{name: "mesh", world: meshGatewayWorld, svc: gateway(structs.ServiceKindMeshGateway, "mesh-gateway", 8443), want: 6,
			filters: []string{wellknown.TCPProxy}},
	}
	settings := []struct {
		name string
		logs structs.AccessLogsConfig
		want accessLogWant
	}{
		{name: "disabled"},
		{name: "settings without Enabled", logs: structs.AccessLogsConfig{Type: structs.StdErrLogSinkType}},
		{name: "stdout default JSON", logs: structs.AccessLogsConfig{Enabled: true},
			want: accessLogWant{listener: 1, filter: 1, check: checkStdoutDefaultJSON}},
		{name: "file", logs: structs.AccessLogsConfig{Enabled: true, Type: structs.FileLogSinkType, Path: "/var/log/gw.log", TextFormat: "%DURATION%"},
			want: accessLogWant{listener: 1, filter: 1, check: expectLog("file", "/var/log/gw.log", "", "%DURATION%\n")}},
		{name: "listener logs disabled", logs: structs.AccessLogsConfig{Enabled: true, DisableListenerLogs: true},
			want: accessLogWant{listener: 0, filter: 1, check: checkStdoutDefaultJSON}},
	}
	for _, gw := range gateways {
		for _, st := range settings {
			t.Run(gw.name+"/"+st.name, func(t *testing.T) {
				res, err := Generate(snapshot(t, withLogs(gw.world, st.logs), gw.svc, gw.want))
				if err != nil {
					t.Fatal(err)
				}
				if err := Validate(res); err != nil {
					t.Fatal(err)
				}
				requireAccessLogs(t, res, st.want)
				have := map[string]bool{}
				for _, m := range res[ListenerType] {
					for _, fc := range m.(*listenerv3.Listener).GetFilterChains() {
						for _, f := range fc.GetFilters() {
							have[f.GetName()] = true
						}
					}
				}
				for _, f := range gw.filters {
					if !have[f] {
						t.Errorf("no %s filter checked", f)
					}
				}
			})
		}
	}
}

// TestAccessLogsGatewayWithoutConfig: a gateway snapshot delivered before
// its resolved service config is known generates without access logs.
func TestAccessLogsGatewayWithoutConfig(t *testing.T) {
	w := terminatingWorld()
	w.entries = append(w.entries, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal,
		AccessLogs: structs.AccessLogsConfig{Enabled: true}})
	snap := snapshot(t, w, gateway(structs.ServiceKindTerminatingGateway, "terminating", 8443), 2)
	res, err := Generate(snap)
	if err != nil {
		t.Fatal(err)
	}
	requireAccessLogs(t, res, accessLogWant{listener: 1, filter: 1, check: checkStdoutDefaultJSON})
	ns := *snap
	tg := *snap.TerminatingGateway
	tg.ServiceConfig = nil
	ns.TerminatingGateway = &tg
	if res, err = Generate(&ns); err != nil {
		t.Fatal(err)
	}
	requireAccessLogs(t, res, accessLogWant{})
}

// TestAccessLogsGeneratorReuse: a change of proxy-defaults' AccessLogs
// rebuilds the public and every upstream part; a new resolved service
// config with the same AccessLogs rebuilds only the public part (keyed on
// the whole config), and an unchanged snapshot reuses everything.
func TestAccessLogsGeneratorReuse(t *testing.T) {
	base := snapshot(t, accessLogsWorld(func(c *structs.AccessLogsConfig) { c.Enabled = false })(), accessLogsSidecar(), 2)
	withLogs := func(s *proxycfg.ConfigSnapshot, logs structs.AccessLogsConfig) *proxycfg.ConfigSnapshot {
		ns := *s
		cp := *s.ConnectProxy
		sc := *cp.ServiceConfig
		sc.AccessLogs = logs
		cp.ServiceConfig = &sc
		ns.ConnectProxy = &cp
		return &ns
	}
	enabled := withLogs(base, structs.AccessLogsConfig{Enabled: true})
	sameAgain := withLogs(enabled, structs.AccessLogsConfig{Enabled: true})
	stderr := withLogs(sameAgain, structs.AccessLogsConfig{Enabled: true, Type: structs.StdErrLogSinkType})

	const (
		public = "public_listener:10.0.0.1:21000"
		db     = "db:127.0.0.1:9191"
		api    = "api:127.0.0.1:9292"
	)
	steps := []struct {
		name          string
		snap          *proxycfg.ConfigSnapshot
		same, rebuilt []string // listeners
		logs          int      // access logs per listener
	}{
		{name: "first", snap: base},
		{name: "unchanged", snap: base, same: []string{public, db, api}},
		{name: "enabled", snap: enabled, rebuilt: []string{public, db, api}, logs: 1},
		{name: "unchanged enabled", snap: enabled, same: []string{public, db, api}, logs: 1},
		{name: "new config, same access logs", snap: sameAgain, same: []string{db, api}, rebuilt: []string{public}, logs: 1},
		{name: "stderr", snap: stderr, rebuilt: []string{public, db, api}, logs: 1},
		{name: "disabled again", snap: base, rebuilt: []string{public, db, api}},
	}
	var g Generator
	var prev Resources
	for _, st := range steps {
		got := generateChecked(t, &g, st.name, st.snap)
		for _, name := range st.same {
			if got[ListenerType][name] != prev[ListenerType][name] {
				t.Errorf("%s: listener %s was rebuilt", st.name, name)
			}
		}
		for _, name := range st.rebuilt {
			if got[ListenerType][name] == prev[ListenerType][name] {
				t.Errorf("%s: listener %s was reused", st.name, name)
			}
		}
		for _, name := range []string{public, db, api} {
			if n := len(got[ListenerType][name].(*listenerv3.Listener).GetAccessLog()); n != st.logs {
				t.Errorf("%s: listener %s has %d access logs, want %d", st.name, name, n, st.logs)
			}
		}
		if st.name == "stderr" {
			sink, _, _ := logFormatOf(t, db, got[ListenerType][db].(*listenerv3.Listener).GetAccessLog()[0])
			if !strings.EqualFold(sink, "stderr") {
				t.Errorf("%s: db listener logs to %s", st.name, sink)
			}
		}
		prev = got
	}
}
