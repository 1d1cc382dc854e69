package integration

import (
	"cmp"
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// badRegistrationCases are agent registrations Consul refuses, with 400
// unless status says otherwise, and a plain-text message naming what is
// wrong. mustMention lists words the message must contain
// (case-insensitively): the field, or Consul's exact text where
// CONSUL-COMPAT.md records it.
var badRegistrationCases = []struct {
	name        string
	path        string
	body        string
	mustMention []string
	status      int
}{
	{"missing name", "/v1/agent/service/register",
		`{"ID": "bad-noname", "Port": 8000}`, []string{"Missing service name"}, 0},
	{"port above 65535", "/v1/agent/service/register",
		`{"Name": "bad-port", "Port": 70000}`, []string{"port"}, 0},
	{"sidecar port above 65535", "/v1/agent/service/register",
		`{"Name": "bad-scport", "Port": 8000, "Connect": {"SidecarService": {"Port": 70000}}}`, []string{"port"}, 0},
	{"check of no known type", "/v1/agent/service/register",
		`{"Name": "bad-checktype", "Port": 8000, "Check": {"Name": "mystery", "Interval": "10s"}}`, []string{"check"}, 0},
	{"negative interval", "/v1/agent/service/register",
		`{"Name": "bad-interval", "Port": 8000, "Check": {"HTTP": "http://127.0.0.1:1/", "Interval": "-5s"}}`, []string{"interval"}, 0},
	{"negative interval in Checks", "/v1/agent/service/register",
		`{"Name": "bad-interval2", "Port": 8000, "Checks": [{"TTL": "10s"}, {"TCP": "127.0.0.1:1", "Interval": "-1s"}]}`, []string{"interval"}, 0},
	{"negative TTL", "/v1/agent/service/register",
		`{"Name": "bad-ttl", "Port": 8000, "Check": {"TTL": "-1s"}}`, []string{"ttl"}, 0},
	{"sidecar port used by another sidecar", "/v1/agent/service/register",
		`{"Name": "bad-dup", "Port": 8001, "Connect": {"SidecarService": {"Port": 21500}}}`, []string{"port"}, 0},
	{"bad check status", "/v1/agent/service/register",
		`{"Name": "bad-status", "Port": 8000, "Check": {"TTL": "10s", "Status": "sideways"}}`, []string{"status"}, 0},
	{"undecodable JSON", "/v1/agent/service/register",
		`{"Name": "bad-json", `, []string{"Request decode failed"}, 0},
	{"port of the wrong type", "/v1/agent/service/register",
		`{"Name": "bad-type", "Port": "eighty"}`, []string{"Request decode failed"}, 0},
	{"unparseable TTL", "/v1/agent/service/register",
		`{"Name": "bad-ttlparse", "Check": {"TTL": "soon"}}`, []string{"Request decode failed"}, 0},
	{"check register without a name", "/v1/agent/check/register",
		`{"ID": "bad-check-noname", "TTL": "10s"}`, []string{"Missing check name"}, 0},
	{"check register with a negative interval", "/v1/agent/check/register",
		`{"Name": "bad-check-interval", "HTTP": "http://127.0.0.1:1/", "Interval": "-1s"}`, []string{"interval"}, 0},
	// Consul answers 404 `ServiceID "x" does not exist` here.
	{"check register for an unknown service", "/v1/agent/check/register",
		`{"Name": "bad-check-svc", "TTL": "10s", "ServiceID": "no-such-service"}`, []string{"no-such-service"}, http.StatusNotFound},
}

// TestAgentBadInput: registrations a client agent must refuse get 400 with
// a message naming the field, and leave /v1/agent/services,
// /v1/agent/checks and the catalog exactly as they were.
func TestAgentBadInput(t *testing.T) {
	c, leader := startAgentCluster(t, agentClusterConfig{servers: 1, clients: 1})
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	client := c.Clients()[0]

	// The service whose sidecar holds port 21500, which "bad-dup" asks for.
	good := map[string]any{
		"Name": "good-a", "Port": 8000,
		"Connect": map[string]any{"SidecarService": map[string]any{"Port": 21500}},
	}
	if err := registerService(ctx, rc, client.HTTPAddr(), good); err != nil {
		t.Fatal(err)
	}
	// Registering the same definition again is not a conflict with itself.
	if err := registerService(ctx, rc, client.HTTPAddr(), good); err != nil {
		t.Fatalf("re-registering good-a with its own sidecar port: %v", err)
	}
	eventually(t, syncTimeout, "good-a in the catalog", func() error {
		return serviceInHealth(ctx, rc, leader.HTTPAddr(), "good-a", client.Node(), "good-a", nil, "")
	})
	before := agentStateJSON(ctx, t, rc, client.HTTPAddr())

	for _, tt := range badRegistrationCases {
		t.Run(tt.name, func(t *testing.T) {
			r, err := agentPut(ctx, rc, client.HTTPAddr(), tt.path, []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			want := cmp.Or(tt.status, http.StatusBadRequest)
			if r.Status != want {
				t.Errorf("PUT %s %s: %d %q, want %d", tt.path, tt.body, r.Status, r.Body, want)
				return
			}
			msg := strings.ToLower(string(r.Body))
			for _, w := range tt.mustMention {
				if !strings.Contains(msg, strings.ToLower(w)) {
					t.Errorf("PUT %s %s: message %q does not mention %q", tt.path, tt.body, r.Body, w)
				}
			}
		})
	}

	if after := agentStateJSON(ctx, t, rc, client.HTTPAddr()); !reflect.DeepEqual(before, after) {
		t.Errorf("agent state changed by refused registrations:\nbefore %v\nafter  %v", before, after)
	}
	var services map[string][]string
	if _, err := rc.getJSON(ctx, leader.HTTPAddr(), "/v1/catalog/services", &services); err != nil {
		t.Fatal(err)
	}
	for name := range services {
		if strings.HasPrefix(name, "bad-") {
			t.Errorf("catalog lists %s, refused by the agent", name)
		}
	}
}

// agentStateJSON reads /v1/agent/services as generic JSON, so that any
// change at all shows in a comparison, and the IDs of /v1/agent/checks.
// Check statuses and outputs are left out: the sidecar's TCP and alias
// checks run on their own schedule and may legitimately move in between.
func agentStateJSON(ctx context.Context, t *testing.T, rc *rawClient, addr string) map[string]any {
	t.Helper()
	var services any
	if _, err := rc.getJSON(ctx, addr, "/v1/agent/services", &services); err != nil {
		t.Fatal(err)
	}
	checks, err := agentChecks(ctx, rc, addr)
	if err != nil {
		t.Fatal(err)
	}
	ids := keysOf(checks)
	slices.Sort(ids)
	return map[string]any{"services": services, "check IDs": ids}
}
