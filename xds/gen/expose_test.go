package gen

import (
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// exposed is what one exposed path's listener must be.
type exposed struct {
	listener string // name: exposed_path_<path>:<addr>:<port>
	addr     string
	port     uint32
	path     string
	cluster  string
	http2    bool
	stat     string // stat prefix, route configuration and virtual host name
}

// checkExposed asserts an exposed listener: plain text (no transport
// socket, no RBAC), one HTTP connection manager whose inline route sends
// the exact path, and only it, to the path's cluster.
func checkExposed(t *testing.T, res Resources, want exposed) {
	t.Helper()
	l, ok := res[ListenerType][want.listener].(*listenerv3.Listener)
	if !ok {
		t.Fatalf("no listener %q in %v", want.listener, sortedKeys(res[ListenerType]))
	}
	if sa := l.GetAddress().GetSocketAddress(); sa.GetAddress() != want.addr || sa.GetPortValue() != want.port {
		t.Errorf("%s binds %s:%d, want %s:%d", want.listener, sa.GetAddress(), sa.GetPortValue(), want.addr, want.port)
	}
	if l.GetTrafficDirection() != corev3.TrafficDirection_INBOUND {
		t.Errorf("%s: direction %v", want.listener, l.GetTrafficDirection())
	}
	if n := len(l.GetFilterChains()); n != 1 || l.GetDefaultFilterChain() != nil {
		t.Fatalf("%s: %d filter chains (default %v), want 1", want.listener, n, l.GetDefaultFilterChain() != nil)
	}
	fc := l.GetFilterChains()[0]
	if fc.GetTransportSocket() != nil || fc.GetFilterChainMatch() != nil {
		t.Errorf("%s: not plain text for everyone: %v %v", want.listener, fc.GetTransportSocket(), fc.GetFilterChainMatch())
	}
	if len(fc.GetFilters()) != 1 {
		t.Fatalf("%s: filters %v, want the connection manager alone", want.listener, fc.GetFilters())
	}
	hcm := hcmOf(t, fc)
	if hcm == nil {
		t.Fatalf("%s: no HTTP connection manager", want.listener)
	}
	if hcm.GetStatPrefix() != want.stat {
		t.Errorf("%s: stat prefix %q, want %q", want.listener, hcm.GetStatPrefix(), want.stat)
	}
	if got := hcm.GetHttp2ProtocolOptions() != nil; got != want.http2 {
		t.Errorf("%s: HTTP/2 %v, want %v", want.listener, got, want.http2)
	}
	if len(hcm.GetHttpFilters()) != 1 {
		t.Errorf("%s: HTTP filters %v, want the router alone", want.listener, hcm.GetHttpFilters())
	}
	rc := hcm.GetRouteConfig()
	if rc.GetName() != want.stat || len(rc.GetVirtualHosts()) != 1 {
		t.Fatalf("%s: route configuration %v", want.listener, rc)
	}
	vh := rc.GetVirtualHosts()[0]
	if vh.GetName() != want.stat || len(vh.GetRoutes()) != 1 {
		t.Fatalf("%s: virtual host %v", want.listener, vh)
	}
	r := vh.GetRoutes()[0]
	if r.GetMatch().GetPath() != want.path {
		t.Errorf("%s: route matches %v, want exactly %q", want.listener, r.GetMatch(), want.path)
	}
	if got := r.GetRoute().GetCluster(); got != want.cluster {
		t.Errorf("%s: route to %q, want %q", want.listener, got, want.cluster)
	}
}

// checkExposedCluster asserts an exposed_cluster_*: static, on addr:port,
// speaking HTTP/2 to the application when http2.
func checkExposedCluster(t *testing.T, res Resources, name, addr string, port uint32, http2 bool, timeout time.Duration) {
	t.Helper()
	c, ok := res[ClusterType][name].(*clusterv3.Cluster)
	if !ok {
		t.Fatalf("no cluster %q in %v", name, sortedKeys(res[ClusterType]))
	}
	if c.GetType() != clusterv3.Cluster_STATIC || c.GetTransportSocket() != nil {
		t.Errorf("%s: type %v, transport socket %v", name, c.GetType(), c.GetTransportSocket())
	}
	eps := c.GetLoadAssignment().GetEndpoints()
	if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
		t.Fatalf("%s: endpoints %v", name, eps)
	}
	sa := eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != addr || sa.GetPortValue() != port {
		t.Errorf("%s: endpoint %s:%d, want %s:%d", name, sa.GetAddress(), sa.GetPortValue(), addr, port)
	}
	if _, got := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]; got != http2 {
		t.Errorf("%s: HTTP/2 %v, want %v", name, got, http2)
	}
	if got := c.GetConnectTimeout().AsDuration(); got != timeout {
		t.Errorf("%s: connect timeout %v, want %v", name, got, timeout)
	}
}

func proxyDefaults(config map[string]any, expose structs.ExposeConfig) *structs.ProxyConfigEntry {
	return &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal, Config: config, Expose: expose}
}

func serviceDefaults(name, protocol string, expose structs.ExposeConfig) *structs.ServiceConfigEntry {
	return &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: name, Protocol: protocol, Expose: expose}
}

func paths(ps ...structs.ExposePath) structs.ExposeConfig { return structs.ExposeConfig{Paths: ps} }

// Paths used by the cases: health on the application's own port (8080),
// a gRPC health check on another one.
var (
	healthPath = structs.ExposePath{Path: "/health", ListenerPort: 21500, LocalPathPort: 8080, Protocol: "http"}
	grpcPath   = structs.ExposePath{Path: "/grpc.health.v1.Health/Check", ListenerPort: 21501, LocalPathPort: 9090, Protocol: "http2"}
	readyPath  = structs.ExposePath{Path: "/ready", ListenerPort: 21502, LocalPathPort: 9091}
)

const (
	publicL     = "public_listener:10.0.0.1:21000"
	healthL     = "exposed_path_health:10.0.0.1:21500"
	healthStat  = "exposed_path_filter_health_21500"
	grpcL       = "exposed_path_grpchealthv1HealthCheck:10.0.0.1:21501"
	grpcStat    = "exposed_path_filter_grpchealthv1HealthCheck_21501"
	grpcCluster = "exposed_cluster_9090"
	readyL      = "exposed_path_ready:10.0.0.1:21502"
	readyStat   = "exposed_path_filter_ready_21502"
)

var (
	wantHealth = exposed{listener: healthL, addr: "10.0.0.1", port: 21500, path: "/health", cluster: localAppCluster, stat: healthStat}
	wantGRPC   = exposed{listener: grpcL, addr: "10.0.0.1", port: 21501, path: "/grpc.health.v1.Health/Check", cluster: grpcCluster, http2: true, stat: grpcStat}
	wantReady  = exposed{listener: readyL, addr: "10.0.0.1", port: 21502, path: "/ready", cluster: "exposed_cluster_9091", stat: readyStat}
)

// TestExposePaths generates sidecars whose paths come from the
// registration or the central configuration, through the real state
// machines, and checks the exposed listeners and clusters (Consul's
// agent/xds, see expose.go) and that nothing else is exposed.
func TestExposePaths(t *testing.T) {
	type cluster struct {
		name, addr string
		port       uint32
		http2      bool
		timeout    time.Duration
	}
	tests := []struct {
		name    string
		entries []structs.ConfigEntry
		own     []structs.ExposePath // the registration's paths
		edit    func(svc *structs.NodeService)
		// listeners and clusters are the exact sets of names; exposed
		// and exposedClusters are checked in detail.
		listeners, clusters []string
		exposed             []exposed
		exposedClusters     []cluster
	}{
		{
			name:      "nothing exposed",
			listeners: []string{publicL}, clusters: []string{localAppCluster},
		},
		{
			name: "registration, http on the local service port: local_app",
			own:  []structs.ExposePath{healthPath},
			// No protocol: http.
			edit:      func(svc *structs.NodeService) { svc.Proxy.Expose.Paths[0].Protocol = "" },
			listeners: []string{publicL, healthL}, clusters: []string{localAppCluster},
			exposed: []exposed{wantHealth},
		},
		{
			name:      "registration, http2 on another port: its own cluster",
			own:       []structs.ExposePath{grpcPath},
			listeners: []string{publicL, grpcL}, clusters: []string{localAppCluster, grpcCluster},
			exposed:         []exposed{wantGRPC},
			exposedClusters: []cluster{{grpcCluster, "127.0.0.1", 9090, true, 5 * time.Second}},
		},
		{
			name:      "service-defaults",
			entries:   []structs.ConfigEntry{serviceDefaults("web", "", paths(grpcPath))},
			listeners: []string{publicL, grpcL}, clusters: []string{localAppCluster, grpcCluster},
			exposed:         []exposed{wantGRPC},
			exposedClusters: []cluster{{grpcCluster, "127.0.0.1", 9090, true, 5 * time.Second}},
		},
		{
			name:      "proxy-defaults",
			entries:   []structs.ConfigEntry{proxyDefaults(nil, paths(healthPath, readyPath))},
			listeners: []string{publicL, healthL, readyL}, clusters: []string{localAppCluster, "exposed_cluster_9091"},
			exposed:         []exposed{wantHealth, wantReady},
			exposedClusters: []cluster{{"exposed_cluster_9091", "127.0.0.1", 9091, false, 5 * time.Second}},
		},
		{
			name: "service-defaults' paths replace proxy-defaults'",
			entries: []structs.ConfigEntry{
				proxyDefaults(nil, paths(healthPath)),
				serviceDefaults("web", "", paths(readyPath)),
			},
			listeners: []string{publicL, readyL}, clusters: []string{localAppCluster, "exposed_cluster_9091"},
			exposed: []exposed{wantReady},
		},
		{
			name: "the registration's paths replace the central ones",
			entries: []structs.ConfigEntry{
				proxyDefaults(nil, paths(healthPath)),
				serviceDefaults("web", "", paths(readyPath)),
			},
			own:       []structs.ExposePath{grpcPath},
			listeners: []string{publicL, grpcL}, clusters: []string{localAppCluster, grpcCluster},
			exposed: []exposed{wantGRPC},
		},
		{
			name: "the registration's Checks alone keep the central paths",
			entries: []structs.ConfigEntry{
				serviceDefaults("web", "", paths(readyPath)),
			},
			edit:      func(svc *structs.NodeService) { svc.Proxy.Expose.Checks = true },
			listeners: []string{publicL, readyL}, clusters: []string{localAppCluster, "exposed_cluster_9091"},
			exposed: []exposed{wantReady},
		},
		{
			name:      "bind_address and local_connect_timeout_ms from proxy-defaults, local address from the registration",
			entries:   []structs.ConfigEntry{proxyDefaults(map[string]any{"bind_address": "0.0.0.0", "local_connect_timeout_ms": 1500}, structs.ExposeConfig{})},
			own:       []structs.ExposePath{grpcPath},
			edit:      func(svc *structs.NodeService) { svc.Proxy.LocalServiceAddress = "127.0.0.2" },
			listeners: []string{"public_listener:0.0.0.0:21000", "exposed_path_grpchealthv1HealthCheck:0.0.0.0:21501"},
			clusters:  []string{localAppCluster, grpcCluster},
			exposed: []exposed{{listener: "exposed_path_grpchealthv1HealthCheck:0.0.0.0:21501", addr: "0.0.0.0", port: 21501,
				path: "/grpc.health.v1.Health/Check", cluster: grpcCluster, http2: true, stat: grpcStat}},
			exposedClusters: []cluster{{grpcCluster, "127.0.0.2", 9090, true, 1500 * time.Millisecond}},
		},
		{
			name:      "no proxy address: 0.0.0.0",
			own:       []structs.ExposePath{healthPath},
			edit:      func(svc *structs.NodeService) { svc.Address = "" },
			listeners: []string{"public_listener:0.0.0.0:21000", "exposed_path_health:0.0.0.0:21500"},
			clusters:  []string{localAppCluster},
			exposed: []exposed{{listener: "exposed_path_health:0.0.0.0:21500", addr: "0.0.0.0", port: 21500,
				path: "/health", cluster: localAppCluster, stat: healthStat}},
		},
		{
			// Consul's "grpc service, http1 expose path": the path's
			// protocol decides, both ways.
			name:    "the path's protocol, not the service's",
			entries: []structs.ConfigEntry{serviceDefaults("web", "grpc", structs.ExposeConfig{})},
			own: []structs.ExposePath{
				{Path: "/metrics", ListenerPort: 21503, LocalPathPort: 9102},
				{Path: "/health", ListenerPort: 21500, LocalPathPort: 8080, Protocol: "HTTP2"},
			},
			listeners: []string{publicL, "exposed_path_metrics:10.0.0.1:21503", healthL},
			clusters:  []string{localAppCluster, "exposed_cluster_9102"},
			exposed: []exposed{
				{listener: "exposed_path_metrics:10.0.0.1:21503", addr: "10.0.0.1", port: 21503, path: "/metrics",
					cluster: "exposed_cluster_9102", stat: "exposed_path_filter_metrics_21503"},
				{listener: healthL, addr: "10.0.0.1", port: 21500, path: "/health", cluster: localAppCluster, http2: true, stat: healthStat},
			},
			exposedClusters: []cluster{{"exposed_cluster_9102", "127.0.0.1", 9102, false, 5 * time.Second}},
		},
		{
			name: "two paths to one local port share its cluster",
			own: []structs.ExposePath{
				{Path: "/live", ListenerPort: 21504, LocalPathPort: 9091},
				readyPath,
			},
			listeners: []string{publicL, "exposed_path_live:10.0.0.1:21504", readyL},
			clusters:  []string{localAppCluster, "exposed_cluster_9091"},
			exposed: []exposed{
				{listener: "exposed_path_live:10.0.0.1:21504", addr: "10.0.0.1", port: 21504, path: "/live",
					cluster: "exposed_cluster_9091", stat: "exposed_path_filter_live_21504"},
				wantReady,
			},
		},
		{
			name: "envoy_local_cluster_json named local_app: the path goes to it",
			own:  []structs.ExposePath{healthPath},
			edit: func(svc *structs.NodeService) {
				svc.Proxy.Config = map[string]any{cfgLocalClusterJSON: mustJSON(localAppSpec())}
			},
			listeners: []string{publicL, healthL}, clusters: []string{localAppCluster},
			exposed: []exposed{wantHealth},
		},
		{
			name:      "no local service port: the path gets a cluster of its own",
			own:       []structs.ExposePath{healthPath},
			edit:      func(svc *structs.NodeService) { svc.Proxy.LocalServicePort = 0 },
			listeners: []string{healthL},
			clusters:  []string{"exposed_cluster_8080"},
			exposed: []exposed{{listener: healthL, addr: "10.0.0.1", port: 21500, path: "/health",
				cluster: "exposed_cluster_8080", stat: healthStat}},
			exposedClusters: []cluster{{"exposed_cluster_8080", "127.0.0.1", 8080, false, 5 * time.Second}},
		},
		{
			// Consul refuses these at registration but not in config
			// entries: what cannot be served is left out, the rest stays.
			name: "what cannot be served is left out",
			entries: []structs.ConfigEntry{serviceDefaults("web", "", paths(
				structs.ExposePath{Path: "/a", ListenerPort: 0, LocalPathPort: 9001},
				structs.ExposePath{Path: "/b", ListenerPort: 70000, LocalPathPort: 9002},
				structs.ExposePath{Path: "/c", ListenerPort: 21510},
				structs.ExposePath{Path: "/d", ListenerPort: 21511, LocalPathPort: 65536},
				structs.ExposePath{Path: "", ListenerPort: 21512, LocalPathPort: 9003},
				structs.ExposePath{Path: "health", ListenerPort: 21513, LocalPathPort: 9004},
				structs.ExposePath{Path: "/e", ListenerPort: 21514, LocalPathPort: 9005, Protocol: "tcp"},
				structs.ExposePath{Path: "/f", ListenerPort: 21515, LocalPathPort: 9006, Protocol: "grpc"},
				// The public listener's address.
				structs.ExposePath{Path: "/g", ListenerPort: 21000, LocalPathPort: 9007},
				readyPath,
				// readyPath's listener port: the first path keeps it.
				structs.ExposePath{Path: "/h", ListenerPort: 21502, LocalPathPort: 9008},
			))},
			listeners: []string{publicL, readyL},
			clusters:  []string{localAppCluster, "exposed_cluster_9091"},
			exposed:   []exposed{wantReady},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.entries = tc.entries
			svc := sidecar("web")
			svc.Proxy.Expose.Paths = append([]structs.ExposePath(nil), tc.own...)
			if tc.edit != nil {
				tc.edit(svc)
			}
			res, err := Generate(snapshot(t, w, svc, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(res); err != nil {
				t.Fatal(err)
			}
			requireNames(t, res, ListenerType, tc.listeners...)
			requireNames(t, res, ClusterType, tc.clusters...)
			requireNames(t, res, RouteType)
			requireNames(t, res, EndpointType)
			for _, e := range tc.exposed {
				checkExposed(t, res, e)
			}
			for _, c := range tc.exposedClusters {
				checkExposedCluster(t, res, c.name, c.addr, c.port, c.http2, c.timeout)
			}
		})
	}
}

// TestExposePathsConflicts: an exposed listener never takes the public
// listener's address (the public one wins, whatever made it), and one on
// an upstream's address takes it (the public part comes first); either
// way only one listener binds the address and the set validates.
func TestExposePathsConflicts(t *testing.T) {
	w := newWorld()
	w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
	svc := sidecar("web", structs.Upstream{DestinationName: "db", LocalBindAddress: "10.0.0.1", LocalBindPort: 21600})
	svc.Proxy.Expose.Paths = []structs.ExposePath{
		{Path: "/public", ListenerPort: 21000, LocalPathPort: 8080},
		{Path: "/db", ListenerPort: 21600, LocalPathPort: 8080},
	}
	res, err := Generate(snapshot(t, w, svc, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(res); err != nil {
		t.Fatal(err)
	}
	requireNames(t, res, ListenerType, publicL, "exposed_path_db:10.0.0.1:21600")
}

// TestExposePathsGeneratorReuse: the exposed listeners belong to the
// public part, keyed on the registration and the resolved service config:
// a new value of either rebuilds the part, anything else (an upstream's
// endpoints) or nothing leaves its messages as they were.
func TestExposePathsGeneratorReuse(t *testing.T) {
	w := newWorld()
	w.entries = []structs.ConfigEntry{serviceDefaults("web", "", paths(readyPath))}
	w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
	base := snapshot(t, w, sidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191}), 1)

	// As proxycfg delivers changes: new values for what changed, the
	// others shared.
	withRegistration := func(s *proxycfg.ConfigSnapshot, ps ...structs.ExposePath) *proxycfg.ConfigSnapshot {
		ns := *s
		ns.Service = s.Service.Clone()
		ns.Service.Proxy.Expose.Paths = ps
		return &ns
	}
	withCentral := func(s *proxycfg.ConfigSnapshot, ps ...structs.ExposePath) *proxycfg.ConfigSnapshot {
		ns := *s
		cp := *s.ConnectProxy
		sc := *cp.ServiceConfig
		sc.Expose = paths(ps...)
		cp.ServiceConfig = &sc
		ns.ConnectProxy = &cp
		return &ns
	}
	registered := withRegistration(base, grpcPath)
	newEndpoints := withDBEndpoints(registered)
	unregistered := withRegistration(newEndpoints)
	central := withCentral(unregistered, healthPath)

	dbL := "db:127.0.0.1:9191"
	steps := []struct {
		name      string
		snap      *proxycfg.ConfigSnapshot
		listeners []string
		same      []string // listeners that must be the previous result's messages
	}{
		{name: "first", snap: base, listeners: []string{publicL, dbL, readyL}},
		{name: "unchanged", snap: base, listeners: []string{publicL, dbL, readyL}, same: []string{publicL, dbL, readyL}},
		{name: "registration's paths", snap: registered, listeners: []string{publicL, dbL, grpcL}, same: []string{dbL}},
		{name: "db endpoints", snap: newEndpoints, listeners: []string{publicL, dbL, grpcL}, same: []string{publicL, dbL, grpcL}},
		{name: "no registration paths", snap: unregistered, listeners: []string{publicL, dbL, readyL}, same: []string{dbL}},
		// Only the resolved service config changes.
		{name: "central paths", snap: central, listeners: []string{publicL, dbL, healthL}, same: []string{dbL}},
		{name: "back to the start", snap: base, listeners: []string{publicL, dbL, readyL}, same: []string{dbL}},
	}
	var g Generator
	var prev Resources
	for _, st := range steps {
		got := generateChecked(t, &g, st.name, st.snap)
		if st.name != "first" && got[ListenerType][publicL] == prev[ListenerType][publicL] && !slices.Contains(st.same, publicL) {
			t.Errorf("%s: the public part was not rebuilt", st.name)
		}
		t.Run(st.name, func(t *testing.T) { requireNames(t, got, ListenerType, st.listeners...) })
		for _, name := range st.same {
			if got[ListenerType][name] == nil || got[ListenerType][name] != prev[ListenerType][name] {
				t.Errorf("%s: listener %q was rebuilt", st.name, name)
			}
		}
		prev = got
	}
}

// TestStripPath: Consul's names keep a path's letters and digits only.
func TestStripPath(t *testing.T) {
	for in, want := range map[string]string{
		"/health":                      "health",
		"/grpc.health.v1.Health/Check": "grpchealthv1HealthCheck",
		"/a-b_c/ü/9":                   "abc9",
		"":                             "",
	} {
		if got := stripPath(in); got != want {
			t.Errorf("stripPath(%q) = %q, want %q", in, got, want)
		}
	}
}
