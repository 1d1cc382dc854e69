package gen

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/trellis-mesh/trellis/connect/intentions"
	"github.com/trellis-mesh/trellis/structs"
)

// TestRBACMatchesIntentionSemantics interprets the generated RBAC rules as
// Envoy does and checks that, for every source, request and default
// policy, they decide exactly as the reference evaluator of intentions
// (connect/intentions, which the server's intention check uses) does.
func TestRBACMatchesIntentionSemantics(t *testing.T) {
	allow, deny := structs.IntentionActionAllow, structs.IntentionActionDeny
	perm := func(a structs.IntentionAction, h structs.IntentionHTTPPermission) *structs.IntentionPermission {
		return &structs.IntentionPermission{Action: a, HTTP: &h}
	}
	sets := map[string]structs.Intentions{
		"none": {},
		"l4 mixed": {
			intention("web", "db", allow), intention("api", "db", deny), intention("*", "db", allow),
		},
		"wildcard deny with exceptions": {
			intention("*", "db", deny), intention("web", "db", allow), intention("ops", "db", allow),
		},
		"wildcard destination": {
			intention("web", "*", deny), intention("*", "*", allow), intention("web", "db", allow),
		},
		"l7": {
			intention("web", "db", "",
				perm(deny, structs.IntentionHTTPPermission{PathExact: "/admin"}),
				perm(allow, structs.IntentionHTTPPermission{PathPrefix: "/", Methods: []string{"GET", "HEAD"}}),
				perm(deny, structs.IntentionHTTPPermission{PathRegex: "/v[0-9]+/.*"}),
				perm(allow, structs.IntentionHTTPPermission{Header: []structs.IntentionHTTPHeaderPermission{
					{Name: "x-role", Exact: "Admin", IgnoreCase: true},
					{Name: "x-env", Prefix: "prod", Invert: true},
				}}),
			),
			intention("ops", "db", allow),
			intention("*", "db", "", perm(allow, structs.IntentionHTTPPermission{PathPrefix: "/public/"})),
		},
	}
	sources := []string{"web", "api", "ops", "legacy"}
	requests := []*intentions.Request{
		{Method: "GET", Path: "/admin"},
		{Method: "GET", Path: "/x"},
		{Method: "POST", Path: "/x"},
		{Method: "POST", Path: "/v1/x"},
		{Method: "POST", Path: "/public/a"},
		{Method: "POST", Path: "/y", Header: http.Header{"X-Role": {"admin"}}},
		{Method: "POST", Path: "/y", Header: http.Header{"X-Role": {"admin"}, "X-Env": {"production"}}},
		{Method: "DELETE", Path: "/v2/y", Header: http.Header{"X-Role": {"ADMIN"}}},
	}
	for name, ixns := range sets {
		for _, defaultAllow := range []bool{true, false} {
			for _, http := range []bool{false, true} {
				rules := rbacRules(ixns, defaultAllow, http)
				for _, src := range sources {
					reqs := []*intentions.Request{nil}
					if http {
						reqs = requests
					}
					for _, req := range reqs {
						want := intentions.Evaluate(ixns, src, "db", defaultAllow, req).Allowed
						got := rbacAllows(t, rules, spiffeID(testTrustDomain, "dc2", src), req)
						if got != want {
							t.Errorf("%s, default allow %v, http %v: %s %s: RBAC allows %v, intentions %v",
								name, defaultAllow, http, src, reqString(req), got, want)
						}
					}
				}
			}
		}
	}
}

func reqString(r *intentions.Request) string {
	if r == nil {
		return "(connection)"
	}
	return fmt.Sprintf("%s %s %v", r.Method, r.Path, r.Header)
}

// rbacAllows evaluates RBAC rules for a peer identity and request (nil:
// a TCP connection) as Envoy's RBAC filters do.
func rbacAllows(t *testing.T, rules *rbacv3.RBAC, peer string, req *intentions.Request) bool {
	matched := false
	for _, p := range rules.GetPolicies() {
		principal := false
		for _, id := range p.GetPrincipals() {
			principal = principal || principalMatches(t, id, peer)
		}
		permitted := false
		for _, perm := range p.GetPermissions() {
			permitted = permitted || permissionMatches(t, perm, req)
		}
		if principal && permitted {
			matched = true
		}
	}
	if rules.GetAction() == rbacv3.RBAC_ALLOW {
		return matched
	}
	return !matched
}

func principalMatches(t *testing.T, p *rbacv3.Principal, peer string) bool {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Any:
		return true
	case *rbacv3.Principal_Authenticated_:
		return stringMatches(t, id.Authenticated.GetPrincipalName(), peer)
	case *rbacv3.Principal_AndIds:
		for _, sub := range id.AndIds.GetIds() {
			if !principalMatches(t, sub, peer) {
				return false
			}
		}
		return true
	case *rbacv3.Principal_NotId:
		return !principalMatches(t, id.NotId, peer)
	}
	t.Fatalf("principal %T not interpreted", p.GetIdentifier())
	return false
}

func permissionMatches(t *testing.T, p *rbacv3.Permission, req *intentions.Request) bool {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_Any:
		return true
	case *rbacv3.Permission_AndRules:
		for _, sub := range r.AndRules.GetRules() {
			if !permissionMatches(t, sub, req) {
				return false
			}
		}
		return true
	case *rbacv3.Permission_NotRule:
		return !permissionMatches(t, r.NotRule, req)
	case *rbacv3.Permission_UrlPath:
		if req == nil {
			t.Fatal("L7 permission in a network RBAC filter")
		}
		return stringMatches(t, r.UrlPath.GetPath(), req.Path)
	case *rbacv3.Permission_Header:
		if req == nil {
			t.Fatal("L7 permission in a network RBAC filter")
		}
		return headerMatches(t, r.Header, req)
	}
	t.Fatalf("permission %T not interpreted", p.GetRule())
	return false
}

func headerMatches(t *testing.T, hm *routev3.HeaderMatcher, req *intentions.Request) bool {
	var value string
	var present bool
	if hm.GetName() == ":method" {
		value, present = req.Method, true
	} else {
		var values []string
		values, present = req.Header[http.CanonicalHeaderKey(hm.GetName())]
		value = strings.Join(values, ",")
	}
	var ok bool
	switch s := hm.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		ok = present == s.PresentMatch
	case *routev3.HeaderMatcher_StringMatch:
		ok = present && stringMatches(t, s.StringMatch, value)
	default:
		t.Fatalf("header matcher %T not interpreted", s)
	}
	return ok != hm.GetInvertMatch()
}

func stringMatches(t *testing.T, m *matcherv3.StringMatcher, s string) bool {
	v := s
	fold := func(x string) string {
		if m.GetIgnoreCase() {
			return strings.ToLower(x)
		}
		return x
	}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(v) == fold(p.Exact)
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(v), fold(p.Prefix))
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(v), fold(p.Suffix))
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(v), fold(p.Contains))
	case *matcherv3.StringMatcher_SafeRegex:
		re, err := regexp.Compile(`^(?:` + p.SafeRegex.GetRegex() + `)$`)
		if err != nil {
			t.Fatalf("regex %q: %v", p.SafeRegex.GetRegex(), err)
		}
		return re.MatchString(v)
	}
	t.Fatalf("string matcher %T not interpreted", m.GetMatchPattern())
	return false
}
