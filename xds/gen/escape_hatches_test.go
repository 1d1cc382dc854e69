package gen

import (
	"errors"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
)

// escapeHatchCase is a world, a registration in it with escape hatches,
// and what the generation must look like.
type escapeHatchCase struct {
	name  string
	world func() *world
	svc   func(t *testing.T) *structs.NodeService
	want  int // upstreams
	check func(t *testing.T, c *checkCtx)
}

// checkCtx is what a check looks at: the snapshot, its resources, and a
// builder over the snapshot for the injections expected.
type checkCtx struct {
	snap *proxycfg.ConfigSnapshot
	res  Resources
	b    *builder
}

func (c *checkCtx) listener(t *testing.T, name string) *listenerv3.Listener {
	t.Helper()
	l, ok := c.res[ListenerType][name].(*listenerv3.Listener)
	if !ok {
		t.Fatalf("no listener %q in %v", name, sortedKeys(c.res[ListenerType]))
	}
	return l
}

func (c *checkCtx) cluster(t *testing.T, name string) *clusterv3.Cluster {
	t.Helper()
	cl, ok := c.res[ClusterType][name].(*clusterv3.Cluster)
	if !ok {
		t.Fatalf("no cluster %q in %v", name, sortedKeys(c.res[ClusterType]))
	}
	return cl
}

// decoded is what the JSON of a spec decodes to.
func decoded[M proto.Message](t *testing.T, spec obj, m M) M {
	t.Helper()
	if err := decodeResource(mustJSON(spec), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// allChains is a listener's filter chains, the default one last.
func allChains(l *listenerv3.Listener) []*listenerv3.FilterChain {
	out := append([]*listenerv3.FilterChain{}, l.GetFilterChains()...)
	if l.GetDefaultFilterChain() != nil {
		out = append(out, l.GetDefaultFilterChain())
	}
	return out
}

// requireMeshTLS asserts the chain's transport socket is the sidecar's
// mTLS.
func (c *checkCtx) requireMeshTLS(t *testing.T, fc *listenerv3.FilterChain) {
	t.Helper()
	if want := c.b.meshDownstreamTLS(c.snap.ConnectProxy.Leaf); !proto.Equal(fc.GetTransportSocket(), want) {
		t.Errorf("chain %q: transport socket is not the mesh mTLS: %v", fc.GetName(), fc.GetTransportSocket())
	}
}

// networkRBAC and httpRBAC are the intentions' filters of the snapshot.
func (c *checkCtx) networkRBAC() *listenerv3.Filter {
	return c.b.networkRBAC(c.snap.ConnectProxy.Intentions, c.snap.IntentionDefaultAllow)
}

func (c *checkCtx) httpRBAC() *hcmv3.HttpFilter {
	return c.b.httpRBAC(c.snap.ConnectProxy.Intentions, c.snap.IntentionDefaultAllow)
}

// hcmOf unpacks a chain's HTTP connection manager (nil when none).
func hcmOf(t *testing.T, fc *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	t.Helper()
	for _, f := range fc.GetFilters() {
		if tc := f.GetTypedConfig(); tc != nil && tc.MessageName() == hcmType {
			hcm := &hcmv3.HttpConnectionManager{}
			if err := tc.UnmarshalTo(hcm); err != nil {
				t.Fatal(err)
			}
			return hcm
		}
	}
	return nil
}

// TestEscapeHatchesReplaceResources generates registrations with escape
// hatches through the real state machines: each replaces its resource,
// with Consul's injections, the result passes Validate, and the keys
// Consul ignores are ignored.
func TestEscapeHatchesReplaceResources(t *testing.T) {
	tlsMatch := obj{"server_names": []any{"web.example.com"}}
	cases := []escapeHatchCase{
		{
			name:  "tcp public listener: every chain, default included, gets mTLS and network RBAC first",
			world: escapeHatchWorld(false),
			svc: func(t *testing.T) *structs.NodeService {
				spec := publicListenerSpec(tcpChain("local_app", tlsMatch), tcpChain("local_app", nil))
				spec["name"] = "custom_public"
				spec["default_filter_chain"] = tcpChain("local_app", nil)
				return escapeHatchSidecar(obj{cfgPublicListenerJSON: mustJSON(spec)}, nil)
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				requireNames(t, c.res, ListenerType, "custom_public", "db:127.0.0.1:9191")
				l := c.listener(t, "custom_public")
				chains := allChains(l)
				if len(chains) != 3 {
					t.Fatalf("%d chains", len(chains))
				}
				for _, fc := range chains {
					c.requireMeshTLS(t, fc)
					if len(fc.Filters) != 2 || !proto.Equal(fc.Filters[0], c.networkRBAC()) {
						t.Errorf("chain filters %v: want the network RBAC filter, then the user's", fc.Filters)
					}
				}
				if got := l.FilterChains[0].GetFilterChainMatch().GetServerNames(); len(got) != 1 {
					t.Errorf("the user's match was changed: %v", got)
				}
			},
		},
		{
			name:  "http public listener: the HTTP RBAC filter heads the connection manager",
			world: escapeHatchWorld(true),
			svc: func(t *testing.T) *structs.NodeService {
				return escapeHatchSidecar(obj{cfgPublicListenerJSON: mustJSON(publicListenerSpec(httpChain(nil)))}, nil)
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				fc := c.listener(t, "public_listener:10.0.0.1:21000").FilterChains[0]
				c.requireMeshTLS(t, fc)
				if len(fc.Filters) != 1 {
					t.Fatalf("chain filters %v: want the connection manager alone", fc.Filters)
				}
				hcm := hcmOf(t, fc)
				var names []string
				for _, f := range hcm.GetHttpFilters() {
					names = append(names, f.GetName())
				}
				if len(names) != 3 || !proto.Equal(hcm.HttpFilters[0], c.httpRBAC()) || names[1] != "envoy.filters.http.cors" {
					t.Errorf("http filters %v: want the HTTP RBAC filter, then the user's", names)
				}
				if len(hcm.GetAccessLog()) != 1 || hcm.GetRouteConfig().GetName() != "custom_local" {
					t.Error("the user's connection manager was changed")
				}
			},
		},
		{
			name:  "http public listener with a tcp chain: network RBAC on every chain instead",
			world: escapeHatchWorld(true),
			svc: func(t *testing.T) *structs.NodeService {
				spec := publicListenerSpec(httpChain(nil), tcpChain("local_app", tlsMatch))
				return escapeHatchSidecar(obj{cfgPublicListenerJSON: mustJSON(spec)}, nil)
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				for _, fc := range c.listener(t, "public_listener:10.0.0.1:21000").FilterChains {
					c.requireMeshTLS(t, fc)
					if !proto.Equal(fc.Filters[0], c.networkRBAC()) {
						t.Errorf("first filter %v: want the network RBAC filter", fc.Filters[0])
					}
				}
				hcm := hcmOf(t, c.listener(t, "public_listener:10.0.0.1:21000").FilterChains[0])
				if n := len(hcm.GetHttpFilters()); n != 2 {
					t.Errorf("%d http filters: the connection manager must be left alone", n)
				}
			},
		},
		{
			name:  "local cluster, verbatim",
			world: escapeHatchWorld(false),
			svc: func(t *testing.T) *structs.NodeService {
				return escapeHatchSidecar(obj{cfgLocalClusterJSON: mustJSON(localAppSpec())}, nil)
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				want := decoded(t, localAppSpec(), &clusterv3.Cluster{})
				if got := c.cluster(t, "local_app"); !proto.Equal(got, want) {
					t.Errorf("local_app = %v, want %v", got, want)
				}
				// The generated public listener still leads to it.
				c.listener(t, "public_listener:10.0.0.1:21000")
			},
		},
		{
			name:  "upstream listener, verbatim, without a route of ours",
			world: escapeHatchWorld(false),
			svc: func(t *testing.T) *structs.NodeService {
				spec := typed(typeListener, dbListenerSpec("db_custom:127.0.0.1:9191", dbSNI))
				return escapeHatchSidecar(nil, obj{cfgListenerJSON: mustJSON(spec)})
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				requireNames(t, c.res, ListenerType, "public_listener:10.0.0.1:21000", "db_custom:127.0.0.1:9191")
				want := decoded(t, dbListenerSpec("db_custom:127.0.0.1:9191", dbSNI), &listenerv3.Listener{})
				if got := c.listener(t, "db_custom:127.0.0.1:9191"); !proto.Equal(got, want) {
					t.Errorf("listener = %v, want %v", got, want)
				}
				requireNames(t, c.res, ClusterType, "local_app", dbSNI)
			},
		},
		{
			name:  "upstream cluster: the user's, with the chain's mTLS and endpoints",
			world: escapeHatchWorld(false),
			svc: func(t *testing.T) *structs.NodeService {
				return escapeHatchSidecar(nil, obj{cfgClusterJSON: mustJSON(typed(typeCluster, dbClusterSpec(dbSNI)))})
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				got := c.cluster(t, dbSNI)
				want := decoded(t, dbClusterSpec(dbSNI), &clusterv3.Cluster{})
				t0 := c.snap.ConnectProxy.Upstreams.Get("db").Chain.Targets["db.default.default.dc1"]
				want.TransportSocket = c.b.meshUpstreamTLS(c.snap.ConnectProxy.Leaf, dbSNI, targetSpiffeID(t0, testTrustDomain))
				if !proto.Equal(got, want) {
					t.Errorf("cluster = %v, want %v", got, want)
				}
				if eps := endpointsOf(t, c.res, dbSNI); len(eps) != 2 {
					t.Errorf("db endpoints %v", eps)
				}
			},
		},
		{
			name:  "renamed upstream cluster behind the user's listener; endpoints under its eds service name",
			world: escapeHatchWorld(false),
			svc: func(t *testing.T) *structs.NodeService {
				cl := dbClusterSpec("db-custom")
				cl["eds_cluster_config"].(obj)["service_name"] = "db-endpoints"
				return escapeHatchSidecar(nil, obj{
					cfgClusterJSON:  mustJSON(cl),
					cfgListenerJSON: mustJSON(dbListenerSpec("db:127.0.0.1:9191", "db-custom")),
				})
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				requireNames(t, c.res, ClusterType, "local_app", "db-custom")
				requireNames(t, c.res, EndpointType, "db-endpoints")
				if eps := endpointsOf(t, c.res, "db-endpoints"); len(eps) != 2 {
					t.Errorf("db endpoints %v", eps)
				}
			},
		},
		{
			name:  "a static upstream cluster reads no endpoint set",
			world: escapeHatchWorld(false),
			svc: func(t *testing.T) *structs.NodeService {
				cl := obj{
					"name": dbSNI, "type": "STRICT_DNS", "connect_timeout": "1s",
					"load_assignment": obj{"cluster_name": dbSNI, "endpoints": []any{obj{"lb_endpoints": []any{
						obj{"endpoint": obj{"address": socketAddr("db.example.com", 5432)}},
					}}}},
				}
				return escapeHatchSidecar(nil, obj{cfgClusterJSON: mustJSON(cl)})
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				requireNames(t, c.res, EndpointType)
				if c.cluster(t, dbSNI).GetTransportSocket() == nil {
					t.Error("no mTLS on the user's cluster")
				}
			},
		},
		{
			name: "central upstream config (service-defaults), the registration's wins",
			world: func() *world {
				w := escapeHatchWorld(false)()
				w.entries = append(w.entries, &structs.ServiceConfigEntry{
					Kind: structs.ServiceDefaults, Name: "web",
					UpstreamConfig: &structs.UpstreamConfiguration{Overrides: []*structs.UpstreamConfig{{
						Name:              "db",
						EnvoyClusterJSON:  mustJSON(dbClusterSpec(dbSNI)),
						EnvoyListenerJSON: mustJSON(dbListenerSpec("central:127.0.0.1:9191", dbSNI)),
					}}},
				})
				return w
			},
			svc: func(t *testing.T) *structs.NodeService {
				return escapeHatchSidecar(nil, obj{cfgListenerJSON: mustJSON(dbListenerSpec("local:127.0.0.1:9191", dbSNI))})
			},
			want: 1,
			check: func(t *testing.T, c *checkCtx) {
				requireNames(t, c.res, ListenerType, "public_listener:10.0.0.1:21000", "local:127.0.0.1:9191")
				if c.cluster(t, dbSNI).GetLbPolicy() != clusterv3.Cluster_LEAST_REQUEST {
					t.Error("the central envoy_cluster_json was not applied")
				}
			},
		},
		{
			name:  "a transparent proxy's upstream with its own listener leaves the outbound listener",
			world: transparentWorld(false),
			svc: func(t *testing.T) *structs.NodeService {
				s := transparentSidecar()
				spec := dbListenerSpec("cache_custom:127.0.0.1:9393", "cache.default.dc1.internal."+testTrustDomain)
				spec["address"] = socketAddr("127.0.0.1", 9393)
				s.Proxy.Upstreams[0].Config = obj{cfgListenerJSON: mustJSON(spec)}
				return s
			},
			want: 4,
			check: func(t *testing.T, c *checkCtx) {
				requireNames(t, c.res, ListenerType, "public_listener:10.0.0.1:21000", "outbound_listener:127.0.0.1:15001", "cache_custom:127.0.0.1:9393")
				for _, fc := range c.listener(t, "outbound_listener:127.0.0.1:15001").FilterChains {
					if strings.HasPrefix(fc.GetName(), "cache") {
						t.Errorf("outbound chain %q for cache", fc.GetName())
					}
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(t, tc.world(), tc.svc(t), tc.want)
			res, err := Generate(snap)
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(res); err != nil {
				t.Fatal(err)
			}
			again, err := Generate(snap)
			if err != nil {
				t.Fatal(err)
			}
			if err := equalResources(res, again); err != nil {
				t.Fatalf("not deterministic: %v", err)
			}
			tc.check(t, &checkCtx{snap: snap, res: res, b: newBuilder(snap)})
		})
	}
}

// TestEscapeHatchesConsulIgnores: the keys Consul ignores change nothing.
func TestEscapeHatchesConsulIgnores(t *testing.T) {
	// db's chain shaped by a resolver is not Default.
	shaped := func() *world {
		w := escapeHatchWorld(false)()
		w.entries = append(w.entries, &structs.ServiceResolverConfigEntry{
			Kind: structs.ServiceResolver, Name: "db", ConnectTimeout: structs.Duration(3 * time.Second),
		})
		return w
	}
	cases := []struct {
		name     string
		world    func() *world
		proxyCfg func(t *testing.T) obj
		dbCfg    func(t *testing.T) obj
		noPort   bool
	}{
		{
			name:  "cluster and listener on a chain config entries shape",
			world: shaped,
			dbCfg: func(t *testing.T) obj {
				return obj{
					cfgClusterJSON:  mustJSON(dbClusterSpec("db-custom")),
					cfgListenerJSON: mustJSON(dbListenerSpec("db_custom:127.0.0.1:9191", "db-custom")),
				}
			},
		},
		{
			name:   "listener of an upstream without a bind port",
			world:  escapeHatchWorld(false),
			noPort: true,
			dbCfg: func(t *testing.T) obj {
				return obj{cfgListenerJSON: mustJSON(dbListenerSpec("db_custom:127.0.0.1:9191", dbSNI))}
			},
		},
		{
			name:  "values that are not strings",
			world: escapeHatchWorld(false),
			proxyCfg: func(t *testing.T) obj {
				return obj{cfgPublicListenerJSON: publicListenerSpec(tcpChain("local_app", nil)), cfgLocalClusterJSON: []any{localAppSpec()}}
			},
			dbCfg: func(t *testing.T) obj { return obj{cfgClusterJSON: dbClusterSpec("db-custom")} },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var proxyCfg, dbCfg obj
			if tc.proxyCfg != nil {
				proxyCfg = tc.proxyCfg(t)
			}
			if tc.dbCfg != nil {
				dbCfg = tc.dbCfg(t)
			}
			with, without := escapeHatchSidecar(proxyCfg, dbCfg), escapeHatchSidecar(nil, nil)
			if tc.noPort {
				with.Proxy.Upstreams[0].LocalBindPort = 0
				without.Proxy.Upstreams[0].LocalBindPort = 0
			}
			got, err := Generate(snapshot(t, tc.world(), with, 1))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Generate(snapshot(t, tc.world(), without, 1))
			if err != nil {
				t.Fatal(err)
			}
			if err := equalResources(want, got); err != nil {
				t.Fatalf("the escape hatch changed the resources: %v", err)
			}
		})
	}
}

// TestEscapeHatchErrors: an override that cannot be delivered as given
// fails the generation with ErrInvalidEscapeHatch, naming its key, and a
// Generator that met it builds again from the next good snapshot.
func TestEscapeHatchErrors(t *testing.T) {
	public := func(t *testing.T, spec any) *structs.NodeService {
		raw, ok := spec.(string)
		if !ok {
			raw = mustJSON(spec)
		}
		return escapeHatchSidecar(obj{cfgPublicListenerJSON: raw}, nil)
	}
	db := func(key string) func(t *testing.T, spec any) *structs.NodeService {
		return func(t *testing.T, spec any) *structs.NodeService {
			raw, ok := spec.(string)
			if !ok {
				raw = mustJSON(spec)
			}
			return escapeHatchSidecar(nil, obj{key: raw})
		}
	}
	local := func(t *testing.T, spec any) *structs.NodeService {
		raw, ok := spec.(string)
		if !ok {
			raw = mustJSON(spec)
		}
		return escapeHatchSidecar(obj{cfgLocalClusterJSON: raw}, nil)
	}
	badTCP := publicListenerSpec(tcpChain("local_app", nil))
	badTCP["filter_chains"].([]any)[0].(obj)["filters"].([]any)[0].(obj)["typed_config"].(obj)["stat_prefix"] = ""
	unresolved := publicListenerSpec(httpChain(nil))
	hcm := unresolved["filter_chains"].([]any)[0].(obj)["filters"].([]any)[0].(obj)["typed_config"].(obj)
	hcm["http_filters"] = []any{obj{"name": "nope", "typed_config": obj{"@type": "type.googleapis.com/envoy.extensions.filters.http.nope.v3.Nope"}}}
	noName := localAppSpec()
	delete(noName, "name")
	negative := dbClusterSpec(dbSNI)
	negative["connect_timeout"] = "-1s"
	unknownField := localAppSpec()
	unknownField["nmae"] = "local_app"
	v2 := typed("type.googleapis.com/envoy.api.v2.Listener", publicListenerSpec(tcpChain("local_app", nil)))

	cases := []struct {
		name string
		key  string
		svc  func(t *testing.T, spec any) *structs.NodeService
		spec any
		want string // in the error
	}{
		{"malformed public listener", cfgPublicListenerJSON, public, `{"name": `, "not a JSON object"},
		{"malformed local cluster", cfgLocalClusterJSON, local, `[]`, "not a JSON object"},
		{"malformed upstream listener", cfgListenerJSON, db(cfgListenerJSON), `nope`, "not a JSON object"},
		{"malformed upstream cluster", cfgClusterJSON, db(cfgClusterJSON), `null`, "not a JSON object"},
		{"a number", cfgClusterJSON, db(cfgClusterJSON), `42`, "not a JSON object"},
		{"wrong type", cfgPublicListenerJSON, public, typed(typeCluster, localAppSpec()), "is not envoy.config.listener.v3.Listener"},
		{"wrong type of upstream cluster", cfgClusterJSON, db(cfgClusterJSON), typed(typeListener, dbListenerSpec("x", dbSNI)), "is not envoy.config.cluster.v3.Cluster"},
		{"an Envoy v2 type", cfgPublicListenerJSON, public, v2, "v2 API is gone"},
		{"an unknown field", cfgLocalClusterJSON, local, unknownField, "nmae"},
		{"a typed config that does not resolve", cfgPublicListenerJSON, public, unresolved, "envoy.extensions.filters.http.nope.v3.Nope"},
		{"a packed config failing validation", cfgPublicListenerJSON, public, badTCP, "StatPrefix"},
		{"a resource failing validation", cfgClusterJSON, db(cfgClusterJSON), negative, "ConnectTimeout"},
		{"no name", cfgLocalClusterJSON, local, noName, "has no name"},
		{"no filter chain", cfgPublicListenerJSON, public, publicListenerSpec(), "no filter chain"},
		{"a missing cluster", cfgListenerJSON, db(cfgListenerJSON), dbListenerSpec("db:127.0.0.1:9191", "nowhere"), `"nowhere", which the proxy does not get`},
		{"a public listener to a missing cluster", cfgPublicListenerJSON, public, publicListenerSpec(tcpChain("elsewhere", nil)), `"elsewhere"`},
		{"a renamed cluster our listener cannot reach", cfgClusterJSON, db(cfgClusterJSON), dbClusterSpec("db-custom"), `upstream "db"'s listener: names Cluster "` + dbSNI},
		{"an EDS local cluster without endpoints", cfgLocalClusterJSON, local, dbClusterSpec("local_app"), `names ClusterLoadAssignment "local_app"`},
	}
	var g Generator
	good := snapshot(t, escapeHatchWorld(false)(), allEscapeHatches(), 1)
	first, err := g.Generate(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := snapshot(t, escapeHatchWorld(false)(), tc.svc(t, tc.spec), 1)
			res, err := Generate(snap)
			if !errors.Is(err, ErrInvalidEscapeHatch) || res != nil {
				t.Fatalf("Generate = %v, %v; want ErrInvalidEscapeHatch", res != nil, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.key) || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q: want %q and %q in it", msg, tc.key, tc.want)
			}
			if res, err := g.Generate(snap); !errors.Is(err, ErrInvalidEscapeHatch) || res != nil {
				t.Fatalf("Generator.Generate = %v, %v; want ErrInvalidEscapeHatch", res != nil, err)
			}
		})
	}
	// The failures left the Generator where the good snapshot put it.
	again, err := g.Generate(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, typeURL := range resourceTypes {
		for name, m := range first[typeURL] {
			if again[typeURL][name] != m {
				t.Errorf("%s %q was rebuilt after failed generations", shortType(typeURL), name)
			}
		}
	}
}

// TestHCMType: the constant names the connection manager's message.
func TestHCMType(t *testing.T) {
	if got := (&hcmv3.HttpConnectionManager{}).ProtoReflect().Descriptor().FullName(); got != hcmType {
		t.Fatalf("hcmType %s, want %s", hcmType, got)
	}
}
