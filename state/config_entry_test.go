package state

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/connect/discoverychain"
	"github.com/trellis-mesh/trellis/structs"
)

// configEntryFixture writes entries of several kinds, including an update
// and a delete, so that the config entries table and its index keys hold
// data (used by the snapshot tests).
func configEntryFixture(t *testing.T, s *Store, idx uint64) {
	t.Helper()
	for i, e := range []structs.ConfigEntry{
		&structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global", Config: map[string]interface{}{"protocol": "http"}},
		&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "web", ConnectTimeout: structs.Duration(3 * time.Second),
			Subsets: map[string]structs.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "v1"`}}},
		&structs.ServiceSplitterConfigEntry{Kind: structs.ServiceSplitter, Name: "web", Splits: []structs.ServiceSplit{{Weight: 100, ServiceSubset: "v1"}}},
		&structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "web", Sources: []*structs.SourceIntention{
			{Name: "api", Action: structs.IntentionActionAllow, Precedence: 9, Type: structs.IntentionSourceConsul}}},
		&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "gone", Protocol: "http"},
		&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http", Meta: map[string]string{"team": "a"}},
	} {
		must(t, s.EnsureConfigEntry(idx+uint64(i), e))
	}
	must(t, s.DeleteConfigEntry(idx+10, structs.ServiceDefaults, "gone"))
}

// restoreConfigEntries copies the config entries of a snapshot into a
// restore, as the FSM does.
func restoreConfigEntries(t *testing.T, sn *Snapshot, r *Restore) {
	t.Helper()
	entries, err := sn.ConfigEntries()
	must(t, err)
	for _, e := range entries {
		must(t, r.ConfigEntry(e))
	}
}

func sd(name, protocol string) *structs.ServiceConfigEntry {
	return &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: name, Protocol: protocol}
}

func TestConfigEntryCRUD(t *testing.T) {
	s := NewStore()
	idx, e, err := s.ConfigEntry(nil, structs.ServiceDefaults, "web")
	if err != nil || e != nil || idx != 0 {
		t.Fatalf("empty store: %d %v %v", idx, e, err)
	}
	in := sd("web", "http")
	must(t, s.EnsureConfigEntry(5, in))
	in.Protocol = "tcp" // the store keeps its own copy
	idx, e, err = s.ConfigEntry(nil, structs.ServiceDefaults, "WEB")
	must(t, err)
	got := e.(*structs.ServiceConfigEntry)
	if idx != 5 || got.Protocol != "http" || got.CreateIndex != 5 || got.ModifyIndex != 5 {
		t.Fatalf("read back %d %+v", idx, got)
	}
	got.Protocol = "grpc" // and hands out copies
	must(t, s.EnsureConfigEntry(7, sd("web", "grpc")))
	_, e, _ = s.ConfigEntry(nil, structs.ServiceDefaults, "web")
	if ri := e.GetRaftIndex(); ri.CreateIndex != 5 || ri.ModifyIndex != 7 {
		t.Fatalf("indexes after update %+v", ri)
	}
	must(t, s.EnsureConfigEntry(8, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global"}))

	idx, list, err := s.ConfigEntriesByKind(nil, structs.ServiceDefaults)
	if err != nil || idx != 7 || len(list) != 1 {
		t.Fatalf("by kind: %d %v %v", idx, list, err)
	}
	idx, list, err = s.ConfigEntriesByKind(nil, "")
	if err != nil || idx != 8 || len(list) != 2 || list[0].GetKind() != structs.ProxyDefaults {
		t.Fatalf("all: %d %v %v", idx, list, err)
	}

	must(t, s.DeleteConfigEntry(9, structs.ServiceDefaults, "web"))
	must(t, s.DeleteConfigEntry(10, structs.ServiceDefaults, "missing"))
	idx, e, _ = s.ConfigEntry(nil, structs.ServiceDefaults, "web")
	if e != nil || idx != 9 {
		t.Fatalf("after delete: %d %v", idx, e)
	}
	if err := s.EnsureConfigEntry(11, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults}); err == nil {
		t.Fatal("entry without a name stored")
	}
}

func TestConfigEntryCAS(t *testing.T) {
	s := NewStore()
	cas := func(idx, cidx uint64, e structs.ConfigEntry) bool {
		t.Helper()
		ok, err := s.EnsureConfigEntryCAS(idx, cidx, e)
		must(t, err)
		return ok
	}
	if !cas(2, 0, sd("web", "http")) {
		t.Fatal("create with cas=0 failed")
	}
	if cas(3, 0, sd("web", "grpc")) {
		t.Fatal("cas=0 over an existing entry succeeded")
	}
	if cas(4, 99, sd("web", "grpc")) {
		t.Fatal("stale cas succeeded")
	}
	if cas(5, 7, sd("missing", "grpc")) {
		t.Fatal("cas on a missing entry succeeded")
	}
	if !cas(6, 2, sd("web", "grpc")) {
		t.Fatal("matching cas failed")
	}
	delCAS := func(idx, cidx uint64, name string) bool {
		t.Helper()
		ok, err := s.DeleteConfigEntryCAS(idx, cidx, structs.ServiceDefaults, name)
		must(t, err)
		return ok
	}
	if delCAS(7, 2, "web") {
		t.Fatal("stale delete-cas succeeded")
	}
	if !delCAS(8, 123, "never-existed") {
		t.Fatal("delete-cas of a missing entry must succeed")
	}
	if !delCAS(9, 6, "web") {
		t.Fatal("matching delete-cas failed")
	}
	// Apply dispatches on the verb.
	e := sd("api", "http")
	ok, err := s.ConfigEntryApply(10, &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsertCAS, Entry: e})
	if err != nil || !ok {
		t.Fatalf("apply upsert-cas: %v %v", ok, err)
	}
	e.ModifyIndex = 3
	if ok, err := s.ConfigEntryApply(11, &structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS, Entry: e}); err != nil || ok {
		t.Fatalf("apply stale delete-cas: %v %v", ok, err)
	}
	if _, err := s.ConfigEntryApply(12, &structs.ConfigEntryRequest{Op: "bogus", Entry: e}); err == nil {
		t.Fatal("bogus op applied")
	}
}

func TestConfigEntryGraphValidation(t *testing.T) {
	router := &structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "web", Routes: []structs.ServiceRoute{{
		Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/api"}},
		Destination: &structs.ServiceRouteDestination{Service: "api"},
	}}}
	routerSelf := &structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "web", Routes: []structs.ServiceRoute{{
		Match: &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/api"}},
	}}}
	l7 := &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "web", Sources: []*structs.SourceIntention{{
		Name: "fe", Type: structs.IntentionSourceConsul, Precedence: 9,
		Permissions: []*structs.IntentionPermission{{Action: structs.IntentionActionAllow, HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/"}}},
	}}}
	cases := []struct {
		name  string
		setup []structs.ConfigEntry
		write structs.ConfigEntry // nil: delete del
		del   structs.ConfigEntryKindName
		want  string
	}{
		{name: "router on tcp", write: router,
			want: `discovery chain "web" uses a protocol "tcp" that does not permit advanced routing or splitting behavior`},
		{name: "router with http defaults", setup: []structs.ConfigEntry{sd("web", "http"), sd("api", "http")}, write: router},
		{name: "router with inconsistent upstream", setup: []structs.ConfigEntry{sd("web", "http")}, write: router,
			want: `discovery chain "web" uses inconsistent protocols; service "api" has "tcp" which is not "http"`},
		{name: "service-defaults back to tcp under a router", setup: []structs.ConfigEntry{sd("web", "http"), routerSelf},
			write: sd("web", "tcp"),
			want:  `discovery chain "web" uses a protocol "tcp" that does not permit advanced routing or splitting behavior`},
		{name: "linked service changes protocol", setup: []structs.ConfigEntry{sd("web", "http"), sd("api", "http"), router},
			write: sd("api", "grpc"),
			want:  `discovery chain "web" uses inconsistent protocols; service "api" has "grpc" which is not "http"`},
		{name: "deleting service-defaults under a router", setup: []structs.ConfigEntry{sd("web", "http"), routerSelf},
			del:  structs.ConfigEntryKindName{Kind: structs.ServiceDefaults, Name: "web"},
			want: `discovery chain "web" uses a protocol "tcp" that does not permit advanced routing or splitting behavior`},
		{name: "proxy-defaults protocol for everyone", setup: []structs.ConfigEntry{
			&structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global", Config: map[string]interface{}{"protocol": "http"}}, router}},
		{name: "proxy-defaults back to tcp", setup: []structs.ConfigEntry{
			&structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global", Config: map[string]interface{}{"protocol": "http"}}, router},
			write: &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global", Config: map[string]interface{}{"protocol": "tcp"}},
			want:  `discovery chain "web" uses a protocol "tcp" that does not permit advanced routing or splitting behavior`},
		{name: "redirect loop", setup: []structs.ConfigEntry{
			&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "a", Redirect: &structs.ServiceResolverRedirect{Service: "b"}}},
			write: &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "b", Redirect: &structs.ServiceResolverRedirect{Service: "a"}},
			want:  "detected circular resolver redirect: [a.default.default.dc1 -> b.default.default.dc1 -> a.default.default.dc1]"},
		{name: "L7 intention on tcp", write: l7,
			want: `service "web" has protocol "tcp", which is incompatible with L7 intentions permissions`},
		{name: "L7 intention on http", setup: []structs.ConfigEntry{sd("web", "http")}, write: l7},
		{name: "tcp defaults under an L7 intention", setup: []structs.ConfigEntry{sd("web", "http"), l7}, write: sd("web", "tcp"),
			want: `service "web" has protocol "tcp", which is incompatible with L7 intentions permissions`},
		{name: "ingress protocol mismatch", setup: []structs.ConfigEntry{sd("web", "http")},
			write: &structs.IngressGatewayConfigEntry{Kind: structs.IngressGateway, Name: "in", Listeners: []structs.IngressListener{{
				Port: 80, Protocol: "tcp", Services: []structs.IngressService{{Name: "web"}}}}},
			want: `service "web" has protocol "http", which does not match defined listener protocol "tcp"`},
		{name: "gateway name clash", setup: []structs.ConfigEntry{&structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "gw"}},
			write: &structs.IngressGatewayConfigEntry{Kind: structs.IngressGateway, Name: "gw"},
			want:  `cannot create a "ingress-gateway" config entry with name "gw", a "terminating-gateway" config entry with that name already exists`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore()
			for i, e := range tc.setup {
				must(t, s.EnsureConfigEntry(uint64(i+1), e))
			}
			before := s.LastIndex()
			var err error
			if tc.write != nil {
				err = s.EnsureConfigEntry(100, tc.write)
			} else {
				err = s.DeleteConfigEntry(100, tc.del.Kind, tc.del.Name)
			}
			if tc.want == "" {
				must(t, err)
				return
			}
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if s.LastIndex() != before {
				t.Fatal("a refused write changed the store")
			}
		})
	}
}

func TestConfigEntryWatches(t *testing.T) {
	s := NewStore()
	must(t, s.EnsureConfigEntry(1, sd("web", "http")))
	fired := func(read func(ws memdb.WatchSet), write func()) bool {
		ws := memdb.NewWatchSet()
		read(ws)
		write()
		return ws.Watch(time.After(50*time.Millisecond)) == false
	}
	getWeb := func(ws memdb.WatchSet) { _, _, _ = s.ConfigEntry(ws, structs.ServiceDefaults, "web") }
	listDefaults := func(ws memdb.WatchSet) { _, _, _ = s.ConfigEntriesByKind(ws, structs.ServiceDefaults) }
	if !fired(getWeb, func() { must(t, s.EnsureConfigEntry(2, sd("web", "grpc"))) }) {
		t.Error("get not woken by a write of its entry")
	}
	if fired(getWeb, func() { must(t, s.EnsureConfigEntry(3, sd("api", "grpc"))) }) {
		t.Error("get woken by another entry")
	}
	if !fired(listDefaults, func() { must(t, s.DeleteConfigEntry(4, structs.ServiceDefaults, "api")) }) {
		t.Error("list not woken by a delete of its kind")
	}
	if fired(listDefaults, func() {
		must(t, s.EnsureConfigEntry(5, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global"}))
	}) {
		t.Error("list woken by another kind")
	}
	chain := func(ws memdb.WatchSet) {
		_, _, _ = s.ServiceDiscoveryChain(ws, discoverychain.CompileRequest{ServiceName: "web", EvaluateInDatacenter: "dc1"})
	}
	if !fired(chain, func() {
		must(t, s.EnsureConfigEntry(6, &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "web", ConnectTimeout: structs.Duration(time.Second)}))
	}) {
		t.Error("chain not woken by a new resolver")
	}
}

func TestServiceDiscoveryChain(t *testing.T) {
	s := NewStore()
	configEntryFixture(t, s, 1)
	idx, chain, err := s.ServiceDiscoveryChain(nil, discoverychain.CompileRequest{
		ServiceName: "web", EvaluateInDatacenter: "dc2", EvaluateInTrustDomain: "abc.consul",
	})
	must(t, err)
	if idx != s.LastIndex() || chain.StartNode != "splitter:web.default.default" || chain.Protocol != "http" {
		t.Fatalf("chain %d %+v", idx, chain)
	}
	tgt := chain.Targets["v1.web.default.default.dc2"]
	if tgt == nil || tgt.SNI != "v1.web.default.dc2.internal.abc.consul" || tgt.ConnectTimeout.Duration() != 3*time.Second {
		t.Fatalf("targets %+v", chain.Targets)
	}
	_, _, err = s.ServiceDiscoveryChain(nil, discoverychain.CompileRequest{ServiceName: "web"})
	if err == nil || !strings.HasPrefix(err.Error(), "failed to compile discovery chain: ") {
		t.Fatalf("err = %v", err)
	}
}

func TestIntentionReads(t *testing.T) {
	s := NewStore()
	ixns := func(name string, srcs ...string) *structs.ServiceIntentionsConfigEntry {
		e := &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: name, Meta: map[string]string{"m": name}}
		for _, src := range srcs {
			e.Sources = append(e.Sources, &structs.SourceIntention{Name: src, Action: structs.IntentionActionAllow, Type: structs.IntentionSourceConsul})
		}
		must(t, e.Normalize())
		return e
	}
	must(t, s.EnsureConfigEntry(1, ixns("db", "web", "*")))
	must(t, s.EnsureConfigEntry(2, ixns("*", "web")))
	must(t, s.EnsureConfigEntry(3, ixns("cache", "api")))

	idx, all, err := s.Intentions(nil)
	must(t, err)
	var got []string
	for _, x := range all {
		got = append(got, x.SourceName+">"+x.DestinationName)
	}
	if want := []string{"api>cache", "web>db", "*>db", "web>*"}; idx != 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("list %d %v, want %v", idx, got, want)
	}
	if all[1].Meta["m"] != "db" || all[1].Precedence != 9 || all[1].CreateIndex != 1 || all[1].ID != "" {
		t.Fatalf("intention view %+v", all[1])
	}

	_, x, err := s.IntentionGetExact(nil, "web", "db")
	if err != nil || x == nil || x.Action != structs.IntentionActionAllow {
		t.Fatalf("exact: %+v %v", x, err)
	}
	if _, x, _ := s.IntentionGetExact(nil, "api", "db"); x != nil {
		t.Fatalf("exact miss returned %+v", x)
	}

	_, m, err := s.IntentionMatch(nil, structs.IntentionMatchDestination, []string{"db", "nothing"})
	must(t, err)
	if len(m) != 2 || len(m[0]) != 3 || m[0][0].SourceName != "web" || m[0][2].DestinationName != "*" || len(m[1]) != 1 {
		t.Fatalf("match by destination %v", m)
	}
	_, m, err = s.IntentionMatch(nil, structs.IntentionMatchSource, []string{"web"})
	must(t, err)
	if len(m) != 1 || len(m[0]) != 3 || m[0][0].DestinationName != "db" || m[0][1].SourceName != "*" {
		t.Fatalf("match by source %v", m[0])
	}
}

func TestConfigEntryRestore(t *testing.T) {
	src := NewStore()
	configEntryFixture(t, src, 1)
	dst := restoreFrom(t, src, false)
	i1, l1, err1 := src.ConfigEntriesByKind(nil, "")
	i2, l2, err2 := dst.ConfigEntriesByKind(nil, "")
	must(t, err1)
	must(t, err2)
	if i1 != i2 || !reflect.DeepEqual(l1, l2) || len(l1) != 5 {
		t.Fatalf("restored entries differ: %d %v / %d %v", i1, l1, i2, l2)
	}
	for _, k := range structs.ConfigEntryKinds {
		a, _, _ := src.ConfigEntriesByKind(nil, k)
		b, _, _ := dst.ConfigEntriesByKind(nil, k)
		if a != b {
			t.Errorf("kind %s index %d vs %d", k, a, b)
		}
	}
}
