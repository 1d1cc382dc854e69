package remote

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// poolRPC sends every call over the wire to one server, as a client
// agent's router does: requests and replies go through the msgpack codec.
type poolRPC struct {
	pool *server.ConnPool
	addr string
}

func (p poolRPC) RPC(ctx context.Context, method string, args, reply any) error {
	return p.pool.Call(ctx, p.addr, method, args, reply)
}

func notifyOf[R any](src interface {
	Notify(ctx context.Context, req R, corr string, ch chan<- proxycfg.UpdateEvent) error
}, req R) dstest.NotifyFunc {
	return func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error {
		return src.Notify(ctx, req, corr, ch)
	}
}

// TestSourcesOverRealServer runs every remote data source against a real
// server over the internal RPC API (gRPC + msgpack): the first answer
// arrives, and a write through the API produces the new answer.
func TestSourcesOverRealServer(t *testing.T) {
	srv, addr := dstest.StartServer(t, "s1")
	pool := server.NewConnPool(server.ConnPoolConfig{})
	defer pool.Close()
	src, err := New(Config{RPC: poolRPC{pool: pool, addr: addr}, Datacenter: "dc1", MaxQueryTime: 30 * time.Second, RetryMin: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ds := src.DataSources(nil)
	q := structs.QueryOptions{Datacenter: "dc1"}

	cases := []struct {
		name    string
		notify  dstest.NotifyFunc
		initial func(t *testing.T, r any)
		change  func(t *testing.T)
		changed func(r any) bool
	}{
		{
			name:   "ca-roots",
			notify: notifyOf(ds.CARoots, &structs.DCSpecificRequest{QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedCARoots); x.ActiveRootID == "" || x.TrustDomain == "" {
					t.Fatalf("roots = %+v", x)
				}
			},
		},
		{
			name:   "intentions",
			notify: notifyOf(ds.Intentions, &structs.ServiceSpecificRequest{ServiceName: "api", QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedIntentions); x.Intentions == nil || len(x.Intentions) != 0 {
					t.Fatalf("intentions = %#v", x.Intentions)
				}
			},
			change: func(t *testing.T) {
				dstest.ApplyEntry(t, srv, &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "api",
					Sources: []*structs.SourceIntention{{Name: "web", Action: structs.IntentionActionAllow}}})
			},
			changed: func(r any) bool { x := r.(*structs.IndexedIntentions); return len(x.Intentions) == 1 },
		},
		{
			name:    "intention-upstreams",
			notify:  notifyOf(ds.IntentionUpstreams, &structs.ServiceSpecificRequest{ServiceName: "web", QueryOptions: q}),
			initial: func(t *testing.T, r any) {},
			change: func(t *testing.T) {
				dstest.Register(t, srv, "n1", &structs.NodeService{ID: "db", Service: "db", Port: 5432})
				dstest.Register(t, srv, "n1", dstest.Sidecar("db", 21001))
			},
			changed: func(r any) bool {
				x := r.(*structs.ServiceNames)
				return len(x.Services) == 1 && x.Services[0] == "db"
			},
		},
		{
			name:   "config-entry",
			notify: notifyOf(ds.ConfigEntry, &structs.ConfigEntryQuery{Kind: structs.ServiceDefaults, Name: "api", QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.ConfigEntryResponse); x.Entry != nil {
					t.Fatalf("entry = %+v", x.Entry)
				}
			},
			change: func(t *testing.T) {
				dstest.ApplyEntry(t, srv, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "api", Protocol: "http"})
			},
			changed: func(r any) bool {
				e, _ := r.(*structs.ConfigEntryResponse).Entry.(*structs.ServiceConfigEntry)
				return e != nil && e.Protocol == "http"
			},
		},
		{
			name:   "config-entry-list",
			notify: notifyOf(ds.ConfigEntryList, &structs.ConfigEntryQuery{Kind: structs.ServiceResolver, QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedConfigEntries); x.Entries == nil || len(x.Entries) != 0 {
					t.Fatalf("entries = %#v", x.Entries)
				}
			},
			change: func(t *testing.T) {
				dstest.ApplyEntry(t, srv, &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "api",
					Subsets: map[string]structs.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "v1"`}}})
			},
			changed: func(r any) bool {
				x := r.(*structs.IndexedConfigEntries)
				if len(x.Entries) != 1 {
					return false
				}
				e, _ := x.Entries[0].(*structs.ServiceResolverConfigEntry)
				return e != nil && e.Subsets["v1"].Filter != ""
			},
		},
		{
			name:   "resolved-service-config",
			notify: notifyOf(ds.ResolvedServiceConfig, &structs.ServiceConfigRequest{Name: "web", Upstreams: []string{"api"}, QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.ServiceConfigResponse); x.Protocol != "tcp" {
					t.Fatalf("config = %+v", x)
				}
			},
			change: func(t *testing.T) {
				dstest.ApplyEntry(t, srv, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal,
					Config: map[string]any{"local_connect_timeout_ms": 1000, "nested": map[string]any{"a": "b"}}})
				dstest.ApplyEntry(t, srv, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http",
					UpstreamConfig: &structs.UpstreamConfiguration{Overrides: []*structs.UpstreamConfig{{Name: "api", ConnectTimeoutMs: 2500}}}})
			},
			changed: func(r any) bool {
				x := r.(*structs.ServiceConfigResponse)
				api := x.UpstreamConfigs["api"]
				nested, _ := x.ProxyConfig["nested"].(map[string]any)
				return x.Protocol == "http" && x.ProxyConfig["protocol"] == "http" && nested["a"] == "b" && api != nil && api.ConnectTimeoutMs == 2500
			},
		},
		{
			name:   "discovery-chain",
			notify: notifyOf(ds.CompiledDiscoveryChain, &structs.DiscoveryChainRequest{Name: "web", EvaluateInDatacenter: "dc1", QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if c := r.(*structs.DiscoveryChainResponse).Chain; c == nil || len(c.Targets) != 1 {
					t.Fatalf("chain = %+v", c)
				}
			},
			change: func(t *testing.T) {
				dstest.ApplyEntry(t, srv, &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "web", ConnectTimeout: structs.Duration(7 * time.Second)})
			},
			changed: func(r any) bool { c := r.(*structs.DiscoveryChainResponse).Chain; return c != nil && !c.Default },
		},
		{
			name:   "health-subset",
			notify: notifyOf(ds.Health, &structs.ServiceSpecificRequest{ServiceName: "cache", Connect: true, QueryOptions: structs.QueryOptions{Datacenter: "dc1", Filter: `Service.Meta.version == "v1"`}}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedCheckServiceNodes); x.Nodes == nil || len(x.Nodes) != 0 {
					t.Fatalf("nodes = %#v", x.Nodes)
				}
			},
			change: func(t *testing.T) {
				sc := dstest.Sidecar("cache", 21002)
				sc.Meta = map[string]string{"version": "v1"}
				dstest.Register(t, srv, "n2", sc)
			},
			changed: func(r any) bool { return len(r.(*structs.IndexedCheckServiceNodes).Nodes) == 1 },
		},
		{
			name:    "service-list",
			notify:  notifyOf(ds.ServiceList, &structs.DCSpecificRequest{QueryOptions: q}),
			initial: func(t *testing.T, r any) {},
			change: func(t *testing.T) {
				dstest.Register(t, srv, "n3", &structs.NodeService{ID: "queue", Service: "queue", Port: 1})
			},
			changed: func(r any) bool { return r.(*structs.IndexedServices).Services["queue"] != nil },
		},
		{
			name:   "gateway-services",
			notify: notifyOf(ds.GatewayServices, &structs.ServiceSpecificRequest{ServiceName: "term", QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedGatewayServices); len(x.Services) != 0 {
					t.Fatalf("services = %+v", x.Services)
				}
			},
			change: func(t *testing.T) {
				dstest.ApplyEntry(t, srv, &structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "term",
					Services: []structs.LinkedService{{Name: "billing", CAFile: "/ca.pem"}}})
			},
			changed: func(r any) bool {
				x := r.(*structs.IndexedGatewayServices).Services
				return len(x) == 1 && x[0].Service == "billing" && x[0].CAFile == "/ca.pem" && x[0].GatewayKind == structs.ServiceKindTerminatingGateway
			},
		},
		{
			name:   "services-by-kind",
			notify: notifyOf(ds.ServicesByKind, &structs.ServiceKindRequest{Kind: structs.ServiceKindMeshGateway, QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedCheckServiceNodes); len(x.Nodes) != 0 {
					t.Fatalf("nodes = %+v", x.Nodes)
				}
			},
			change: func(t *testing.T) {
				dstest.Register(t, srv, "n4", &structs.NodeService{Kind: structs.ServiceKindMeshGateway, ID: "mgw", Service: "mesh-gateway", Port: 8443})
			},
			changed: func(r any) bool { return len(r.(*structs.IndexedCheckServiceNodes).Nodes) == 1 },
		},
		{
			name:   "datacenters",
			notify: notifyOf(ds.Datacenters, &structs.DCSpecificRequest{QueryOptions: q}),
			initial: func(t *testing.T, r any) {
				if x := r.(*proxycfg.DatacenterList); len(x.Datacenters) != 1 || x.Datacenters[0] != "dc1" {
					t.Fatalf("datacenters = %v", x.Datacenters)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sub := dstest.Watch(t, tc.name, tc.notify)
			tc.initial(t, sub.Next(t))
			if tc.change == nil {
				return
			}
			tc.change(t)
			for {
				if r := sub.Next(t); tc.changed(r) {
					return
				}
			}
		})
	}
}
