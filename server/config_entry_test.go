package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func rpcErr(s *Server, method string, args, reply any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return s.RPC(ctx, method, args, reply)
}

func applyEntry(t *testing.T, s *Server, op structs.ConfigEntryOp, e structs.ConfigEntry) bool {
	t.Helper()
	var ok bool
	rpc(t, s, structs.MethodConfigEntryApply, &structs.ConfigEntryRequest{Op: op, Entry: e}, &ok)
	return ok
}

func getEntry(t *testing.T, s *Server, kind, name string, stale bool) (structs.ConfigEntry, uint64) {
	t.Helper()
	var out structs.ConfigEntryResponse
	rpc(t, s, structs.MethodConfigEntryGet, &structs.ConfigEntryQuery{Kind: kind, Name: name,
		QueryOptions: structs.QueryOptions{AllowStale: stale}}, &out)
	return out.Entry, out.Index
}

func TestConfigEntryEndpoints(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	web := func(protocol string) *structs.ServiceConfigEntry {
		return &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: protocol}
	}
	if !applyEntry(t, s, structs.ConfigEntryUpsert, web("HTTP")) {
		t.Fatal("upsert = false")
	}
	e, idx := getEntry(t, s, structs.ServiceDefaults, "web", false)
	stored := e.(*structs.ServiceConfigEntry)
	if stored.Protocol != "http" || stored.ModifyIndex == 0 || idx != stored.ModifyIndex {
		t.Fatalf("stored %+v at %d (normalized protocol expected)", stored, idx)
	}
	last := s.fsm.State().LastIndex()

	// An identical rewrite answers true without a Raft write, whatever its
	// CAS index; a repeated cas=0 create of the same content too.
	stale := web("http")
	stale.ModifyIndex = 1
	if !applyEntry(t, s, structs.ConfigEntryUpsertCAS, stale) || !applyEntry(t, s, structs.ConfigEntryUpsertCAS, web("http")) {
		t.Fatal("identical rewrite refused")
	}
	if got := s.fsm.State().LastIndex(); got != last {
		t.Fatalf("identical rewrite wrote (index %d -> %d)", last, got)
	}
	// A changed entry with a stale index loses.
	changed := web("grpc")
	changed.ModifyIndex = 1
	if applyEntry(t, s, structs.ConfigEntryUpsertCAS, changed) {
		t.Fatal("stale CAS succeeded")
	}
	changed.ModifyIndex = stored.ModifyIndex
	if !applyEntry(t, s, structs.ConfigEntryUpsertCAS, changed) {
		t.Fatal("matching CAS failed")
	}

	// Invalid entries are refused with Consul's message and change nothing.
	last = s.fsm.State().LastIndex()
	for _, tc := range []struct {
		entry structs.ConfigEntry
		want  string
	}{
		{&structs.ServiceSplitterConfigEntry{Kind: structs.ServiceSplitter, Name: "web", Splits: []structs.ServiceSplit{{Weight: 90}}},
			"the sum of all split weights must be 100, not 90.000000"},
		{&structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "other"}, `invalid name ("other"), only "global" is supported`},
		{&structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "db"},
			`discovery chain "db" uses a protocol "tcp" that does not permit advanced routing or splitting behavior`},
		{&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "db", Subsets: map[string]structs.ServiceResolverSubset{"v1": {Filter: "Service.Meta =="}}},
			`Filter for subset "v1" is not a valid expression: `},
	} {
		var ok bool
		err := rpcErr(s, structs.MethodConfigEntryApply.Name(), &structs.ConfigEntryRequest{Entry: tc.entry}, &ok)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.entry.GetKind(), err, tc.want)
		}
	}
	if got := s.fsm.State().LastIndex(); got != last {
		t.Fatalf("invalid entries changed the store (index %d -> %d)", last, got)
	}

	var list structs.IndexedConfigEntries
	rpc(t, s, structs.MethodConfigEntryList, &structs.ConfigEntryQuery{Kind: structs.ServiceDefaults}, &list)
	if len(list.Entries) != 1 || list.Kind != structs.ServiceDefaults {
		t.Fatalf("list %+v", list)
	}
	if err := rpcErr(s, structs.MethodConfigEntryList.Name(), &structs.ConfigEntryQuery{Kind: "bogus"}, &list); err == nil || err.Error() != "invalid config entry kind: bogus" {
		t.Fatalf("bogus kind: %v", err)
	}

	// Deletes: a missing entry succeeds, with or without CAS.
	var del structs.ConfigEntryDeleteResponse
	rpc(t, s, structs.MethodConfigEntryDelete, &structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS,
		Entry: &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "missing", RaftIndex: structs.RaftIndex{ModifyIndex: 9}}}, &del)
	if !del.Deleted {
		t.Fatal("delete-cas of a missing entry = false")
	}
	rpc(t, s, structs.MethodConfigEntryDelete, &structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS,
		Entry: &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", RaftIndex: structs.RaftIndex{ModifyIndex: 1}}}, &del)
	if del.Deleted {
		t.Fatal("stale delete-cas succeeded")
	}
	rpc(t, s, structs.MethodConfigEntryDelete, &structs.ConfigEntryRequest{Entry: &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web"}}, &del)
	if e, _ := getEntry(t, s, structs.ServiceDefaults, "web", false); !del.Deleted || e != nil {
		t.Fatalf("after delete: %v %+v", del.Deleted, e)
	}
}

func TestConfigEntryBlockingGet(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http"})
	_, idx := getEntry(t, s, structs.ServiceDefaults, "web", false)
	done := make(chan structs.ConfigEntryResponse, 1)
	go func() {
		var out structs.ConfigEntryResponse
		_ = rpcErr(s, structs.MethodConfigEntryGet.Name(), &structs.ConfigEntryQuery{Kind: structs.ServiceDefaults, Name: "web",
			QueryOptions: structs.QueryOptions{MinQueryIndex: idx, MaxQueryTime: 10 * time.Second}}, &out)
		done <- out
	}()
	// Let the query start waiting: a write before its first read would
	// move the kind's index and answer it at once, as in Consul.
	time.Sleep(300 * time.Millisecond)
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "other", Protocol: "http"})
	select {
	case out := <-done:
		t.Fatalf("woke on another entry: %+v", out)
	case <-time.After(300 * time.Millisecond):
	}
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "grpc"})
	select {
	case out := <-done:
		if out.Entry == nil || out.Entry.(*structs.ServiceConfigEntry).Protocol != "grpc" || out.Index <= idx {
			t.Fatalf("woke with %+v", out)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("blocking get did not wake")
	}
}

func TestIntentionEndpoints(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	upsert := func(src, dst string, action structs.IntentionAction, meta map[string]string) error {
		var out string
		return rpcErr(s, structs.MethodIntentionApply.Name(), &structs.IntentionRequest{Op: structs.IntentionOpUpsert,
			Intention: &structs.Intention{SourceName: src, DestinationName: dst, Action: action, Meta: meta}}, &out)
	}
	check := func(src, dst string) bool {
		t.Helper()
		var out structs.IntentionQueryCheckResponse
		rpc(t, s, structs.MethodIntentionCheck, &structs.IntentionQueryRequest{Check: &structs.IntentionQueryCheck{SourceName: src, DestinationName: dst}}, &out)
		return out.Allowed
	}
	if !check("web", "db") {
		t.Fatal("default policy is allow")
	}
	if err := upsert("web", "db", "deny", nil); err != nil {
		t.Fatal(err)
	}
	if err := upsert("*", "db", "allow", nil); err != nil {
		t.Fatal(err)
	}
	if check("web", "db") || !check("api", "db") {
		t.Fatal("precedence: exact deny must beat wildcard allow")
	}
	// Errors with Consul's texts, and nothing changes.
	if err := upsert("x", "new", "allow", map[string]string{"a": "b"}); err == nil || err.Error() != "Meta must not be specified" {
		t.Fatalf("meta: %v", err)
	}
	if err := upsert("x", "db", "maybe", nil); err == nil || !strings.HasPrefix(err.Error(), "Sources[") ||
		!strings.HasSuffix(err.Error(), "].Action must be set to 'allow' or 'deny'") {
		t.Fatalf("bad action: %v", err)
	}
	var out structs.IndexedIntentions
	rpc(t, s, structs.MethodIntentionList, &structs.DCSpecificRequest{}, &out)
	if len(out.Intentions) != 2 || out.Intentions[0].Precedence != 9 || out.Intentions[1].Precedence != 8 {
		t.Fatalf("list %+v", out.Intentions)
	}
	// Get exact, and the miss.
	rpc(t, s, structs.MethodIntentionGet, &structs.IntentionQueryRequest{Exact: &structs.IntentionQueryExact{SourceName: "web", DestinationName: "db"}}, &out)
	if len(out.Intentions) != 1 || out.Intentions[0].Action != "deny" {
		t.Fatalf("exact %+v", out.Intentions)
	}
	err := rpcErr(s, structs.MethodIntentionGet.Name(), &structs.IntentionQueryRequest{Exact: &structs.IntentionQueryExact{SourceName: "nope", DestinationName: "db"}}, &out)
	if err == nil || err.Error() != "Intention not found" {
		t.Fatalf("missing exact: %v", err)
	}
	// The entry holds both sources, highest precedence first.
	e, _ := getEntry(t, s, structs.ServiceIntentions, "db", false)
	if src := e.(*structs.ServiceIntentionsConfigEntry).Sources; len(src) != 2 || src[0].Name != "web" {
		t.Fatalf("entry sources %+v", src)
	}
	// Match by source.
	var m structs.IndexedIntentionMatches
	rpc(t, s, structs.MethodIntentionMatch, &structs.IntentionQueryRequest{Match: &structs.IntentionQueryMatch{
		Type: structs.IntentionMatchSource, Names: []string{"web", "zzz"}}}, &m)
	if len(m.Matches) != 2 || len(m.Matches[0]) != 2 || len(m.Matches[1]) != 1 {
		t.Fatalf("match %+v", m.Matches)
	}
	// L7 permissions deny a plain check.
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "api", Protocol: "http"})
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "api",
		Sources: []*structs.SourceIntention{{Name: "web", Permissions: []*structs.IntentionPermission{
			{Action: "allow", HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/"}}}}}})
	if check("web", "api") {
		t.Fatal("an L7 intention allowed a plain check")
	}
	// Deletes are idempotent; deleting the last source deletes the entry.
	var ignored string
	for _, src := range []string{"web", "*", "*"} {
		rpc(t, s, structs.MethodIntentionApply, &structs.IntentionRequest{Op: structs.IntentionOpDelete,
			Intention: &structs.Intention{SourceName: src, DestinationName: "db"}}, &ignored)
	}
	if e, _ := getEntry(t, s, structs.ServiceIntentions, "db", false); e != nil {
		t.Fatalf("entry left after its last source: %+v", e)
	}
	// Default deny.
	s.cfg.DefaultIntentionPolicy = IntentionPolicyDeny
	if check("web", "db") {
		t.Fatal("default deny allowed")
	}
}

func TestDiscoveryChainEndpoint(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global",
		Config: map[string]interface{}{"protocol": "http"}})
	applyEntry(t, s, structs.ConfigEntryUpsert, &structs.ServiceSplitterConfigEntry{Kind: structs.ServiceSplitter, Name: "web",
		Splits: []structs.ServiceSplit{{Weight: 50}, {Weight: 50, Service: "web-v2"}}})
	// The leader bootstraps the CA, and with it the trust domain, on its
	// own time: wait for it so the names below are final.
	deadline := time.Now().Add(10 * time.Second)
	for s.trustDomain() == "" {
		if time.Now().After(deadline) {
			t.Fatal("no trust domain")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var out structs.DiscoveryChainResponse
	rpc(t, s, structs.MethodDiscoveryChainGet, &structs.DiscoveryChainRequest{Name: "web"}, &out)
	c := out.Chain
	if c == nil || c.StartNode != "splitter:web.default.default" || c.Datacenter != "dc1" || len(c.Targets) != 2 || out.Index == 0 {
		t.Fatalf("chain %+v", out)
	}
	tgt := c.Targets["web-v2.default.default.dc1"]
	if td := s.trustDomain(); tgt == nil || tgt.SNI != "web-v2.default.dc1.internal."+td ||
		tgt.SpiffeID != fmt.Sprintf("spiffe://%s/ns/default/dc/dc1/svc/web-v2", td) {
		t.Fatalf("target %+v (trust domain %q)", tgt, td)
	}
	rpc(t, s, structs.MethodDiscoveryChainGet, &structs.DiscoveryChainRequest{Name: "web", EvaluateInDatacenter: "dc9", OverrideProtocol: "tcp"}, &out)
	if out.Chain.Datacenter != "dc9" || out.Chain.Protocol != "tcp" || out.Chain.CustomizationHash == "" {
		t.Fatalf("overridden chain %+v", out.Chain)
	}
	if err := rpcErr(s, structs.MethodDiscoveryChainGet.Name(), &structs.DiscoveryChainRequest{}, &out); err == nil {
		t.Fatal("chain without a name")
	}
}

func TestConfigEntriesReplicateAndSurviveRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster twice")
	}
	servers := startTestCluster(t, 3, true)
	leader := waitForLeader(t, servers, 10*time.Second)
	var follower *testServer
	for _, ts := range servers {
		if ts != leader {
			follower = ts
			break
		}
	}
	// Writes through a follower are forwarded to the leader.
	applyEntry(t, follower.srv, structs.ConfigEntryUpsert, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http"})
	applyEntry(t, follower.srv, structs.ConfigEntryUpsert, &structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "web",
		Routes: []structs.ServiceRoute{{Match: &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/x"}}}}})
	var ignored string
	rpc(t, follower.srv, structs.MethodIntentionApply, &structs.IntentionRequest{Op: structs.IntentionOpUpsert,
		Intention: &structs.Intention{SourceName: "api", DestinationName: "web", Action: "allow"}}, &ignored)

	waitForEntries := func(ts *testServer) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, _ := getEntry(t, ts.srv, structs.ServiceRouter, "web", true)
			i, _ := getEntry(t, ts.srv, structs.ServiceIntentions, "web", true)
			if r != nil && i != nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s lacks the entries", ts.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, ts := range servers {
		waitForEntries(ts)
	}

	// A full restart from the data dirs keeps everything.
	for _, ts := range servers {
		ts.stop(t)
	}
	for i, ts := range servers {
		var join []string
		if i > 0 {
			join = []string{fmt.Sprintf("127.0.0.1:%d", servers[0].serfPort)}
		}
		startTestServer(t, ts, 3, false, join)
	}
	waitForLeader(t, servers, 20*time.Second)
	for _, ts := range servers {
		waitForEntries(ts)
	}
	e, _ := getEntry(t, servers[2].srv, structs.ServiceDefaults, "web", false)
	if e == nil || e.(*structs.ServiceConfigEntry).Protocol != "http" {
		t.Fatalf("after restart: %+v", e)
	}
}

// TestConfigEntryListFilter: as Consul's, a service-defaults list takes
// ?filter= over the entries' fields; any other kind refuses it with
// Consul's text; a filter changes no stored entry.
func TestConfigEntryListFilter(t *testing.T) {
	s := startTestCluster(t, 1, false)[0].srv
	for _, e := range []structs.ConfigEntry{
		&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http"},
		&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "db", Protocol: "tcp"},
	} {
		var ok bool
		rpc(t, s, structs.MethodConfigEntryApply, &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert, Entry: e}, &ok)
	}
	for _, tc := range []struct {
		kind, filter string
		want         []string
		err          string
	}{
		{structs.ServiceDefaults, `Protocol == "http"`, []string{"web"}, ""},
		{structs.ServiceDefaults, `Name != web`, []string{"db"}, ""},
		{structs.ServiceDefaults, "", []string{"db", "web"}, ""},
		{structs.ProxyDefaults, `Mode == "transparent"`, nil, "filtering not supported for config entry kind=proxy-defaults"},
		{structs.ServiceDefaults, `Nope == x`, nil, `Failed to create boolean expression evaluator: Selector "Nope" is not valid`},
	} {
		var out structs.IndexedConfigEntries
		err := structs.MethodConfigEntryList.Call(context.Background(), s,
			&structs.ConfigEntryQuery{Kind: tc.kind, QueryOptions: structs.QueryOptions{Filter: tc.filter}}, &out)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s %q: err = %v, want %q", tc.kind, tc.filter, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %q: %v", tc.kind, tc.filter, err)
		}
		var names []string
		for _, e := range out.Entries {
			names = append(names, e.GetName())
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s %q: %v, want %v", tc.kind, tc.filter, names, tc.want)
		}
	}
}
