package httpapi

import (
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
)

// TestConsulClientLegacyIntentions: the official client's deprecated
// ID-based intention calls (still used by older tools, e.g. Terraform's
// consul_intention) work against Trellis: create answers an ID, get,
// update and delete take it, and misuse gets Consul's statuses.
func TestConsulClientLegacyIntentions(t *testing.T) {
	c, _ := startRealServer(t)
	cn := c.Connect()

	id, _, err := cn.IntentionCreate(&api.Intention{SourceName: "web", DestinationName: "db",
		Action: api.IntentionActionAllow, Meta: map[string]string{"owner": "team-a"}}, nil)
	if err != nil || len(id) != 36 {
		t.Fatalf("create: %q %v", id, err)
	}
	got, _, err := cn.IntentionGet(id, nil)
	if err != nil || got == nil || got.ID != id || got.Action != api.IntentionActionAllow || got.Meta["owner"] != "team-a" ||
		got.CreatedAt.IsZero() || !got.UpdatedAt.Equal(got.CreatedAt) || got.Precedence != 9 || got.ModifyIndex == 0 {
		t.Fatalf("get: %+v %v", got, err)
	}
	if ok, _, err := cn.IntentionCheck(&api.IntentionCheck{Source: "web", Destination: "db"}, nil); err != nil || !ok {
		t.Fatalf("check: %v %v", ok, err)
	}

	// Update sends back what it read, changed; the ID and creation time stay.
	got.Action = api.IntentionActionDeny
	got.Description = "closed for maintenance"
	if _, err := cn.IntentionUpdate(got, nil); err != nil {
		t.Fatal(err)
	}
	upd, _, err := cn.IntentionGet(id, nil)
	if err != nil || upd.Action != api.IntentionActionDeny || upd.Description != "closed for maintenance" || !upd.CreatedAt.Equal(got.CreatedAt) {
		t.Fatalf("after update: %+v %v", upd, err)
	}
	if ok, _, err := cn.IntentionCheck(&api.IntentionCheck{Source: "web", Destination: "db"}, nil); err != nil || ok {
		t.Fatalf("check after the update to deny: %v %v", ok, err)
	}
	all, _, err := cn.Intentions(nil)
	if err != nil || len(all) != 1 || all[0].ID != id {
		t.Fatalf("list: %+v %v", all, err)
	}
	exact, _, err := cn.IntentionGetExact("web", "db", nil)
	if err != nil || exact == nil || exact.ID != id {
		t.Fatalf("exact: %+v %v", exact, err)
	}

	// Misuse.
	if ixn, _, err := cn.IntentionGet("00000000-0000-4000-8000-000000000000", nil); err != nil || ixn != nil {
		t.Fatalf("get of a missing ID: %+v %v (want nil: a 404)", ixn, err)
	}
	if _, _, err := cn.IntentionGet("not-a-uuid", nil); err == nil || !strings.Contains(err.Error(), "Unexpected response 400") {
		t.Fatalf("get of a malformed ID: %v", err)
	}
	if _, _, err := cn.IntentionCreate(&api.Intention{SourceName: "web", DestinationName: "db", Action: api.IntentionActionAllow}, nil); err == nil ||
		!strings.Contains(err.Error(), `defines "web" more than once`) {
		t.Fatalf("create of an existing pair: %v", err)
	}
	if _, err := cn.IntentionUpsert(&api.Intention{SourceName: "x", DestinationName: "cfg", Action: api.IntentionActionAllow}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cn.IntentionCreate(&api.Intention{SourceName: "y", DestinationName: "cfg", Action: api.IntentionActionAllow}, nil); err == nil ||
		!strings.Contains(err.Error(), "500 (cannot use legacy intention API to edit intentions with a destination of \"cfg\"") {
		t.Fatalf("legacy create beside a config-entry intention: %v", err)
	}
	if _, _, err := cn.IntentionCreate(&api.Intention{SourceNS: "team", SourceName: "y", DestinationName: "z", Action: api.IntentionActionAllow}, nil); err == nil ||
		!strings.Contains(err.Error(), "400 (Invalid SourceNS \"team\"") {
		t.Fatalf("create in a namespace: %v", err)
	}

	if _, err := cn.IntentionDelete(id, nil); err != nil {
		t.Fatal(err)
	}
	if ixn, _, err := cn.IntentionGet(id, nil); err != nil || ixn != nil {
		t.Fatalf("get after delete: %+v %v", ixn, err)
	}
	if _, err := cn.IntentionDelete(id, nil); err == nil || !strings.Contains(err.Error(), "500 (Cannot delete non-existent intention: '"+id+"')") {
		t.Fatalf("second delete: %v", err)
	}
}
