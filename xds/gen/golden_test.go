package gen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCase is a cluster (world), a proxy or gateway registered in it,
// and the number of upstreams or services its complete snapshot has.
type goldenCase struct {
	name  string
	world func() *world
	svc   *structs.NodeService
	want  int
	// check asserts what the golden file could hide in its bulk.
	check func(t *testing.T, res Resources)
	// snapshot builds the snapshot; nil is snapshot.
	snapshot func(t testing.TB, w *world, svc *structs.NodeService, want int) *proxycfg.ConfigSnapshot
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{
			name: "tcp-upstream",
			world: func() *world {
				w := newWorld()
				w.connect["db/dc1"] = sidecars("db", "dc1",
					inst{addr: "10.0.1.1", weights: &structs.Weights{Passing: 3, Warning: 1}},
					inst{addr: "10.0.1.2", status: structs.HealthWarning, weights: &structs.Weights{Passing: 3, Warning: 1}},
					inst{addr: "10.0.1.3", status: structs.HealthCritical},
				)
				return w
			},
			svc:  sidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191}),
			want: 1,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "db:127.0.0.1:9191")
				requireNames(t, res, ClusterType, "local_app", "db.default.dc1.internal."+testTrustDomain)
				requireNames(t, res, EndpointType, "db.default.dc1.internal."+testTrustDomain)
				requireNames(t, res, RouteType)
				cla := endpointsOf(t, res, "db.default.dc1.internal."+testTrustDomain)
				if got := strings.Join(cla, " "); got != "10.0.1.1:21000/HEALTHY/3 10.0.1.2:21000/DEGRADED/1" {
					t.Errorf("db endpoints %s", got)
				}
			},
		},
		{
			name:  "http-router-splitter-subsets",
			world: routedWorld,
			svc:   sidecar("web", structs.Upstream{DestinationName: "api", LocalBindPort: 9292}),
			want:  1,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, RouteType, "api")
				requireNames(t, res, ClusterType, "local_app",
					"v1.api.default.dc1.internal."+testTrustDomain,
					"v2.api.default.dc1.internal."+testTrustDomain,
					"admin.default.dc1.internal."+testTrustDomain,
					"failover-target~0~admin.default.dc1.internal."+testTrustDomain,
					"failover-target~1~admin.default.dc1.internal."+testTrustDomain)
				// v2 is only-passing: its warning instance is left out.
				if got := endpointsOf(t, res, "v2.api.default.dc1.internal."+testTrustDomain); len(got) != 1 {
					t.Errorf("v2 endpoints %v", got)
				}
			},
		},
		{
			name: "intentions-l7-default-deny",
			world: func() *world {
				w := newWorld()
				w.defaultDeny = true
				w.entries = httpDefaults("web")
				w.intentions["web"] = structs.Intentions{
					intention("*", "web", structs.IntentionActionAllow),
					intention("ops", "web", structs.IntentionActionAllow),
					intention("legacy", "web", structs.IntentionActionDeny),
					intention("api", "web", "",
						&structs.IntentionPermission{Action: structs.IntentionActionDeny, HTTP: &structs.IntentionHTTPPermission{PathExact: "/api/admin"}},
						&structs.IntentionPermission{Action: structs.IntentionActionAllow, HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/api/", Methods: []string{"GET", "HEAD"}}},
						&structs.IntentionPermission{Action: structs.IntentionActionAllow, HTTP: &structs.IntentionHTTPPermission{
							PathRegex: "/v[0-9]+/.*",
							Header: []structs.IntentionHTTPHeaderPermission{
								{Name: "x-token", Present: true},
								{Name: "x-role", Exact: "Admin", IgnoreCase: true},
								{Name: "x-env", Prefix: "prod", Invert: true},
							},
						}},
					),
				}
				return w
			},
			svc:  sidecar("web"),
			want: 0,
		},
		{
			// A gRPC service's public listener with every request
			// normalization option of the mesh entry.
			name: "grpc-public-listener-request-normalization",
			world: func() *world {
				w := newWorld()
				w.entries = []structs.ConfigEntry{
					&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "grpc"},
					&structs.MeshConfigEntry{HTTP: &structs.MeshHTTPConfig{Incoming: &structs.MeshDirectionalHTTPConfig{
						RequestNormalization: &structs.RequestNormalizationMeshConfig{
							MergeSlashes: true, PathWithEscapedSlashesAction: "UNESCAPE_AND_FORWARD", HeadersWithUnderscoresAction: "REJECT_REQUEST",
						},
					}}},
				}
				return w
			},
			svc:  sidecar("web"),
			want: 0,
		},
		{
			name: "intentions-l4-default-deny",
			world: func() *world {
				w := newWorld()
				w.defaultDeny = true
				w.intentions["db"] = structs.Intentions{
					intention("web", "db", structs.IntentionActionAllow),
					intention("*", "db", structs.IntentionActionDeny),
					// L7 permissions cannot apply to a TCP service: they deny.
					intention("api", "db", "", &structs.IntentionPermission{Action: structs.IntentionActionAllow, HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/"}}),
				}
				return w
			},
			svc:  sidecar("db"),
			want: 0,
		},
		{
			name:  "transparent-proxy",
			world: transparentWorld(false),
			svc:   transparentSidecar(),
			want:  4,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "outbound_listener:127.0.0.1:15001", "cache:127.0.0.1:9393")
				requireNames(t, res, RouteType, "api")
				requireOutboundMatches(t, res, "api=10.96.0.10,240.0.0.1", "billing=240.0.0.4", "cache=240.0.0.2", "db=10.100.0.3,240.0.0.3")
			},
		},
		{
			name:  "transparent-proxy-mesh-destinations-only",
			world: transparentWorld(true),
			svc:   transparentSidecar(),
			want:  4,
		},
		{
			name: "remote-datacenters-through-mesh-gateways",
			world: func() *world {
				w := newWorld()
				w.datacenters = []string{"dc1", "dc2"}
				w.entries = []structs.ConfigEntry{
					&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "db", Protocol: "tcp", MeshGateway: structs.MeshGatewayConfig{Mode: "remote"}},
					&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "db", Failover: map[string]structs.ServiceResolverFailover{
						"*": {Datacenters: []string{"dc2"}},
					}},
				}
				w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
				w.connect["db/dc2"] = sidecars("db", "dc2", inst{addr: "10.2.1.1"})
				w.connect["cache/dc2"] = sidecars("cache", "dc2", inst{addr: "10.2.2.1"})
				w.meshGateways["dc1"] = meshGatewayNodes("dc1", [2]string{"10.0.0.100", "198.51.100.1"})
				w.meshGateways["dc2"] = meshGatewayNodes("dc2", [2]string{"10.2.0.100", "198.51.100.2"}, [2]string{"10.2.0.101", "198.51.100.3"})
				return w
			},
			svc: sidecar("web",
				structs.Upstream{DestinationName: "cache", Datacenter: "dc2", LocalBindPort: 9292, MeshGateway: structs.MeshGatewayConfig{Mode: "local"}},
				structs.Upstream{DestinationName: "db", LocalBindPort: 9191},
			),
			want: 2,
			check: func(t *testing.T, res Resources) {
				// cache in dc2 through this datacenter's gateways (LAN). The
				// upstream's mesh gateway mode customizes its chain, hence
				// the hash prefix of its cluster.
				cache := nameWithSuffix(t, res, EndpointType, "~cache.default.dc2.internal."+testTrustDomain)
				if got := endpointsOf(t, res, cache); strings.Join(got, " ") != "10.0.0.100:8443/HEALTHY/1" {
					t.Errorf("cache endpoints %v", got)
				}
				// db's failover to dc2 through dc2's gateways (WAN).
				if got := endpointsOf(t, res, "failover-target~1~db.default.dc1.internal."+testTrustDomain); strings.Join(got, " ") != "198.51.100.2:443/HEALTHY/1 198.51.100.3:443/HEALTHY/1" {
					t.Errorf("db failover endpoints %v", got)
				}
			},
		},
		{
			name:  "escape-hatches",
			world: escapeHatchWorld(true),
			svc:   allEscapeHatches(),
			want:  1,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "db_custom:127.0.0.1:9191")
				requireNames(t, res, ClusterType, "local_app", dbSNI)
				requireNames(t, res, EndpointType, dbSNI)
				requireNames(t, res, RouteType)
				fc := res[ListenerType]["public_listener:10.0.0.1:21000"].(*listenerv3.Listener).GetFilterChains()[0]
				if fc.GetTransportSocket().GetTypedConfig().GetTypeUrl() != resource.APITypePrefix+"envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext" {
					t.Errorf("public chain without mTLS: %v", fc.GetTransportSocket())
				}
				if f := hcmOf(t, fc).GetHttpFilters()[0]; f.GetName() != wellknown.HTTPRoleBasedAccessControl {
					t.Errorf("first HTTP filter %q, want the intentions' RBAC", f.GetName())
				}
			},
		},
		{
			// The registration's two paths replace service-defaults' one
			// (Consul's agent-side merge): http on the application's port
			// through local_app, http2 (gRPC health) on another port
			// through a cluster of its own.
			name:     "expose-paths",
			world:    exposeWorld,
			svc:      exposeSidecar(),
			want:     1,
			snapshot: snapshot,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, publicL, "db:127.0.0.1:9191", healthL, grpcL)
				requireNames(t, res, ClusterType, localAppCluster, grpcCluster, "db.default.dc1.internal."+testTrustDomain)
				checkExposed(t, res, wantHealth)
				checkExposed(t, res, wantGRPC)
				checkExposedCluster(t, res, grpcCluster, "127.0.0.1", 9090, true, 5*time.Second)
			},
		},
		{
			// proxy-defaults' AccessLogs enabled with Consul's defaults:
			// every listener logs unmatched connections, every
			// connection manager and tcp_proxy its traffic, to stdout in
			// Consul's default JSON format.
			name:  "access-logs",
			world: accessLogsWorld(nil),
			svc:   accessLogsSidecar(),
			want:  2,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "db:127.0.0.1:9191", "api:127.0.0.1:9292")
				requireAccessLogs(t, res, accessLogWant{listener: 1, filter: 1, check: checkStdoutDefaultJSON})
			},
		},
		{
			name:  "ingress-gateway",
			world: ingressWorld,
			svc:   gateway(structs.ServiceKindIngressGateway, "ingress", 0),
			want:  4,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, "http:10.0.0.50:8080", "http:10.0.0.50:8443", "db:10.0.0.50:9000")
				requireNames(t, res, RouteType, "8080", "8443")
			},
		},
		{
			name:  "terminating-gateway",
			world: terminatingWorld,
			svc:   gateway(structs.ServiceKindTerminatingGateway, "terminating", 8443),
			want:  2,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, "default:10.0.0.50:8443")
				requireNames(t, res, ClusterType,
					"billing.default.dc1.internal."+testTrustDomain,
					"legacy.default.dc1.internal."+testTrustDomain,
					"v1.legacy.default.dc1.internal."+testTrustDomain)
				// legacy has a host name instance: resolved by DNS, no EDS.
				requireNames(t, res, EndpointType,
					"billing.default.dc1.internal."+testTrustDomain,
					"v1.legacy.default.dc1.internal."+testTrustDomain)
			},
		},
		{
			// Consul's sidecar dials a service behind a terminating
			// gateway as any other upstream: the service's own SNI (the
			// gateway's filter chain for it matches on that name) and its
			// SPIFFE ID (the gateway presents the service's leaf); only the
			// endpoints are the gateway's.
			name:  "upstream-behind-terminating-gateway",
			world: behindTerminatingWorld,
			svc:   sidecar("web", structs.Upstream{DestinationName: "billing", LocalBindPort: 9393}),
			want:  1,
			check: func(t *testing.T, res Resources) {
				sni := "billing.default.dc1.internal." + testTrustDomain
				requireNames(t, res, ListenerType, "public_listener:10.0.0.1:21000", "billing:127.0.0.1:9393")
				requireNames(t, res, ClusterType, "local_app", sni)
				if got := strings.Join(endpointsOf(t, res, sni), " "); got != "10.0.0.50:8443/HEALTHY/1" {
					t.Errorf("billing endpoints %s, want the gateway", got)
				}
				if got := upstreamSNI(t, res, sni); got != sni {
					t.Errorf("billing cluster SNI %q, want %q", got, sni)
				}
				// The gateway's own configuration has a filter chain for
				// exactly that name.
				w := terminatingWorld()
				gw := snapshot(t, w, gateway(structs.ServiceKindTerminatingGateway, "terminating", 8443), 2)
				gres, err := Generate(gw)
				if err != nil {
					t.Fatal(err)
				}
				if !serverNamesInclude(gres, "default:10.0.0.50:8443", sni) {
					t.Errorf("terminating gateway has no filter chain for %s", sni)
				}
			},
		},
		{
			name:  "mesh-gateway",
			world: meshGatewayWorld,
			svc:   gateway(structs.ServiceKindMeshGateway, "mesh-gateway", 8443),
			want:  6,
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ClusterType,
					"db.default.dc1.internal."+testTrustDomain,
					"v1.db.default.dc1.internal."+testTrustDomain,
					"web.default.dc1.internal."+testTrustDomain,
					"dc2.internal."+testTrustDomain,
					"dc3.internal."+testTrustDomain)
			},
		},
	}
}

// TestGolden generates every case from a snapshot built by the real
// state machines, validates it and compares it with its golden file
// (go test -update rewrites them).
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			build := snapshot
			if tc.snapshot != nil {
				build = tc.snapshot
			}
			snap := build(t, tc.world(), tc.svc, tc.want)
			res, err := Generate(snap)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(res); err != nil {
				t.Fatal(err)
			}
			if used := deprecatedFields(t, res); len(used) > 0 {
				t.Errorf("deprecated fields set (Envoy warns, or refuses once they are removed): %v", used)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
			compareGolden(t, tc.name, res)
		})
	}
}

// compareGolden compares res with testdata/<name>.golden (rewritten under
// -update).
func compareGolden(t *testing.T, name string, res Resources) {
	t.Helper()
	got := goldenJSON(t, res)
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("resources differ from %s (check, then go test -update):\n%s", path, diffLines(string(want), string(got)))
	}
}

// goldenJSON renders a resource set deterministically: protojson for each
// resource, re-encoded with sorted keys and fixed indentation (protojson's
// own whitespace is deliberately unstable).
func goldenJSON(t testing.TB, res Resources) []byte {
	t.Helper()
	short := map[string]string{ListenerType: "listeners", ClusterType: "clusters", RouteType: "routes", EndpointType: "endpoints"}
	out := map[string]map[string]any{}
	for typeURL, set := range res {
		m := map[string]any{}
		for name, msg := range set {
			b, err := protojson.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			m[name] = v
		}
		out[short[typeURL]] = m
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// diffLines shows the first lines that differ, with a little context.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		if i < len(w) && i < len(g) && w[i] == g[i] {
			continue
		}
		lo := max(0, i-3)
		var b strings.Builder
		for j := lo; j < i+6; j++ {
			if j < len(w) {
				b.WriteString("- " + w[j] + "\n")
			}
		}
		for j := lo; j < i+6; j++ {
			if j < len(g) {
				b.WriteString("+ " + g[j] + "\n")
			}
		}
		return b.String()
	}
	return "(equal)"
}
