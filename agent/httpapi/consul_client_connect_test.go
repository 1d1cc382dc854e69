package httpapi

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/server"
)

// startRealServer runs a single in-memory server (its own leader) and the
// HTTP API over it, and returns an official Consul client for it.
func startRealServer(t *testing.T) (*api.Client, *server.Server) {
	t.Helper()
	c, _, srv := startRealServerURLWith(t, nil)
	return c, srv
}

// startRealServerURL is startRealServer, with the HTTP base URL too.
func startRealServerURL(t *testing.T) (*api.Client, string, *server.Server) {
	t.Helper()
	return startRealServerURLWith(t, nil)
}

// startRealServerWith is startRealServer with setup, when not nil, given
// the HTTP API's Config to complete.
func startRealServerWith(t *testing.T, setup func(*server.Server, *Config)) (*api.Client, *server.Server) {
	t.Helper()
	c, _, srv := startRealServerURLWith(t, setup)
	return c, srv
}

func startRealServerURLWith(t *testing.T, setup func(*server.Server, *Config)) (*api.Client, string, *server.Server) {
	t.Helper()
	return startRealServerConfig(t, nil, setup)
}

// startRealServerConfig is startRealServerURLWith with configure, when not
// nil, given the server's Config to complete.
func startRealServerConfig(t *testing.T, configure func(*server.Config), setup func(*server.Server, *Config)) (*api.Client, string, *server.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sc := server.Config{
		NodeName: "node1", NodeID: "00000000-0000-0000-0000-00000000000a", Datacenter: testDC,
		InMemory: true, Bootstrap: true, Listener: ln, Advertise: ln.Addr().(*net.TCPAddr),
	}
	if configure != nil {
		configure(&sc)
	}
	srv, err := server.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	deadline := time.Now().Add(10 * time.Second)
	for !srv.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cfg := Config{RPC: srv, NodeName: "node1", Datacenter: testDC}
	if setup != nil {
		setup(srv, &cfg)
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, url := officialClient(t, h)
	return c, url, srv
}

func TestConsulClientConfigEntries(t *testing.T) {
	c, _ := startRealServer(t)
	ce := c.ConfigEntries()

	ok, _, err := ce.Set(&api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: "web", Protocol: "http", Meta: map[string]string{"team": "a"}}, nil)
	if err != nil || !ok {
		t.Fatalf("set: %v %v", ok, err)
	}
	got, qm, err := ce.Get(api.ServiceDefaults, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	sd, isSD := got.(*api.ServiceConfigEntry)
	if !isSD || sd.Protocol != "http" || sd.Meta["team"] != "a" || sd.ModifyIndex == 0 || qm.LastIndex == 0 {
		t.Fatalf("get: %#v %+v", got, qm)
	}
	// The CAS quirk: an identical rewrite with a stale index succeeds; a
	// changed one fails.
	if ok, _, err := ce.CAS(&api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: "web", Protocol: "http", Meta: map[string]string{"team": "a"}}, 1, nil); err != nil || !ok {
		t.Fatalf("identical CAS: %v %v", ok, err)
	}
	if ok, _, err := ce.CAS(&api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: "web", Protocol: "grpc"}, 1, nil); err != nil || ok {
		t.Fatalf("stale CAS: %v %v", ok, err)
	}

	// Invalid entries: Consul's messages as 500s.
	for _, tc := range []struct {
		entry api.ConfigEntry
		want  string
	}{
		{&api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: "web", Splits: []api.ServiceSplit{{Weight: 90}}},
			"Unexpected response code: 500 (the sum of all split weights must be 100, not 90.000000)"},
		{&api.ServiceRouterConfigEntry{Kind: api.ServiceRouter, Name: "db"},
			`Unexpected response code: 500 (discovery chain "db" uses a protocol "tcp" that does not permit advanced routing or splitting behavior)`},
		{&api.ProxyConfigEntry{Kind: api.ProxyDefaults, Name: "local"},
			`Unexpected response code: 500 (invalid name ("local"), only "global" is supported)`},
	} {
		if _, _, err := ce.Set(tc.entry, nil); err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v, want %q", tc.entry.GetKind(), err, tc.want)
		}
	}

	// A routed, split, subsetted chain.
	for _, e := range []api.ConfigEntry{
		&api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: "api", Protocol: "http"},
		&api.ServiceResolverConfigEntry{Kind: api.ServiceResolver, Name: "api", DefaultSubset: "v1", ConnectTimeout: 3 * time.Second,
			Subsets: map[string]api.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "1"`}, "v2": {Filter: `Service.Meta.version == "2"`}}},
		&api.ServiceSplitterConfigEntry{Kind: api.ServiceSplitter, Name: "api", Splits: []api.ServiceSplit{{Weight: 90, ServiceSubset: "v1"}, {Weight: 10, ServiceSubset: "v2"}}},
		&api.ServiceRouterConfigEntry{Kind: api.ServiceRouter, Name: "web", Routes: []api.ServiceRoute{{
			Match:       &api.ServiceRouteMatch{HTTP: &api.ServiceRouteHTTPMatch{PathPrefix: "/api"}},
			Destination: &api.ServiceRouteDestination{Service: "api", RequestTimeout: 2 * time.Second},
		}}},
	} {
		if ok, _, err := ce.Set(e, nil); err != nil || !ok {
			t.Fatalf("set %s: %v %v", e.GetKind(), ok, err)
		}
	}
	list, _, err := ce.List(api.ServiceDefaults, nil)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	r, _, err := ce.Get(api.ServiceResolver, "api", nil)
	if err != nil || r.(*api.ServiceResolverConfigEntry).ConnectTimeout != 3*time.Second {
		t.Fatalf("resolver: %#v %v", r, err)
	}

	resp, _, err := c.DiscoveryChain().Get("web", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	chain := resp.Chain
	if chain.StartNode != "router:web.default.default" || chain.Protocol != "http" || len(chain.Nodes) != 5 {
		t.Fatalf("chain %+v", chain)
	}
	router := chain.Nodes[chain.StartNode]
	if len(router.Routes) != 2 || router.Routes[0].NextNode != "splitter:api.default.default" ||
		router.Routes[1].Definition.Match.HTTP.PathPrefix != "/" || router.Routes[0].Definition.Destination.RequestTimeout != 2*time.Second {
		t.Fatalf("router %+v", router)
	}
	v1 := chain.Targets["v1.api.default.default.dc1"]
	if v1 == nil || v1.ConnectTimeout != 3*time.Second || !strings.HasPrefix(v1.SNI, "v1.api.default.dc1.internal.") || v1.Subset.Filter == "" {
		t.Fatalf("targets %+v", chain.Targets)
	}
	// Overrides go by POST.
	resp, _, err = c.DiscoveryChain().Get("web", &api.DiscoveryChainOptions{OverrideProtocol: "tcp", EvaluateInDatacenter: "dc3"}, nil)
	if err != nil || resp.Chain.Protocol != "tcp" || resp.Chain.StartNode != "resolver:web.default.default.dc3" {
		t.Fatalf("overridden chain %+v %v", resp, err)
	}

	// Deletes: {} without CAS, the outcome with it.
	if _, err := ce.Delete(api.ServiceRouter, "web", nil); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := ce.DeleteCAS(api.ServiceDefaults, "web", 1, nil); err != nil || ok {
		t.Fatalf("stale delete-cas: %v %v", ok, err)
	}
	if ok, _, err := ce.DeleteCAS(api.ServiceDefaults, "never", 1, nil); err != nil || !ok {
		t.Fatalf("delete-cas of a missing entry: %v %v", ok, err)
	}
	_, _, err = ce.Get(api.ServiceRouter, "web", nil)
	if err == nil || err.Error() != `Unexpected response code: 404 (Config entry not found for "service-router" / "web")` {
		t.Fatalf("missing: %v", err)
	}
}

func TestConsulClientIntentions(t *testing.T) {
	c, _ := startRealServer(t)
	cn := c.Connect()
	check := func(src, dst string) bool {
		t.Helper()
		ok, _, err := cn.IntentionCheck(&api.IntentionCheck{Source: src, Destination: dst}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !check("web", "db") {
		t.Fatal("default allow expected")
	}
	if _, err := cn.IntentionUpsert(&api.Intention{SourceName: "web", DestinationName: "db", Action: api.IntentionActionDeny}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cn.IntentionUpsert(&api.Intention{SourceName: "*", DestinationName: "db", Action: api.IntentionActionAllow}, nil); err != nil {
		t.Fatal(err)
	}
	if check("web", "db") || !check("api", "db") {
		t.Fatal("exact deny must beat the wildcard allow")
	}
	ixn, _, err := cn.IntentionGetExact("web", "db", nil)
	if err != nil || ixn == nil || ixn.Precedence != 9 || ixn.Action != api.IntentionActionDeny || ixn.ID != "" || !ixn.CreatedAt.IsZero() {
		t.Fatalf("exact: %+v %v", ixn, err)
	}
	if ixn, _, err := cn.IntentionGetExact("nobody", "db", nil); err != nil || ixn != nil {
		t.Fatalf("missing exact: %+v %v", ixn, err)
	}
	all, _, err := cn.Intentions(nil)
	if err != nil || len(all) != 2 || all[0].SourceName != "web" || all[1].Precedence != 8 {
		t.Fatalf("list %+v %v", all, err)
	}
	m, _, err := cn.IntentionMatch(&api.IntentionMatch{By: api.IntentionMatchDestination, Names: []string{"db"}}, nil)
	if err != nil || len(m["db"]) != 2 {
		t.Fatalf("match %+v %v", m, err)
	}
	// Consul's errors.
	_, err = cn.IntentionUpsert(&api.Intention{SourceName: "x", DestinationName: "fresh", Action: api.IntentionActionAllow, Meta: map[string]string{"a": "b"}}, nil)
	if err == nil || err.Error() != "Unexpected response code: 500 (Meta must not be specified)" {
		t.Fatalf("meta: %v", err)
	}
	_, err = cn.IntentionUpsert(&api.Intention{SourceName: "x", DestinationName: "fresh", Action: "sometimes"}, nil)
	if err == nil || err.Error() != "Unexpected response code: 500 (Sources[0].Action must be set to 'allow' or 'deny')" {
		t.Fatalf("action: %v", err)
	}
	// The intentions are config entries.
	e, _, err := c.ConfigEntries().Get(api.ServiceIntentions, "db", nil)
	if err != nil || len(e.(*api.ServiceIntentionsConfigEntry).Sources) != 2 {
		t.Fatalf("entry %#v %v", e, err)
	}
	if _, err := cn.IntentionDeleteExact("web", "db", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cn.IntentionDeleteExact("web", "db", nil); err != nil {
		t.Fatal("deleting a missing intention must succeed:", err)
	}
	if !check("web", "db") {
		t.Fatal("the wildcard allow applies once the exact deny is gone")
	}
}

// TestConsulClientHealthIngress: /v1/health/ingress/<service> lists the
// instances of the ingress gateways exposing the service, by name or
// through a wildcard (which covers Connect services only), with their
// health, as Consul's Health().Ingress does.
func TestConsulClientHealthIngress(t *testing.T) {
	c, _ := startRealServer(t)
	for _, e := range []api.ConfigEntry{
		&api.ServiceConfigEntry{Kind: api.ServiceDefaults, Name: "web", Protocol: "http"},
		&api.IngressGatewayConfigEntry{Kind: api.IngressGateway, Name: "ing-named", Listeners: []api.IngressListener{
			{Port: 8080, Protocol: "http", Services: []api.IngressService{{Name: "web"}}}}},
		&api.IngressGatewayConfigEntry{Kind: api.IngressGateway, Name: "ing-wild", Listeners: []api.IngressListener{
			{Port: 9090, Protocol: "http", Services: []api.IngressService{{Name: "*"}}}}},
		&api.IngressGatewayConfigEntry{Kind: api.IngressGateway, Name: "ing-other", Listeners: []api.IngressListener{
			{Port: 7070, Protocol: "tcp", Services: []api.IngressService{{Name: "db"}}}}},
	} {
		if ok, _, err := c.ConfigEntries().Set(e, nil); err != nil || !ok {
			t.Fatalf("set %s: %v %v", e.GetName(), ok, err)
		}
	}
	register := func(node, addr string, svc *api.AgentService, status string) {
		t.Helper()
		reg := &api.CatalogRegistration{Node: node, Address: addr, Service: svc}
		if status != "" {
			reg.Checks = api.HealthChecks{{CheckID: svc.ID + "-check", Name: "alive", ServiceID: svc.ID, Status: status}}
		}
		if _, err := c.Catalog().Register(reg, nil); err != nil {
			t.Fatal(err)
		}
	}
	register("gw-1", "10.0.0.1", &api.AgentService{Kind: api.ServiceKindIngressGateway, ID: "ing-named", Service: "ing-named", Port: 8080}, api.HealthPassing)
	register("gw-2", "10.0.0.2", &api.AgentService{Kind: api.ServiceKindIngressGateway, ID: "ing-wild", Service: "ing-wild", Port: 9090}, api.HealthCritical)
	register("gw-3", "10.0.0.3", &api.AgentService{Kind: api.ServiceKindIngressGateway, ID: "ing-other", Service: "ing-other", Port: 7070}, "")
	// web is a Connect service (it has a sidecar), so the wildcard covers
	// it; legacy is not, so only gateways naming it would.
	register("app-1", "10.0.1.1", &api.AgentService{ID: "web", Service: "web", Port: 80}, "")
	register("app-1", "10.0.1.1", &api.AgentService{Kind: api.ServiceKindConnectProxy, ID: "web-sidecar-proxy", Service: "web-sidecar-proxy", Port: 21000,
		Proxy: &api.AgentServiceConnectProxyConfig{DestinationServiceName: "web"}}, "")
	register("app-1", "10.0.1.1", &api.AgentService{ID: "legacy", Service: "legacy", Port: 81}, "")

	ids := func(entries []*api.ServiceEntry) []string {
		out := []string{}
		for _, e := range entries {
			out = append(out, e.Node.Node+"/"+e.Service.ID)
		}
		return out
	}
	for _, tc := range []struct {
		service string
		passing bool
		want    []string
	}{
		{"web", false, []string{"gw-1/ing-named", "gw-2/ing-wild"}},
		{"web", true, []string{"gw-1/ing-named"}},
		{"db", false, []string{"gw-3/ing-other"}},
		{"legacy", false, []string{}},
		{"nothing", false, []string{}},
	} {
		entries, meta, err := c.Health().Ingress(tc.service, tc.passing, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(entries); strings.Join(got, ",") != strings.Join(tc.want, ",") || meta.LastIndex == 0 {
			t.Errorf("ingress for %s (passing %v): %v (index %d), want %v", tc.service, tc.passing, got, meta.LastIndex, tc.want)
		}
	}

	// A blocking read wakes when a gateway starts exposing the service.
	_, meta, err := c.Health().Ingress("legacy", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []string, 1)
	go func() {
		entries, _, err := c.Health().Ingress("legacy", false, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		done <- ids(entries)
	}()
	time.Sleep(50 * time.Millisecond)
	if ok, _, err := c.ConfigEntries().Set(&api.IngressGatewayConfigEntry{Kind: api.IngressGateway, Name: "ing-other", Listeners: []api.IngressListener{
		{Port: 7070, Protocol: "tcp", Services: []api.IngressService{{Name: "db"}}},
		{Port: 7071, Protocol: "tcp", Services: []api.IngressService{{Name: "legacy"}}}}}, nil); err != nil || !ok {
		t.Fatalf("update ing-other: %v %v", ok, err)
	}
	select {
	case got := <-done:
		if strings.Join(got, ",") != "gw-3/ing-other" {
			t.Fatalf("after the update: %v, want [gw-3/ing-other]", got)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the blocking read did not return")
	}
}
