package intentions

import (
	"net/http"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// ixn builds an intention as the state store returns it (precedence set).
func ixn(src, dst string, action structs.IntentionAction, perms ...*structs.IntentionPermission) *structs.Intention {
	return &structs.Intention{
		SourceNS: "default", SourceName: src, DestinationNS: "default", DestinationName: dst,
		SourceType: structs.IntentionSourceConsul, Action: action, Permissions: perms,
		Precedence: structs.IntentionPrecedence(src, dst),
	}
}

func perm(action structs.IntentionAction, h structs.IntentionHTTPPermission) *structs.IntentionPermission {
	return &structs.IntentionPermission{Action: action, HTTP: &h}
}

const (
	allow = structs.IntentionActionAllow
	deny  = structs.IntentionActionDeny
)

func TestEvaluateL4(t *testing.T) {
	cases := []struct {
		name         string
		ixns         structs.Intentions
		src, dst     string
		defaultAllow bool
		want         bool
		wantSource   string // source of the deciding intention, "" for the default
	}{
		{"no intentions, default allow", nil, "web", "db", true, true, ""},
		{"no intentions, default deny", nil, "web", "db", false, false, ""},
		{"exact allow", structs.Intentions{ixn("web", "db", allow)}, "web", "db", false, true, "web"},
		{"exact deny", structs.Intentions{ixn("web", "db", deny)}, "web", "db", true, false, "web"},
		{"unrelated intention ignored", structs.Intentions{ixn("api", "db", deny)}, "web", "db", true, true, ""},
		{"unrelated destination ignored", structs.Intentions{ixn("web", "cache", deny)}, "web", "db", true, true, ""},
		{"wildcard source allows", structs.Intentions{ixn("*", "db", allow)}, "web", "db", false, true, "*"},
		{"exact beats wildcard source (deny over allow)", structs.Intentions{ixn("*", "db", allow), ixn("web", "db", deny)}, "web", "db", true, false, "web"},
		{"exact beats wildcard source (allow over deny)", structs.Intentions{ixn("*", "db", deny), ixn("web", "db", allow)}, "web", "db", false, true, "web"},
		{"wildcard source covers others", structs.Intentions{ixn("*", "db", deny), ixn("web", "db", allow)}, "api", "db", true, false, "*"},
		{"exact destination beats wildcard destination", structs.Intentions{ixn("web", "*", allow), ixn("*", "db", deny)}, "web", "db", true, false, "*"},
		{"wildcard destination", structs.Intentions{ixn("web", "*", deny)}, "web", "anything", true, false, "web"},
		{"star to star is last", structs.Intentions{ixn("*", "*", deny), ixn("web", "*", allow)}, "web", "db", false, true, "web"},
		{"star to star applies", structs.Intentions{ixn("*", "*", deny)}, "x", "y", true, false, "*"},
		{"L7 intention denies a connection check", structs.Intentions{ixn("web", "db", "", perm(allow, structs.IntentionHTTPPermission{PathPrefix: "/"}))}, "web", "db", true, false, "web"},
		{"L7 intention shadows lower wildcard allow", structs.Intentions{ixn("*", "db", allow), ixn("web", "db", "", perm(allow, structs.IntentionHTTPPermission{PathPrefix: "/"}))}, "web", "db", true, false, "web"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Evaluate(tc.ixns, tc.src, tc.dst, tc.defaultAllow, nil)
			if d.Allowed != tc.want {
				t.Fatalf("allowed = %v, want %v (%+v)", d.Allowed, tc.want, d)
			}
			got := ""
			if d.Intention != nil {
				got = d.Intention.SourceName
			}
			if got != tc.wantSource {
				t.Fatalf("decided by %q, want %q", got, tc.wantSource)
			}
		})
	}
}

func TestEvaluateL7(t *testing.T) {
	l7 := ixn("web", "db", "",
		perm(deny, structs.IntentionHTTPPermission{PathPrefix: "/admin"}),
		perm(allow, structs.IntentionHTTPPermission{PathPrefix: "/api", Methods: []string{"GET", "HEAD"}}),
		perm(allow, structs.IntentionHTTPPermission{PathExact: "/healthz"}),
		perm(allow, structs.IntentionHTTPPermission{PathRegex: "/v[0-9]+/items", Header: []structs.IntentionHTTPHeaderPermission{{Name: "x-team", Exact: "blue"}}}),
		perm(deny, structs.IntentionHTTPPermission{Header: []structs.IntentionHTTPHeaderPermission{{Name: "x-debug", Present: true}}}),
		perm(allow, structs.IntentionHTTPPermission{Header: []structs.IntentionHTTPHeaderPermission{{Name: "x-env", Prefix: "PRO", IgnoreCase: true}, {Name: "x-block", Present: true, Invert: true}}}),
	)
	ixns := structs.Intentions{l7, ixn("*", "db", allow)}
	cases := []struct {
		name         string
		src          string
		req          Request
		defaultAllow bool
		want         bool
		wantPerm     int
	}{
		{"deny prefix first", "web", Request{Method: "GET", Path: "/admin/users"}, true, false, 0},
		{"allow GET api", "web", Request{Method: "GET", Path: "/api/x"}, false, true, 1},
		{"method mismatch falls to default deny", "web", Request{Method: "POST", Path: "/api/x"}, false, false, -1},
		{"method mismatch falls to default allow", "web", Request{Method: "POST", Path: "/api/x"}, true, true, -1},
		{"exact path", "web", Request{Method: "GET", Path: "/healthz"}, false, true, 2},
		{"exact path only", "web", Request{Method: "GET", Path: "/healthz/x"}, false, false, -1},
		{"regex and header", "web", Request{Method: "GET", Path: "/v2/items", Header: http.Header{"X-Team": {"blue"}}}, false, true, 3},
		{"regex is anchored", "web", Request{Method: "GET", Path: "/v2/items/1", Header: http.Header{"X-Team": {"blue"}}}, false, false, -1},
		{"header value mismatch", "web", Request{Method: "GET", Path: "/v2/items", Header: http.Header{"X-Team": {"red"}}}, false, false, -1},
		{"present header denies", "web", Request{Method: "GET", Path: "/x", Header: http.Header{"X-Debug": {""}}}, true, false, 4},
		{"prefix ignore case and inverted present", "web", Request{Method: "GET", Path: "/x", Header: http.Header{"X-Env": {"production"}}}, false, true, 5},
		{"inverted present fails when present", "web", Request{Method: "GET", Path: "/x", Header: http.Header{"X-Env": {"prod"}, "X-Block": {"1"}}}, false, false, -1},
		{"other source uses the wildcard L4 intention", "api", Request{Method: "DELETE", Path: "/admin"}, false, true, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			d := Evaluate(ixns, tc.src, "db", tc.defaultAllow, &req)
			if d.Allowed != tc.want || d.Permission != tc.wantPerm {
				t.Fatalf("allowed=%v perm=%d, want allowed=%v perm=%d", d.Allowed, d.Permission, tc.want, tc.wantPerm)
			}
		})
	}
}

func TestApplicableOrder(t *testing.T) {
	got := Applicable(structs.Intentions{
		ixn("*", "*", deny), ixn("web", "*", deny), ixn("*", "db", deny), ixn("web", "db", deny), ixn("api", "db", deny),
	}, "web", "db")
	want := []string{"web>db", "*>db", "web>*", "*>*"}
	if len(got) != len(want) {
		t.Fatalf("got %d intentions", len(got))
	}
	for i, x := range got {
		if s := x.SourceName + ">" + x.DestinationName; s != want[i] {
			t.Errorf("position %d = %s, want %s", i, s, want[i])
		}
	}
}
