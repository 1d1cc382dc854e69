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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		NodeName: "node1", NodeID: "00000000-0000-0000-0000-00000000000a", Datacenter: testDC,
		InMemory: true, Bootstrap: true, Listener: ln, Advertise: ln.Addr().(*net.TCPAddr),
	})
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
	h, err := New(Config{RPC: srv, NodeName: "node1", Datacenter: testDC})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := officialClient(t, h)
	return c, srv
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
