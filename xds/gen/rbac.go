package gen

import (
	"fmt"
	"regexp"
	"slices"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/trellis-mesh/trellis/structs"
)

// Intentions are an ordered list (highest precedence first) in which the
// first match decides, with a default for no match. Envoy's RBAC is an
// unordered allow-list or deny-list. The translation (Consul's) picks the
// list kind opposite to the default (default deny: an allow-list), then
// removes precedence: every intention is ANDed with NOT of the more
// specific sources above it, and intentions whose action equals the
// default are dropped since the default covers them. L7 permissions of an
// intention get the same treatment among themselves.
//
// Policies: one "consul-intentions-layer4" policy listing every L4
// principal, and one "consul-intentions-layer7-<n>" policy per intention
// with permissions (HTTP only; on a TCP service such an intention denies).

// rbacAction is an intention's effect.
type rbacAction uint8

const (
	actionDeny rbacAction = iota
	actionAllow
	actionL7
)

func actionOf(a structs.IntentionAction) rbacAction {
	if a == structs.IntentionActionAllow {
		return actionAllow
	}
	return actionDeny
}

type rbacIntention struct {
	source     string
	notSources []string
	action     rbacAction
	perms      []*rbacPermission
	skip       bool
}

type rbacPermission struct {
	action   rbacAction
	perm     *rbacv3.Permission
	notPerms []*rbacv3.Permission
	skip     bool
}

// rbacRules builds the RBAC rules for connections to a service with the
// given intentions (any order; they are sorted by precedence here).
func rbacRules(ixns structs.Intentions, defaultAllow, http bool) *rbacv3.RBAC {
	sorted := slices.Clone(ixns)
	sorted = slices.DeleteFunc(sorted, func(i *structs.Intention) bool { return i == nil })
	structs.SortIntentions(sorted)

	def := actionDeny
	rules := &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW}
	if defaultAllow {
		def = actionAllow
		rules.Action = rbacv3.RBAC_DENY
	}

	// A lower-precedence intention with the same source never matters.
	seen := map[string]bool{}
	var list []*rbacIntention
	for _, ixn := range sorted {
		if seen[ixn.SourceName] {
			continue
		}
		seen[ixn.SourceName] = true
		ri := &rbacIntention{source: ixn.SourceName, action: actionOf(ixn.Action)}
		if len(ixn.Permissions) > 0 {
			ri.action = actionDeny // L7 rules cannot be enforced on TCP: deny, as Consul does
			if http {
				ri.action = actionL7
				for _, p := range ixn.Permissions {
					if p == nil {
						continue
					}
					ri.perms = append(ri.perms, &rbacPermission{action: actionOf(p.Action), perm: permission(p)})
				}
			}
		}
		list = append(list, ri)
	}

	// Remove source precedence: walking up from the bottom, each intention
	// is subtracted from every less specific one below it.
	for i := len(list) - 1; i >= 0; i-- {
		for j := i + 1; j < len(list); j++ {
			if !list[j].skip && sourceCovers(list[j].source, list[i].source) {
				list[j].notSources = append(list[j].notSources, list[i].source)
			}
		}
		if list[i].action == def {
			list[i].skip = true
		}
	}

	var l4 []*rbacv3.Principal
	n := 0
	for _, ri := range list {
		if ri.skip {
			continue
		}
		if ri.action != actionL7 {
			l4 = append(l4, ri.principal())
			continue
		}
		perms := removePermissionPrecedence(ri.perms, def)
		if len(perms) == 0 {
			continue // every permission agrees with the default
		}
		if rules.Policies == nil {
			rules.Policies = map[string]*rbacv3.Policy{}
		}
		rules.Policies[fmt.Sprintf("consul-intentions-layer7-%d", n)] = &rbacv3.Policy{
			Principals:  []*rbacv3.Principal{ri.principal()},
			Permissions: perms,
		}
		n++
	}
	if len(l4) > 0 {
		if rules.Policies == nil {
			rules.Policies = map[string]*rbacv3.Policy{}
		}
		rules.Policies["consul-intentions-layer4"] = &rbacv3.Policy{
			Principals:  l4,
			Permissions: []*rbacv3.Permission{anyPermission()},
		}
	}
	return rules
}

// sourceCovers reports whether intention source general matches every
// connection specific matches, and more (only "*" is more general than a
// name).
func sourceCovers(general, specific string) bool {
	return general == structs.WildcardSpecifier && specific != structs.WildcardSpecifier
}

func (ri *rbacIntention) principal() *rbacv3.Principal {
	p := sourcePrincipal(ri.source)
	if len(ri.notSources) == 0 {
		return p
	}
	ids := []*rbacv3.Principal{p}
	for _, s := range ri.notSources {
		ids = append(ids, &rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: sourcePrincipal(s)}})
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: ids}}}
}

// anyPathSegment matches one segment of a SPIFFE ID path.
const anyPathSegment = `[^/]+`

// sourcePrincipal matches the client certificate of a source service in
// any datacenter and trust domain (the CA has already verified the chain).
func sourcePrincipal(source string) *rbacv3.Principal {
	svc := anyPathSegment
	if source != structs.WildcardSpecifier {
		svc = regexp.QuoteMeta(source)
	}
	re := fmt.Sprintf(`^spiffe://%s/ns/%s/dc/%s/svc/%s$`, anyPathSegment, defaultNamespace, anyPathSegment, svc)
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{
		PrincipalName: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher(re)}},
	}}}
}

// removePermissionPrecedence subtracts each permission from the ones below
// it and drops those that agree with the default.
func removePermissionPrecedence(perms []*rbacPermission, def rbacAction) []*rbacv3.Permission {
	for i := len(perms) - 1; i >= 0; i-- {
		for j := i + 1; j < len(perms); j++ {
			if !perms[j].skip {
				perms[j].notPerms = append(perms[j].notPerms, perms[i].perm)
			}
		}
		if perms[i].action == def {
			perms[i].skip = true
		}
	}
	var out []*rbacv3.Permission
	for _, p := range perms {
		if p.skip {
			continue
		}
		if len(p.notPerms) == 0 {
			out = append(out, p.perm)
			continue
		}
		parts := []*rbacv3.Permission{p.perm}
		for _, np := range p.notPerms {
			parts = append(parts, &rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: np}})
		}
		out = append(out, andPermissions(parts))
	}
	return out
}

func anyPermission() *rbacv3.Permission {
	return &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}
}

func andPermissions(parts []*rbacv3.Permission) *rbacv3.Permission {
	switch len(parts) {
	case 0:
		return anyPermission()
	case 1:
		return parts[0]
	}
	return &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: parts}}}
}

// permission converts an L7 permission's HTTP criteria (all must hold).
func permission(p *structs.IntentionPermission) *rbacv3.Permission {
	h := p.HTTP
	if h == nil {
		return anyPermission()
	}
	var parts []*rbacv3.Permission
	pathRule := func(m *matcherv3.StringMatcher) *rbacv3.Permission {
		return &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{
			Rule: &matcherv3.PathMatcher_Path{Path: m},
		}}}
	}
	switch {
	case h.PathExact != "":
		parts = append(parts, pathRule(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: h.PathExact}}))
	case h.PathPrefix != "":
		parts = append(parts, pathRule(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: h.PathPrefix}}))
	case h.PathRegex != "":
		parts = append(parts, pathRule(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher(h.PathRegex)}}))
	}
	for _, hdr := range h.Header {
		hm := &routev3.HeaderMatcher{Name: hdr.Name, InvertMatch: hdr.Invert}
		m := &matcherv3.StringMatcher{IgnoreCase: hdr.IgnoreCase}
		switch {
		case hdr.Exact != "":
			m.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: hdr.Exact}
		case hdr.Prefix != "":
			m.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: hdr.Prefix}
		case hdr.Suffix != "":
			m.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: hdr.Suffix}
		case hdr.Contains != "":
			m.MatchPattern = &matcherv3.StringMatcher_Contains{Contains: hdr.Contains}
		case hdr.Regex != "":
			m.IgnoreCase = false // Envoy ignores it for regexes; keep the config honest
			m.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher(hdr.Regex)}
		case hdr.Present:
			m = nil
			hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
		default:
			continue // refused by the entry's validation
		}
		if m != nil {
			hm.HeaderMatchSpecifier = stringMatch(m)
		}
		parts = append(parts, &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: hm}})
	}
	if len(h.Methods) > 0 {
		parts = append(parts, &rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: methodMatcher(h.Methods)}})
	}
	return andPermissions(parts)
}

// networkRBAC is the L4 authorization filter of a TCP service.
func (b *builder) networkRBAC(ixns structs.Intentions, defaultAllow bool) *listenerv3.Filter {
	return b.networkFilter(wellknown.RoleBasedAccessControl, &netrbacv3.RBAC{
		StatPrefix: connectAuthzStatPrefix,
		Rules:      rbacRules(ixns, defaultAllow, false),
	})
}

// httpRBAC is the L7 authorization filter of an HTTP service.
func (b *builder) httpRBAC(ixns structs.Intentions, defaultAllow bool) *hcmv3.HttpFilter {
	return b.httpFilter(wellknown.HTTPRoleBasedAccessControl, &httprbacv3.RBAC{Rules: rbacRules(ixns, defaultAllow, true)})
}
