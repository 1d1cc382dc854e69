package gen

import (
	"maps"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// nativeWeb is a Connect-native gRPC application's registration.
func nativeWeb() *structs.NodeService {
	return proxycfg.NativeProxy(&structs.NodeService{ID: "web-1", Service: "web", Address: "10.0.0.1", Port: 8080})
}

const grpcWebServer = GRPCServerListenerPrefix + "0.0.0.0:8080"

func TestGRPCGolden(t *testing.T) {
	cases := []struct {
		name      string
		world     func() *world
		dial      []string
		listeners []string
		check     func(t *testing.T, res Resources)
	}{
		{
			name:  "grpc-client-router-splitter",
			world: routedWorld,
			dial:  []string{"api", "nosuch"},
			// "api" twice: by its name and by its name in the datacenter.
			listeners: []string{"api", "api.default.dc1", "nosuch", "db.default.dc2", GRPCServerListenerPrefix + "0.0.0.0:9999"},
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, "api", "api.default.dc1")
				requireNames(t, res, RouteType, "api", "api.default.dc1")
				requireNames(t, res, ClusterType,
					"v1.api.default.dc1.internal."+testTrustDomain,
					"v2.api.default.dc1.internal."+testTrustDomain,
					"admin.default.dc1.internal."+testTrustDomain,
					"failover-target~0~admin.default.dc1.internal."+testTrustDomain,
					"failover-target~1~admin.default.dc1.internal."+testTrustDomain)
			},
		},
		{
			name: "grpc-server-default-deny",
			world: func() *world {
				w := newWorld()
				w.defaultDeny = true
				w.entries = []structs.ConfigEntry{&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "grpc"}}
				w.intentions["web"] = structs.Intentions{intention("api", "web", structs.IntentionActionAllow)}
				return w
			},
			listeners: []string{grpcWebServer},
			check: func(t *testing.T, res Resources) {
				requireNames(t, res, ListenerType, grpcWebServer)
				requireNames(t, res, ClusterType)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.world()
			snap := snapshotDialing(t, w, nativeWeb(), len(tc.dial), tc.dial...)
			res, err := GenerateGRPC(snap, tc.listeners)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(res); err != nil {
				t.Fatal(err)
			}
			tc.check(t, res)
			checkGRPCRules(t, res)
			compareGolden(t, tc.name, res)
		})
	}
}

// checkGRPCRules asserts what gRPC's xDS client refuses or ignores, which
// a golden file would not make obvious: inline TLS material or
// tls_params, localities without a weight, a client listener that is not
// an api_listener over RDS ending with the router, a cluster policy gRPC
// lacks, server routes that forward.
func checkGRPCRules(t *testing.T, res Resources) {
	t.Helper()
	common := func(where string, c *tlsv3.CommonTlsContext) {
		if len(c.GetTlsCertificates()) > 0 || c.GetTlsParams() != nil ||
			c.GetTlsCertificateProviderInstance().GetInstanceName() != GRPCCertProviderInstance ||
			c.GetValidationContext().GetCaCertificateProviderInstance().GetInstanceName() != GRPCCertProviderInstance ||
			c.GetValidationContext().GetTrustedCa() != nil {
			t.Errorf("%s: TLS context gRPC refuses: %v", where, c)
		}
	}
	for name, m := range res[ClusterType] {
		c := m.(*clusterv3.Cluster)
		if p := c.GetLbPolicy(); p != clusterv3.Cluster_ROUND_ROBIN && p != clusterv3.Cluster_RING_HASH && p != clusterv3.Cluster_LEAST_REQUEST {
			t.Errorf("cluster %s: lb policy %v", name, p)
		}
		if c.GetClusterType() != nil {
			continue
		}
		if c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil || c.GetTransportSocket() == nil {
			t.Errorf("cluster %s is not EDS over ADS with TLS", name)
			continue
		}
		var up tlsv3.UpstreamTlsContext
		if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&up); err != nil {
			t.Fatal(err)
		}
		common("cluster "+name, up.GetCommonTlsContext())
		if len(up.GetCommonTlsContext().GetValidationContext().GetMatchSubjectAltNames()) != 1 { //nolint:staticcheck // what gRPC reads
			t.Errorf("cluster %s: no SPIFFE SAN match", name)
		}
	}
	for name, m := range res[EndpointType] {
		for _, l := range m.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
			if l.GetLoadBalancingWeight().GetValue() == 0 || l.GetLocality() == nil {
				t.Errorf("endpoints %s: a locality without ID or weight", name)
			}
		}
	}
	for name, m := range res[ListenerType] {
		l := m.(*listenerv3.Listener)
		var hcm hcmv3.HttpConnectionManager
		if api := l.GetApiListener(); api != nil {
			if err := api.GetApiListener().UnmarshalTo(&hcm); err != nil {
				t.Fatal(err)
			}
			if hcm.GetRds().GetConfigSource().GetAds() == nil || hcm.GetRds().GetRouteConfigName() != name {
				t.Errorf("listener %s: not RDS over ADS: %v", name, &hcm)
			}
		} else {
			if len(l.GetFilterChains()) != 1 || len(l.GetListenerFilters()) != 0 {
				t.Fatalf("server listener %s: %v", name, l)
			}
			fc := l.GetFilterChains()[0]
			if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				t.Fatal(err)
			}
			var down tlsv3.DownstreamTlsContext
			if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&down); err != nil {
				t.Fatal(err)
			}
			common("listener "+name, down.GetCommonTlsContext())
			if !down.GetRequireClientCertificate().GetValue() {
				t.Errorf("listener %s does not require client certificates", name)
			}
			for _, r := range hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
				if _, ok := r.GetAction().(*routev3.Route_NonForwardingAction); !ok {
					t.Errorf("listener %s: a server route that forwards: %v", name, r)
				}
			}
		}
		fs := httpFilterNames(&hcm)
		if len(fs) == 0 || fs[len(fs)-1] != "envoy.filters.http.router" {
			t.Errorf("listener %s: http filters %v, want the router last", name, fs)
		}
	}
}

func TestGRPCTarget(t *testing.T) {
	cases := []struct {
		name, want string
		ok         bool
	}{
		{"api", "api", true},
		{"api:8080", "api", true},
		{"api.default.dc1", "api", true},
		{"api.default.dc1:50051", "api", true},
		{"api.default.dc2", "", false},
		{"api.service.consul", "", false},
		{"api:http", "", false},
		{"", "", false},
		{":8080", "", false},
		{GRPCServerListenerPrefix + "127.0.0.1:8080", "", false},
		{"xdstp://authority/envoy.config.listener.v3.Listener/api", "", false},
	}
	for _, tc := range cases {
		if got, ok := GRPCTarget(tc.name, "dc1"); got != tc.want || ok != tc.ok {
			t.Errorf("GRPCTarget(%q) = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestGRPCUpstreamWaitsForItsEndpoints: an upstream whose chain is known
// but the endpoints of one of its targets not read yet gets no resources
// (a gRPC client would apply the empty endpoint set; sent nothing, it
// keeps what it has), and gets them all once every target is read, empty
// or not.
func TestGRPCUpstreamWaitsForItsEndpoints(t *testing.T) {
	snap := snapshotDialing(t, routedWorld(), nativeWeb(), 1, "api")
	u := snap.ConnectProxy.Upstreams.Get(proxycfg.UpstreamID("api"))
	if u == nil || u.Chain == nil || len(u.Chain.Targets) < 2 {
		t.Fatalf("api upstream %+v: want a chain of two targets or more", u)
	}
	loaded := u.Endpoints
	for id := range u.Chain.Targets {
		partial := *u
		partial.Endpoints = maps.Clone(loaded)
		delete(partial.Endpoints, id)
		cp := *snap.ConnectProxy
		cp.Upstreams = cp.Upstreams.With(&partial)
		s := *snap
		s.ConnectProxy = &cp
		res, err := GenerateGRPC(&s, []string{"api"})
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []string{ListenerType, RouteType, ClusterType, EndpointType} {
			if len(res[typ]) != 0 {
				t.Fatalf("target %s not read: %d resources of %s, want none", id, len(res[typ]), typ)
			}
		}
		// Read, with no instance: the upstream's resources are complete.
		partial.Endpoints[id] = nil
		res, err = GenerateGRPC(&s, []string{"api"})
		if err != nil {
			t.Fatal(err)
		}
		requireNames(t, res, ListenerType, "api")
	}
}
