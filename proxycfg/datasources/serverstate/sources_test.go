package serverstate

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// quiet is how long a test waits to be sure that no event follows an
// unrelated write.
const quiet = 150 * time.Millisecond

// fixture is a real state store written to directly (as the FSM would),
// and the sources reading it.
type fixture struct {
	t     *testing.T
	store atomic.Pointer[state.Store]
	idx   uint64
	src   *Sources
}

func newFixture(t *testing.T, policy string) *fixture {
	f := &fixture{t: t}
	f.store.Store(state.NewStore())
	src, err := New(Config{Store: f.store.Load, Datacenter: "dc1", DefaultIntentionPolicy: policy, RetryMin: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.src = src
	t.Cleanup(src.Close)
	return f
}

func (f *fixture) next() uint64 { f.idx++; return f.idx }

func (f *fixture) entry(e structs.ConfigEntry) {
	f.t.Helper()
	if err := e.Normalize(); err != nil {
		f.t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		f.t.Fatal(err)
	}
	if err := f.store.Load().EnsureConfigEntry(f.next(), e); err != nil {
		f.t.Fatal(err)
	}
}

// register registers a service instance on node (with a passing check).
func (f *fixture) register(node string, svc *structs.NodeService) {
	f.t.Helper()
	err := f.store.Load().EnsureRegistration(f.next(), &structs.RegisterRequest{
		Node: node, Address: "10.0.0.1", Service: svc,
		Checks: structs.HealthChecks{{Node: node, CheckID: "chk:" + svc.ID, Name: "c", Status: structs.HealthPassing, ServiceID: svc.ID}},
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func sidecar(dest string, meta map[string]string) *structs.NodeService {
	return &structs.NodeService{
		Kind: structs.ServiceKindConnectProxy, ID: dest + "-sidecar-proxy", Service: dest + "-sidecar-proxy", Port: 21000, Meta: meta,
		Proxy: structs.ConnectProxyConfig{DestinationServiceName: dest, DestinationServiceID: dest},
	}
}

func (f *fixture) rootsAndConfig(cluster, rootID string) {
	f.t.Helper()
	_, err := f.store.Load().CASetRootsAndConfig(f.next(), &structs.CARequest{
		Roots:       structs.CARoots{{ID: rootID, Name: "root", RootCert: "PEM", Active: true}},
		SigningKeys: []*structs.CASigningKey{{RootID: rootID, PrivateKey: "KEY"}},
		Config:      &structs.CAConfiguration{ClusterID: cluster, Provider: "consul"},
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func q() structs.QueryOptions { return structs.QueryOptions{Datacenter: "dc1"} }

// TestSourcesFollowTheStore runs every data source against a real store:
// the current value arrives first, a relevant write sends a new value,
// and a write that changes nothing the question depends on sends nothing.
func TestSourcesFollowTheStore(t *testing.T) {
	cases := []struct {
		name      string
		setup     func(f *fixture)
		notify    func(s *Sources) dstest.NotifyFunc
		initial   func(t *testing.T, r any)
		change    func(f *fixture)
		changed   func(t *testing.T, r any)
		unrelated func(f *fixture)
	}{
		{
			name: "ca-roots",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).CARoots, &structs.DCSpecificRequest{QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedCARoots); len(x.Roots) != 0 || x.ActiveRootID != "" {
					t.Fatalf("roots before the CA = %+v", x)
				}
			},
			change: func(f *fixture) { f.rootsAndConfig("c1", "r1") },
			changed: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedCARoots); x.ActiveRootID != "r1" || x.TrustDomain != "c1.consul" || len(x.Roots) != 1 {
					t.Fatalf("roots = %+v", x)
				}
			},
			unrelated: func(f *fixture) { f.register("n1", &structs.NodeService{ID: "db", Service: "db", Port: 1}) },
		},
		{
			name: "intentions",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).Intentions, &structs.ServiceSpecificRequest{ServiceName: "api", QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedIntentions); x.Intentions == nil || len(x.Intentions) != 0 {
					t.Fatalf("intentions = %#v, want empty", x.Intentions)
				}
			},
			change: func(f *fixture) { f.entry(intentionsEntry("api", "web", structs.IntentionActionAllow)) },
			changed: func(t *testing.T, r any) {
				x := r.(*structs.IndexedIntentions)
				if len(x.Intentions) != 1 || x.Intentions[0].SourceName != "web" || x.Intentions[0].Action != structs.IntentionActionAllow {
					t.Fatalf("intentions = %+v", x.Intentions)
				}
			},
			unrelated: func(f *fixture) { f.entry(intentionsEntry("db", "web", structs.IntentionActionDeny)) },
		},
		{
			name: "intention-upstreams",
			setup: func(f *fixture) {
				for _, name := range []string{"api", "db"} {
					f.register("n1", &structs.NodeService{ID: name, Service: name, Port: 8080})
					f.register("n1", sidecar(name, nil))
				}
			},
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).IntentionUpstreams, &structs.ServiceSpecificRequest{ServiceName: "web", QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) { wantNames(t, r, "api", "db") },
			change:  func(f *fixture) { f.entry(intentionsEntry("db", "web", structs.IntentionActionDeny)) },
			changed: func(t *testing.T, r any) { wantNames(t, r, "api") },
			// A service without Connect endpoints is no upstream.
			unrelated: func(f *fixture) { f.register("n2", &structs.NodeService{ID: "legacy", Service: "legacy", Port: 1}) },
		},
		{
			name: "config-entry",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).ConfigEntry, &structs.ConfigEntryQuery{Kind: structs.MeshConfig, Name: structs.MeshConfigMesh, QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.ConfigEntryResponse); x.Entry != nil {
					t.Fatalf("mesh entry = %+v, want none", x.Entry)
				}
			},
			change: func(f *fixture) { f.entry(&structs.MeshConfigEntry{Meta: map[string]string{"v": "1"}}) },
			changed: func(t *testing.T, r any) {
				if x, _ := r.(*structs.ConfigEntryResponse).Entry.(*structs.MeshConfigEntry); x == nil || x.Meta["v"] != "1" {
					t.Fatalf("mesh entry = %+v", r.(*structs.ConfigEntryResponse).Entry)
				}
			},
			unrelated: func(f *fixture) { f.entry(serviceDefaults("db", "http", nil)) },
		},
		{
			name: "config-entry-list",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).ConfigEntryList, &structs.ConfigEntryQuery{Kind: structs.ServiceResolver, QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedConfigEntries); len(x.Entries) != 0 {
					t.Fatalf("resolvers = %+v", x.Entries)
				}
			},
			change: func(f *fixture) {
				f.entry(&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "api", ConnectTimeout: structs.Duration(3 * time.Second)})
			},
			changed: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedConfigEntries); len(x.Entries) != 1 || x.Entries[0].GetName() != "api" {
					t.Fatalf("resolvers = %+v", x.Entries)
				}
			},
			unrelated: func(f *fixture) { f.entry(serviceDefaults("db", "http", nil)) },
		},
		{
			name: "resolved-service-config",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).ResolvedServiceConfig, &structs.ServiceConfigRequest{Name: "web", Upstreams: []string{"api"}, QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.ServiceConfigResponse); x.Protocol != "tcp" || x.ProxyConfig != nil || x.UpstreamConfigs != nil {
					t.Fatalf("config = %+v", x)
				}
			},
			change: func(f *fixture) {
				f.entry(&structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal, Config: map[string]any{"protocol": "http", "k": "v"}})
				f.entry(serviceDefaults("web", "", &structs.UpstreamConfiguration{
					Defaults:  &structs.UpstreamConfig{ConnectTimeoutMs: 1000},
					Overrides: []*structs.UpstreamConfig{{Name: "api", ConnectTimeoutMs: 2500, Protocol: "grpc"}},
				}))
			},
			changed: func(t *testing.T, r any) {
				x := r.(*structs.ServiceConfigResponse)
				if x.Protocol != "http" || x.ProxyConfig["k"] != "v" {
					t.Fatalf("config = %+v", x)
				}
				api := x.UpstreamConfigs["api"]
				if api == nil || api.ConnectTimeoutMs != 2500 || api.Protocol != "grpc" || x.UpstreamDefaults == nil || x.UpstreamDefaults.ConnectTimeoutMs != 1000 {
					t.Fatalf("upstream configs = %+v, defaults %+v", x.UpstreamConfigs, x.UpstreamDefaults)
				}
			},
			unrelated: func(f *fixture) { f.entry(serviceDefaults("db", "http", nil)) },
		},
		{
			name: "discovery-chain",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).CompiledDiscoveryChain, &structs.DiscoveryChainRequest{Name: "api", EvaluateInDatacenter: "dc1", QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if c := r.(*structs.DiscoveryChainResponse).Chain; c == nil || !c.Default || len(c.Targets) != 1 {
					t.Fatalf("chain = %+v", c)
				}
			},
			change: func(f *fixture) {
				f.entry(serviceDefaults("api", "http", nil))
				f.entry(serviceDefaults("api-v2", "http", nil))
				f.entry(&structs.ServiceSplitterConfigEntry{Kind: structs.ServiceSplitter, Name: "api", Splits: []structs.ServiceSplit{
					{Weight: 90}, {Weight: 10, Service: "api-v2"},
				}})
			},
			changed: func(t *testing.T, r any) {
				if c := r.(*structs.DiscoveryChainResponse).Chain; c == nil || c.Default || len(c.Targets) != 2 {
					t.Fatalf("chain = %+v", c)
				}
			},
			// Moves the config entries index every chain reports, but
			// changes nothing api's chain consults.
			unrelated: func(f *fixture) { f.entry(serviceDefaults("db", "http", nil)) },
		},
		{
			name: "health-connect",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).Health, &structs.ServiceSpecificRequest{ServiceName: "api", Connect: true, QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) { wantNodes(t, r) },
			change:  func(f *fixture) { f.register("n1", sidecar("api", nil)) },
			changed: func(t *testing.T, r any) { wantNodes(t, r, "api-sidecar-proxy") },
			unrelated: func(f *fixture) {
				f.register("n1", &structs.NodeService{ID: "api", Service: "api", Port: 8080})
			},
		},
		{
			name: "health-subset-filter",
			setup: func(f *fixture) {
				f.register("n1", sidecar("api", map[string]string{"version": "v1"}))
			},
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).Health, &structs.ServiceSpecificRequest{ServiceName: "api", Connect: true,
					QueryOptions: structs.QueryOptions{Datacenter: "dc1", Filter: `Service.Meta.version == "v2"`}})
			},
			initial: func(t *testing.T, r any) { wantNodes(t, r) },
			change:  func(f *fixture) { f.register("n2", sidecar("api", map[string]string{"version": "v2"})) },
			changed: func(t *testing.T, r any) { wantNodes(t, r, "api-sidecar-proxy") },
			// Another v1 instance: outside the subset.
			unrelated: func(f *fixture) { f.register("n3", sidecar("api", map[string]string{"version": "v1"})) },
		},
		{
			name: "service-list",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).ServiceList, &structs.DCSpecificRequest{QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedServices); len(x.Services) != 0 {
					t.Fatalf("services = %v", x.Services)
				}
			},
			change: func(f *fixture) { f.register("n1", &structs.NodeService{ID: "api", Service: "api", Port: 1}) },
			changed: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedServices); len(x.Services) != 1 || x.Services["api"] == nil {
					t.Fatalf("services = %v", x.Services)
				}
			},
			unrelated: func(f *fixture) { f.entry(serviceDefaults("db", "http", nil)) },
		},
		{
			name: "gateway-services-ingress",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).GatewayServices, &structs.ServiceSpecificRequest{ServiceName: "ingress", QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) {
				if x := r.(*structs.IndexedGatewayServices); x.Services == nil || len(x.Services) != 0 {
					t.Fatalf("gateway services = %#v", x.Services)
				}
			},
			change: func(f *fixture) {
				f.entry(&structs.IngressGatewayConfigEntry{Kind: structs.IngressGateway, Name: "ingress", Listeners: []structs.IngressListener{
					{Port: 9090, Protocol: "tcp", Services: []structs.IngressService{{Name: "db"}}},
					{Port: 8080, Protocol: "tcp", Services: []structs.IngressService{{Name: "api"}}},
				}})
			},
			changed: func(t *testing.T, r any) {
				x := r.(*structs.IndexedGatewayServices)
				if len(x.Services) != 2 || x.Services[0].Service != "api" || x.Services[0].Port != 8080 || x.Services[1].Service != "db" ||
					x.Services[0].GatewayKind != structs.ServiceKindIngressGateway {
					t.Fatalf("gateway services = %+v", x.Services)
				}
			},
			unrelated: func(f *fixture) { f.entry(serviceDefaults("web", "http", nil)) },
		},
		{
			name: "gateway-services-terminating-wildcard",
			setup: func(f *fixture) {
				f.register("n1", &structs.NodeService{ID: "legacy", Service: "legacy", Port: 1})
				f.entry(&structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "term", Services: []structs.LinkedService{
					{Name: "*"}, {Name: "billing", SNI: "billing.example"},
				}})
			},
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).GatewayServices, &structs.ServiceSpecificRequest{ServiceName: "term", QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) { wantGatewayServices(t, r, "billing", "legacy") },
			change: func(f *fixture) {
				f.register("n2", &structs.NodeService{ID: "mainframe", Service: "mainframe", Port: 1})
			},
			changed: func(t *testing.T, r any) {
				x := wantGatewayServices(t, r, "billing", "legacy", "mainframe")
				if x[0].SNI != "billing.example" || x[0].FromWildcard || !x[1].FromWildcard {
					t.Fatalf("explicit link lost its settings: %+v", x)
				}
			},
			// A sidecar is no service to link.
			unrelated: func(f *fixture) { f.register("n1", sidecar("web", nil)) },
		},
		{
			name: "services-by-kind",
			notify: func(s *Sources) dstest.NotifyFunc {
				return notify(s.DataSources(nil).ServicesByKind, &structs.ServiceKindRequest{Kind: structs.ServiceKindMeshGateway, QueryOptions: q()})
			},
			initial: func(t *testing.T, r any) { wantNodes(t, r) },
			change: func(f *fixture) {
				f.register("n1", &structs.NodeService{Kind: structs.ServiceKindMeshGateway, ID: "mgw", Service: "mesh-gateway", Port: 8443})
			},
			changed: func(t *testing.T, r any) { wantNodes(t, r, "mgw") },
			// Wakes the services-table watch; the answer is the same.
			unrelated: func(f *fixture) { f.register("n2", &structs.NodeService{ID: "api", Service: "api", Port: 1}) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "allow")
			if tc.setup != nil {
				tc.setup(f)
			}
			sub := dstest.Watch(t, tc.name, tc.notify(f.src))
			tc.initial(t, sub.Next(t))
			tc.change(f)
			// Several writes may each wake the watch: the last value
			// must be the expected one, and then nothing more comes.
			tc.changed(t, latest(t, sub))
			tc.unrelated(f)
			sub.None(t, quiet)
		})
	}
}

// latest waits for a result, then for the results that follow it within
// quiet, and returns the last one.
func latest(t *testing.T, sub *dstest.Sub) any {
	t.Helper()
	last := sub.Next(t)
	for {
		select {
		case ev := <-sub.Ch:
			if ev.Err != nil {
				t.Fatalf("%s: error event: %v", sub.Corr, ev.Err)
			}
			last = ev.Result
		case <-time.After(quiet):
			return last
		}
	}
}

// notify adapts any data source to dstest.NotifyFunc.
func notify[R any](src interface {
	Notify(ctx context.Context, req R, corr string, ch chan<- proxycfg.UpdateEvent) error
}, req R) dstest.NotifyFunc {
	return func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error {
		return src.Notify(ctx, req, corr, ch)
	}
}

func intentionsEntry(dest, src string, action structs.IntentionAction) *structs.ServiceIntentionsConfigEntry {
	return &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: dest, Sources: []*structs.SourceIntention{
		{Name: src, Action: action, Type: structs.IntentionSourceConsul},
	}}
}

func serviceDefaults(name, protocol string, up *structs.UpstreamConfiguration) *structs.ServiceConfigEntry {
	return &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: name, Protocol: protocol, UpstreamConfig: up}
}

func wantNames(t *testing.T, r any, want ...string) {
	t.Helper()
	got := r.(*structs.ServiceNames).Services
	if len(got) != len(want) {
		t.Fatalf("services = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("services = %v, want %v", got, want)
		}
	}
}

// wantNodes checks the service IDs of a health result, in order.
func wantNodes(t *testing.T, r any, ids ...string) {
	t.Helper()
	x := r.(*structs.IndexedCheckServiceNodes)
	if x.Nodes == nil {
		t.Fatal("nil node list: want empty")
	}
	if len(x.Nodes) != len(ids) {
		t.Fatalf("%d instances, want %v", len(x.Nodes), ids)
	}
	for i, id := range ids {
		if x.Nodes[i].Service.ID != id {
			t.Fatalf("instance %d = %s, want %s", i, x.Nodes[i].Service.ID, id)
		}
	}
}

func wantGatewayServices(t *testing.T, r any, names ...string) []*structs.GatewayService {
	t.Helper()
	x := r.(*structs.IndexedGatewayServices).Services
	if len(x) != len(names) {
		t.Fatalf("gateway services = %+v, want %v", x, names)
	}
	for i, n := range names {
		if x[i].Service != n {
			t.Fatalf("gateway services = %+v, want %v", x, names)
		}
	}
	return x
}

// TestSameQuestionSharesOneQuery checks the deduplication: equal requests
// share one read loop, which stops with its last subscriber.
func TestSameQuestionSharesOneQuery(t *testing.T) {
	f := newFixture(t, "")
	h := f.src.DataSources(nil).Health
	req := func() *structs.ServiceSpecificRequest {
		return &structs.ServiceSpecificRequest{ServiceName: "api", Connect: true, QueryOptions: q()}
	}
	// Buffered, as the manager's are: the source sends to one watcher
	// after the other, in no set order.
	a := dstest.WatchBuffered(t, "a", 4, notify(h, req()))
	b := dstest.WatchBuffered(t, "b", 4, notify(h, req()))
	other := dstest.Watch(t, "other", notify(h, &structs.ServiceSpecificRequest{ServiceName: "db", Connect: true, QueryOptions: q()}))
	for _, s := range []*dstest.Sub{a, b, other} {
		wantNodes(t, s.Next(t))
	}
	if st := f.src.Stats(); st.Queries != 2 || st.Subscribers != 3 || st.QueriesStarted != 2 {
		t.Fatalf("stats = %+v, want 2 queries for 3 subscribers", st)
	}
	f.register("n1", sidecar("api", nil))
	wantNodes(t, a.Next(t), "api-sidecar-proxy")
	wantNodes(t, b.Next(t), "api-sidecar-proxy")
	other.None(t, quiet)

	// A late subscriber gets the current value at once.
	c := dstest.Watch(t, "c", notify(h, req()))
	wantNodes(t, c.Next(t), "api-sidecar-proxy")

	a.Cancel()
	b.Cancel()
	c.Cancel()
	dstest.WaitFor(t, "the api query to stop", func() bool { return f.src.Stats().Queries == 1 })
}

// TestRestoredStoreIsFollowed checks that a snapshot restore (a new store,
// the old one abandoned) makes running queries read the new store.
func TestRestoredStoreIsFollowed(t *testing.T) {
	f := newFixture(t, "")
	sub := dstest.Watch(t, "svc", notify(f.src.DataSources(nil).ServiceList, &structs.DCSpecificRequest{QueryOptions: q()}))
	sub.Next(t)
	old := f.store.Load()
	f.store.Store(state.NewStore())
	f.register("n1", &structs.NodeService{ID: "api", Service: "api", Port: 1})
	sub.None(t, quiet) // the old store does not know
	old.Abandon()
	if x := sub.Next(t).(*structs.IndexedServices); x.Services["api"] == nil {
		t.Fatalf("services after restore = %v", x.Services)
	}
}

// TestRequestsRefusedOrFailed covers Notify's refusals (unusable requests)
// and a question the store cannot answer (another datacenter), which is a
// failure event, not a refusal.
func TestRequestsRefusedOrFailed(t *testing.T) {
	f := newFixture(t, "")
	ds := f.src.DataSources(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan proxycfg.UpdateEvent)
	for name, err := range map[string]error{
		"health without name":  ds.Health.Notify(ctx, &structs.ServiceSpecificRequest{}, "x", ch),
		"bad filter":           ds.Health.Notify(ctx, &structs.ServiceSpecificRequest{ServiceName: "a", QueryOptions: structs.QueryOptions{Filter: "=="}}, "x", ch),
		"unknown kind":         ds.ConfigEntry.Notify(ctx, &structs.ConfigEntryQuery{Kind: "nope", Name: "x"}, "x", ch),
		"list without kind":    ds.ConfigEntryList.Notify(ctx, &structs.ConfigEntryQuery{}, "x", ch),
		"chain without name":   ds.CompiledDiscoveryChain.Notify(ctx, &structs.DiscoveryChainRequest{}, "x", ch),
		"config without name":  ds.ResolvedServiceConfig.Notify(ctx, &structs.ServiceConfigRequest{}, "x", ch),
		"kind without kind":    ds.ServicesByKind.Notify(ctx, &structs.ServiceKindRequest{}, "x", ch),
		"gateway without name": ds.GatewayServices.Notify(ctx, &structs.ServiceSpecificRequest{}, "x", ch),
	} {
		if !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: err = %v, want ErrInvalidRequest", name, err)
		}
	}
	remote := dstest.Watch(t, "dc2", notify(ds.Health, &structs.ServiceSpecificRequest{ServiceName: "api", QueryOptions: structs.QueryOptions{Datacenter: "dc2"}}))
	if err := remote.NextErr(t); !errors.Is(err, ErrRemoteDatacenter) {
		t.Fatalf("dc2 err = %v", err)
	}
	dcs := dstest.Watch(t, "dcs", notify(ds.Datacenters, &structs.DCSpecificRequest{QueryOptions: q()}))
	if x := dcs.Next(t).(*proxycfg.DatacenterList); len(x.Datacenters) != 1 || x.Datacenters[0] != "dc1" {
		t.Fatalf("datacenters = %v", x.Datacenters)
	}
	f.src.Close()
	if err := ds.CARoots.Notify(ctx, &structs.DCSpecificRequest{}, "x", ch); !errors.Is(err, ErrClosed) {
		t.Fatalf("Notify after Close = %v", err)
	}
}
