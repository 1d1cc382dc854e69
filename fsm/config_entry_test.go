package fsm

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// populateConfigEntries applies config entry writes of several kinds
// through the FSM, starting at index idx, and returns the last index. Maps
// hold at most one key so that snapshots stay byte-for-byte reproducible.
func populateConfigEntries(t testing.TB, f *FSM, idx uint64) uint64 {
	t.Helper()
	steps := []struct {
		op    structs.ConfigEntryOp
		entry structs.ConfigEntry
		want  any
	}{
		{structs.ConfigEntryUpsert, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global",
			Config: map[string]interface{}{"protocol": "http"}}, true},
		{structs.ConfigEntryUpsert, &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "web",
			ConnectTimeout: structs.Duration(2 * time.Second), Subsets: map[string]structs.ServiceResolverSubset{"v1": {Filter: `Service.Meta.v == "1"`}}}, true},
		{structs.ConfigEntryUpsertCAS, &structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "web", Routes: []structs.ServiceRoute{{
			Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/v1"}},
			Destination: &structs.ServiceRouteDestination{ServiceSubset: "v1"},
		}}}, true},
		// A second create with cas=0 loses.
		{structs.ConfigEntryUpsertCAS, &structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "web"}, false},
		{structs.ConfigEntryUpsert, &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "web", Sources: []*structs.SourceIntention{
			{Name: "api", Type: structs.IntentionSourceConsul, Precedence: 9, Permissions: []*structs.IntentionPermission{
				{Action: structs.IntentionActionAllow, HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/", Methods: []string{"GET"}}}}},
		}}, true},
		{structs.ConfigEntryUpsert, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "tmp"}, true},
		{structs.ConfigEntryDelete, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "tmp"}, true},
		{structs.ConfigEntryUpsert, &structs.MeshConfigEntry{TransparentProxy: structs.TransparentProxyMeshConfig{MeshDestinationsOnly: true}}, true},
	}
	for i, s := range steps {
		got := apply(t, f, idx+uint64(i), structs.ConfigEntryRequestType, &structs.ConfigEntryRequest{Op: s.op, Entry: s.entry})
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d (%s %s): got %#v, want %#v", i, s.op, s.entry.GetKind(), got, s.want)
		}
	}
	return idx + uint64(len(steps)) - 1
}

func TestConfigEntryCommands(t *testing.T) {
	f := New(Config{})
	last := populateConfigEntries(t, f, 1)
	st := f.State()
	idx, e, err := st.ConfigEntry(nil, structs.ServiceRouter, "web")
	if err != nil || e == nil || e.GetRaftIndex().CreateIndex != 3 || idx != 3 {
		t.Fatalf("router: %d %+v %v", idx, e, err)
	}
	if _, e, _ := st.ConfigEntry(nil, structs.ServiceDefaults, "tmp"); e != nil {
		t.Fatal("deleted entry still there")
	}

	// An invalid graph is an error and changes nothing.
	before := st.LastIndex()
	got := apply(t, f, last+1, structs.ConfigEntryRequestType, &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert,
		Entry: &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: "global", Config: map[string]interface{}{"protocol": "tcp"}}})
	err, ok := got.(error)
	if !ok || !strings.Contains(err.Error(), "does not permit advanced routing") {
		t.Fatalf("tcp under a router = %#v", got)
	}
	if st.LastIndex() != before {
		t.Fatal("refused write changed the store")
	}
	// A stale delete-cas is false; a delete-cas of a missing entry true.
	stale := &structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "web", RaftIndex: structs.RaftIndex{ModifyIndex: 1}}
	if got := apply(t, f, last+2, structs.ConfigEntryRequestType, &structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS, Entry: stale}); got != false {
		t.Fatalf("stale delete-cas = %#v", got)
	}
	missing := &structs.ServiceSplitterConfigEntry{Kind: structs.ServiceSplitter, Name: "nope", RaftIndex: structs.RaftIndex{ModifyIndex: 5}}
	if got := apply(t, f, last+3, structs.ConfigEntryRequestType, &structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS, Entry: missing}); got != true {
		t.Fatalf("delete-cas of a missing entry = %#v", got)
	}
	if got := apply(t, f, last+4, structs.ConfigEntryRequestType, &structs.ConfigEntryRequest{Op: "bogus", Entry: stale}); got == nil {
		t.Fatal("bogus op accepted")
	}
	// A command without an entry is an error, not a panic.
	if _, ok := apply(t, f, last+5, structs.ConfigEntryRequestType, &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert}).(error); !ok {
		t.Fatal("command without an entry accepted")
	}
}

func TestConfigEntrySnapshot(t *testing.T) {
	src := New(Config{})
	populateConfigEntries(t, src, populate(t, src)+1)
	data := snapshotBytes(t, src)
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	for _, kind := range append([]string{""}, structs.ConfigEntryKinds...) {
		i1, l1, e1 := src.State().ConfigEntriesByKind(nil, kind)
		i2, l2, e2 := dst.State().ConfigEntriesByKind(nil, kind)
		if e1 != nil || e2 != nil || i1 != i2 || !reflect.DeepEqual(l1, l2) {
			t.Fatalf("kind %q: %d %#v vs %d %#v (%v %v)", kind, i1, l1, i2, l2, e1, e2)
		}
	}
	_, all, _ := dst.State().ConfigEntriesByKind(nil, "")
	if len(all) != 5 {
		t.Fatalf("restored %d entries, want 5", len(all))
	}
	if again := snapshotBytes(t, dst); !bytes.Equal(again, data) {
		t.Fatal("snapshot of the restored store differs from the original")
	}
}
