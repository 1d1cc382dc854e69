// Package intentions decides whether a connection (L4) or a request (L7)
// from one service to another is allowed, given the intentions that apply
// and the default policy, exactly as Consul does:
//
//   - Of the intentions whose source and destination match (by name or the
//     "*" wildcard), only the one with the highest precedence counts (9
//     exact to exact, 8 "*" to exact, 6 exact to "*", 5 "*" to "*").
//   - An L4 intention (no permissions) allows or denies by its action.
//   - An intention with L7 permissions denies a plain connection check
//     (Consul's /v1/connect/intentions/check cannot know the requests that
//     will be sent). For a request, the first permission whose HTTP match
//     holds decides; when none matches, the default policy decides.
//   - Without a matching intention, the default policy decides.
//
// The package is pure and shared by the server (intention checks) and the
// proxy configuration (Envoy RBAC generation).
package intentions

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Request holds the attributes of an HTTP request that L7 permissions match
// on.
type Request struct {
	Method string
	Path   string
	// Header is matched by canonical name (http.Header.Get semantics).
	Header http.Header
}

// Decision is the outcome of an evaluation and why.
type Decision struct {
	Allowed bool
	// Intention is the intention that applied, nil when the default policy
	// decided for lack of one.
	Intention *structs.Intention
	// Permission is the index of the L7 permission that decided, or -1.
	Permission int
	// HasPermissions is set when the applying intention has L7
	// permissions.
	HasPermissions bool
	// DefaultAllow is the default policy the evaluation used.
	DefaultAllow bool
}

// Matches reports whether an intention applies to a connection from source
// to destination.
func Matches(ixn *structs.Intention, source, destination string) bool {
	return nameMatches(ixn.SourceName, source) && nameMatches(ixn.DestinationName, destination)
}

func nameMatches(pattern, name string) bool {
	return pattern == structs.WildcardSpecifier || pattern == name
}

// Applicable returns the intentions that apply to a connection from source
// to destination, highest precedence first.
func Applicable(ixns structs.Intentions, source, destination string) structs.Intentions {
	var out structs.Intentions
	for _, ixn := range ixns {
		if ixn != nil && Matches(ixn, source, destination) {
			out = append(out, ixn)
		}
	}
	structs.SortIntentions(out)
	return out
}

// Evaluate decides a connection from source to destination (req nil) or an
// HTTP request over it. ixns may hold unrelated intentions; they are
// ignored.
func Evaluate(ixns structs.Intentions, source, destination string, defaultAllow bool, req *Request) Decision {
	d := Decision{Allowed: defaultAllow, Permission: -1, DefaultAllow: defaultAllow}
	applicable := Applicable(ixns, source, destination)
	if len(applicable) == 0 {
		return d
	}
	ixn := applicable[0]
	d.Intention = ixn
	if len(ixn.Permissions) == 0 {
		d.Allowed = ixn.Action == structs.IntentionActionAllow
		return d
	}
	d.HasPermissions = true
	if req == nil {
		d.Allowed = false
		return d
	}
	for i, p := range ixn.Permissions {
		if p != nil && PermissionMatches(p.HTTP, req) {
			d.Permission = i
			d.Allowed = p.Action == structs.IntentionActionAllow
			return d
		}
	}
	d.Allowed = defaultAllow
	return d
}

// PermissionMatches reports whether an HTTP request satisfies every
// criterion of an L7 permission (path, headers, methods). A nil match
// matches nothing.
func PermissionMatches(h *structs.IntentionHTTPPermission, req *Request) bool {
	if h == nil || req == nil {
		return false
	}
	switch {
	case h.PathExact != "" && req.Path != h.PathExact:
		return false
	case h.PathPrefix != "" && !strings.HasPrefix(req.Path, h.PathPrefix):
		return false
	case h.PathRegex != "" && !fullMatch(h.PathRegex, req.Path):
		return false
	}
	for _, hm := range h.Header {
		if !headerMatches(hm, req.Header) {
			return false
		}
	}
	if len(h.Methods) > 0 {
		ok := false
		for _, m := range h.Methods {
			if strings.EqualFold(m, req.Method) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// headerMatches applies one header criterion, as Envoy's header matcher
// does: an absent header matches nothing but an inverted criterion.
func headerMatches(hm structs.IntentionHTTPHeaderPermission, h http.Header) bool {
	values, present := h[http.CanonicalHeaderKey(hm.Name)]
	value := strings.Join(values, ",")
	var ok bool
	if hm.Present {
		ok = present
	} else if present {
		v, exact, prefix, suffix, contains := value, hm.Exact, hm.Prefix, hm.Suffix, hm.Contains
		if hm.IgnoreCase {
			v, exact, prefix, suffix, contains = strings.ToLower(v), strings.ToLower(exact), strings.ToLower(prefix), strings.ToLower(suffix), strings.ToLower(contains)
		}
		switch {
		case hm.Exact != "":
			ok = v == exact
		case hm.Prefix != "":
			ok = strings.HasPrefix(v, prefix)
		case hm.Suffix != "":
			ok = strings.HasSuffix(v, suffix)
		case hm.Contains != "":
			ok = strings.Contains(v, contains)
		case hm.Regex != "":
			ok = fullMatch(hm.Regex, value)
		}
	}
	return ok != hm.Invert
}

// fullMatch matches the whole string, as Envoy's safe_regex does. An
// invalid pattern matches nothing.
func fullMatch(pattern, s string) bool {
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	return err == nil && re.MatchString(s)
}
