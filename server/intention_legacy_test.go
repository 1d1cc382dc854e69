package server

import (
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// legacyClient drives Intention.Apply and Intention.Get by ID.
type legacyClient struct {
	t *testing.T
	s *Server
}

func (c legacyClient) apply(op structs.IntentionOp, ixn *structs.Intention) (string, error) {
	var id string
	err := rpcErr(c.s, structs.MethodIntentionApply.Name(), &structs.IntentionRequest{Op: op, Intention: ixn}, &id)
	return id, err
}

func (c legacyClient) get(id string) (*structs.Intention, error) {
	var out structs.IndexedIntentions
	if err := rpcErr(c.s, structs.MethodIntentionGet.Name(), &structs.IntentionQueryRequest{IntentionID: id}, &out); err != nil {
		return nil, err
	}
	if len(out.Intentions) != 1 {
		c.t.Fatalf("get %s: %d intentions", id, len(out.Intentions))
	}
	return out.Intentions[0], nil
}

func (c legacyClient) mustGet(id string) *structs.Intention {
	c.t.Helper()
	ixn, err := c.get(id)
	if err != nil {
		c.t.Fatalf("get %s: %v", id, err)
	}
	return ixn
}

func (c legacyClient) mustCreate(src, dst string, action structs.IntentionAction, meta map[string]string) string {
	c.t.Helper()
	id, err := c.apply(structs.IntentionOpCreate, &structs.Intention{SourceName: src, DestinationName: dst, Action: action, Meta: meta})
	if err != nil {
		c.t.Fatalf("create %s -> %s: %v", src, dst, err)
	}
	return id
}

// entryOf returns the destination's stored entry, or nil.
func (c legacyClient) entryOf(dst string) *structs.ServiceIntentionsConfigEntry {
	c.t.Helper()
	e, _ := getEntry(c.t, c.s, structs.ServiceIntentions, dst, false)
	if e == nil {
		return nil
	}
	return e.(*structs.ServiceIntentionsConfigEntry)
}

// TestLegacyIntentionEndpoints: the deprecated ID-based intention API
// creates, reads, updates and deletes intentions stored as legacy sources
// of service-intentions entries, with Consul's rules and error texts, and
// a refused write changes nothing.
func TestLegacyIntentionEndpoints(t *testing.T) {
	c := legacyClient{t: t, s: startTestCluster(t, 1, false)[0].srv}

	// Create: the server picks the ID and the times; Meta is the
	// intention's own.
	before := time.Now().UTC()
	id := c.mustCreate("web", "db", "allow", map[string]string{"team": "a"})
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("create answered %q, want a random UUID", id)
	}
	got := c.mustGet(id)
	if got.ID != id || got.SourceName != "web" || got.DestinationName != "db" || got.Action != "allow" ||
		got.Precedence != 9 || got.SourceType != structs.IntentionSourceConsul || !maps.Equal(got.Meta, map[string]string{"team": "a"}) {
		t.Fatalf("get %+v", got)
	}
	if got.CreatedAt.Before(before.Add(-time.Second)) || !got.UpdatedAt.Equal(got.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("times: created %v updated %v (before %v)", got.CreatedAt, got.UpdatedAt, before)
	}
	var list structs.IndexedIntentions
	rpc(t, c.s, structs.MethodIntentionList, &structs.DCSpecificRequest{}, &list)
	if len(list.Intentions) != 1 || list.Intentions[0].ID != id {
		t.Fatalf("list %+v", list.Intentions)
	}
	var exact structs.IndexedIntentions
	rpc(t, c.s, structs.MethodIntentionGet, &structs.IntentionQueryRequest{Exact: &structs.IntentionQueryExact{SourceName: "web", DestinationName: "db"}}, &exact)
	if len(exact.Intentions) != 1 || exact.Intentions[0].ID != id {
		t.Fatalf("exact %+v", exact.Intentions)
	}

	// Refused writes, with Consul's texts; the entry stays as it was.
	stored := c.entryOf("db")
	refused := []struct {
		name string
		op   structs.IntentionOp
		ixn  *structs.Intention
		want string
	}{
		{"create twice", structs.IntentionOpCreate, &structs.Intention{SourceName: "web", DestinationName: "db", Action: "deny"}, `defines "web" more than once`},
		{"create with an ID", structs.IntentionOpCreate, &structs.Intention{ID: id, SourceName: "api", DestinationName: "db", Action: "deny"}, "ID must be empty when creating a new intention"},
		{"create without an action", structs.IntentionOpCreate, &structs.Intention{SourceName: "api", DestinationName: "db"}, "].Action must be set to 'allow' or 'deny'"},
		{"create with permissions", structs.IntentionOpCreate, &structs.Intention{SourceName: "api", DestinationName: "db", Permissions: []*structs.IntentionPermission{
			{Action: "allow", HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/"}}}}, "].Action must be set to 'allow' or 'deny'"},
		{"create without a source", structs.IntentionOpCreate, &structs.Intention{DestinationName: "db", Action: "allow"}, "SourceName and DestinationName must be set"},
		{"update of a missing ID", structs.IntentionOpUpdate, &structs.Intention{ID: "00000000-0000-4000-8000-000000000000", SourceName: "web", DestinationName: "db", Action: "deny"}, "Cannot modify non-existent intention: '00000000-0000-4000-8000-000000000000'"},
		{"update to another destination", structs.IntentionOpUpdate, &structs.Intention{ID: id, SourceName: "web", DestinationName: "other", Action: "deny"}, ErrIntentionDestinationChanged.Error()},
		{"delete of a missing ID", structs.IntentionOpDelete, &structs.Intention{ID: "nope"}, "Cannot delete non-existent intention: 'nope'"},
		{"unknown op", "rename", &structs.Intention{ID: id}, "Invalid Intention operation: rename"},
	}
	for _, tc := range refused {
		if _, err := c.apply(tc.op, tc.ixn); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if after := c.entryOf("db"); after.ModifyIndex != stored.ModifyIndex {
		t.Fatalf("a refused write changed the entry: %+v", after)
	}
	if _, err := c.get("00000000-0000-4000-8000-000000000000"); err == nil || err.Error() != "Intention not found" {
		t.Fatalf("get of a missing ID: %v", err)
	}

	// Update: everything but the ID, destination and creation time.
	time.Sleep(10 * time.Millisecond)
	if _, err := c.apply(structs.IntentionOpUpdate, &structs.Intention{ID: id, SourceName: "web", DestinationName: "db",
		Action: "deny", Description: "closed", Meta: map[string]string{"team": "b"}}); err != nil {
		t.Fatal(err)
	}
	upd := c.mustGet(id)
	if upd.Action != "deny" || upd.Description != "closed" || upd.Meta["team"] != "b" ||
		!upd.CreatedAt.Equal(got.CreatedAt) || !upd.UpdatedAt.After(got.UpdatedAt) {
		t.Fatalf("after update %+v (before %+v)", upd, got)
	}

	// The times are the server's, whatever the client sends.
	stale := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	id3, err := c.apply(structs.IntentionOpCreate, &structs.Intention{SourceName: "cache", DestinationName: "db", Action: "allow", CreatedAt: stale, UpdatedAt: stale})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.mustGet(id3); got.CreatedAt.Before(before) || got.UpdatedAt.Before(before) {
		t.Fatalf("create kept the client's times: %+v", got)
	}
	if _, err := c.apply(structs.IntentionOpDelete, &structs.Intention{ID: id3}); err != nil {
		t.Fatal(err)
	}

	// Delete by ID: the entry goes with its last source.
	id2 := c.mustCreate("api", "db", "allow", nil)
	if m := c.mustGet(id2).Meta; len(m) != 0 {
		t.Fatalf("meta of an intention created without: %v", m)
	}
	for i, del := range []string{id, id2} {
		if _, err := c.apply(structs.IntentionOpDelete, &structs.Intention{ID: del}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.get(del); err == nil {
			t.Fatalf("%s still there after its delete", del)
		}
		if e := c.entryOf("db"); (e == nil) != (i == 1) {
			t.Fatalf("after deleting %d of 2: entry %+v", i+1, e)
		}
	}
}

// TestLegacyAndConfigEntryIntentions: the ID-based API edits an entry only
// while every source of it is a legacy intention; a write through the
// exact or config-entry API turns legacy intentions into config-entry
// ones, unless one has Meta (which only a legacy intention can hold).
func TestLegacyAndConfigEntryIntentions(t *testing.T) {
	c := legacyClient{t: t, s: startTestCluster(t, 1, false)[0].srv}
	upsertExact := func(src, dst string) error {
		_, err := c.apply(structs.IntentionOpUpsert, &structs.Intention{SourceName: src, DestinationName: dst, Action: "allow"})
		return err
	}

	// An entry with a config-entry intention is not the legacy API's.
	if err := upsertExact("x", "svc"); err != nil {
		t.Fatal(err)
	}
	_, err := c.apply(structs.IntentionOpCreate, &structs.Intention{SourceName: "y", DestinationName: "svc", Action: "allow"})
	if want := `cannot use legacy intention API to edit intentions with a destination of "svc" after editing them via a service-intentions config entry`; err == nil || err.Error() != want {
		t.Fatalf("legacy create on a config entry: %v", err)
	}

	// An exact write converts the legacy intentions beside it.
	id := c.mustCreate("a", "conv", "allow", nil)
	if err := upsertExact("b", "conv"); err != nil {
		t.Fatal(err)
	}
	for _, src := range c.entryOf("conv").Sources {
		if src.LegacyID != "" || src.LegacyCreateTime != nil || src.LegacyMeta != nil {
			t.Fatalf("source %+v still legacy after an exact write", src)
		}
	}
	if _, err := c.get(id); err == nil {
		t.Fatal("a converted intention is still found by its ID")
	}

	// ... but not one with Meta, which the write would lose.
	c.mustCreate("a", "kept", "allow", map[string]string{"k": "v"})
	stored := c.entryOf("kept")
	if err := upsertExact("b", "kept"); err == nil || !strings.HasSuffix(err.Error(), "].LegacyMeta must be omitted") {
		t.Fatalf("exact write over a legacy intention with meta: %v", err)
	}
	if after := c.entryOf("kept"); after.ModifyIndex != stored.ModifyIndex {
		t.Fatal("a refused write changed the entry")
	}

	// A config-entry write with legacy IDs stores none (as Consul's).
	applyEntry(t, c.s, structs.ConfigEntryUpsert, &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: "plain",
		Sources: []*structs.SourceIntention{{Name: "web", Action: "allow", LegacyID: id}}})
	if src := c.entryOf("plain").Sources[0]; src.LegacyID != "" {
		t.Fatalf("config-entry write stored legacy ID %q", src.LegacyID)
	}
}
