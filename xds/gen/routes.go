package gen

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/trellis-mesh/trellis/structs"
)

// routeConfiguration wraps virtual hosts. Clusters are validated: RDS
// defaults to not validating, and a route to a missing cluster would
// silently black-hole traffic instead of being refused.
func routeConfiguration(name string, hosts ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: hosts, ValidateClusters: wrapBool(true)}
}

// chainVirtualHost turns an HTTP chain into a virtual host named name for
// domains: one route per router rule (the compiler appends the catch-all),
// or a single catch-all route to the start splitter or resolver.
func chainVirtualHost(chain *structs.CompiledDiscoveryChain, name string, domains []string) (*routev3.VirtualHost, error) {
	start := chain.Nodes[chain.StartNode]
	if start == nil {
		return nil, fmt.Errorf("%w: chain %q has no start node %q", ErrInvalidSnapshot, chain.ServiceName, chain.StartNode)
	}
	var routes []*routev3.Route
	switch start.Type {
	case structs.DiscoveryGraphNodeTypeRouter:
		for _, dr := range start.Routes {
			if dr == nil {
				continue
			}
			next := chain.Nodes[dr.NextNode]
			if next == nil {
				return nil, fmt.Errorf("%w: chain %q: route to unknown node %q", ErrInvalidSnapshot, chain.ServiceName, dr.NextNode)
			}
			action, err := nodeRouteAction(chain, next)
			if err != nil {
				return nil, err
			}
			r := &routev3.Route{Action: &routev3.Route_Route{Route: action}}
			if def := dr.Definition; def != nil {
				r.Match = routeMatch(def.Match)
				if d := def.Destination; d != nil {
					applyDestination(action, d)
					r.RequestHeadersToAdd, r.RequestHeadersToRemove = headerMods(d.RequestHeaders)
					r.ResponseHeadersToAdd, r.ResponseHeadersToRemove = headerMods(d.ResponseHeaders)
				}
			} else {
				r.Match = prefixMatch("/")
			}
			routes = append(routes, r)
		}
	case structs.DiscoveryGraphNodeTypeSplitter:
		action, err := nodeRouteAction(chain, start)
		if err != nil {
			return nil, err
		}
		routes = append(routes, &routev3.Route{Match: prefixMatch("/"), Action: &routev3.Route_Route{Route: action}})
	case structs.DiscoveryGraphNodeTypeResolver:
		action, err := nodeRouteAction(chain, start)
		if err != nil {
			return nil, err
		}
		// A resolver's request timeout applies only when it starts the
		// chain: below a splitter the legs share one route action.
		setTimeout(&action.Timeout, start.Resolver.RequestTimeout)
		routes = append(routes, &routev3.Route{Match: prefixMatch("/"), Action: &routev3.Route_Route{Route: action}})
	default:
		return nil, fmt.Errorf("%w: chain %q: unknown start node type %q", ErrInvalidSnapshot, chain.ServiceName, start.Type)
	}
	if len(routes) == 0 {
		return nil, fmt.Errorf("%w: chain %q routes nowhere", ErrInvalidSnapshot, chain.ServiceName)
	}
	return &routev3.VirtualHost{Name: name, Domains: domains, Routes: routes}, nil
}

// nodeRouteAction is the action that sends a request into a splitter or
// resolver node.
func nodeRouteAction(chain *structs.CompiledDiscoveryChain, n *structs.DiscoveryGraphNode) (*routev3.RouteAction, error) {
	action := &routev3.RouteAction{HashPolicy: hashPolicies(n.LoadBalancer)}
	switch n.Type {
	case structs.DiscoveryGraphNodeTypeResolver:
		c, err := resolverCluster(chain, n.MapKey())
		if err != nil {
			return nil, err
		}
		action.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: c}
	case structs.DiscoveryGraphNodeTypeSplitter:
		var clusters []*routev3.WeightedCluster_ClusterWeight
		for _, s := range n.Splits {
			if s == nil {
				continue
			}
			w := splitWeight(s.Weight)
			if w == 0 {
				continue
			}
			c, err := resolverCluster(chain, s.NextNode)
			if err != nil {
				return nil, err
			}
			cw := &routev3.WeightedCluster_ClusterWeight{Name: c, Weight: wrapUint32(w)}
			if def := s.Definition; def != nil {
				cw.RequestHeadersToAdd, cw.RequestHeadersToRemove = headerMods(def.RequestHeaders)
				cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove = headerMods(def.ResponseHeaders)
			}
			clusters = append(clusters, cw)
		}
		if len(clusters) == 0 {
			return nil, fmt.Errorf("%w: chain %q: splitter %q without weight", ErrInvalidSnapshot, chain.ServiceName, n.Name)
		}
		action.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: &routev3.WeightedCluster{Clusters: clusters}}
	default:
		return nil, fmt.Errorf("%w: chain %q: cannot route to a %s", ErrInvalidSnapshot, chain.ServiceName, n.Type)
	}
	return action, nil
}

func prefixMatch(p string) *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}
}

func regexMatcher(re string) *matcherv3.RegexMatcher { return &matcherv3.RegexMatcher{Regex: re} }

// routeMatch converts a router rule's match; no criteria match everything.
func routeMatch(m *structs.ServiceRouteMatch) *routev3.RouteMatch {
	if m == nil || m.HTTP == nil {
		return prefixMatch("/")
	}
	h := m.HTTP
	rm := prefixMatch("/")
	switch {
	case h.PathExact != "":
		rm.PathSpecifier = &routev3.RouteMatch_Path{Path: h.PathExact}
	case h.PathPrefix != "":
		rm.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: h.PathPrefix}
	case h.PathRegex != "":
		rm.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: regexMatcher(h.PathRegex)}
	}
	if h.CaseInsensitive {
		rm.CaseSensitive = wrapBool(false)
	}
	for _, hdr := range h.Header {
		hm := &routev3.HeaderMatcher{Name: hdr.Name, InvertMatch: hdr.Invert}
		switch {
		case hdr.Exact != "":
			hm.HeaderMatchSpecifier = stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: hdr.Exact}})
		case hdr.Prefix != "":
			hm.HeaderMatchSpecifier = stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: hdr.Prefix}})
		case hdr.Suffix != "":
			hm.HeaderMatchSpecifier = stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: hdr.Suffix}})
		case hdr.Regex != "":
			hm.HeaderMatchSpecifier = stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher(hdr.Regex)}})
		case hdr.Present:
			hm.HeaderMatchSpecifier = &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}
		default:
			continue // refused by the entry's validation
		}
		rm.Headers = append(rm.Headers, hm)
	}
	if len(h.Methods) > 0 {
		rm.Headers = append(rm.Headers, methodMatcher(h.Methods))
	}
	for _, q := range h.QueryParam {
		qm := &routev3.QueryParameterMatcher{Name: q.Name}
		switch {
		case q.Exact != "":
			qm.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_Exact{Exact: q.Exact},
			}}
		case q.Regex != "":
			qm.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher(q.Regex)},
			}}
		case q.Present:
			qm.QueryParameterMatchSpecifier = &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}
		default:
			continue
		}
		rm.QueryParameters = append(rm.QueryParameters, qm)
	}
	return rm
}

func stringMatch(m *matcherv3.StringMatcher) *routev3.HeaderMatcher_StringMatch {
	return &routev3.HeaderMatcher_StringMatch{StringMatch: m}
}

// methodMatcher matches any of methods on the :method pseudo-header.
func methodMatcher(methods []string) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{
		Name:                 ":method",
		HeaderMatchSpecifier: stringMatch(&matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: regexMatcher(strings.Join(methods, "|"))}}),
	}
}

// applyDestination applies a router rule's destination settings: prefix
// rewrite, timeouts (negative disables) and retries.
func applyDestination(a *routev3.RouteAction, d *structs.ServiceRouteDestination) {
	if d.PrefixRewrite != "" {
		a.PrefixRewrite = d.PrefixRewrite
	}
	setTimeout(&a.Timeout, d.RequestTimeout.Duration())
	setTimeout(&a.IdleTimeout, d.IdleTimeout.Duration())
	if d.NumRetries == 0 && !d.RetryOnConnectFailure && len(d.RetryOn) == 0 && len(d.RetryOnStatusCodes) == 0 {
		return
	}
	rp := &routev3.RetryPolicy{}
	if d.NumRetries > 0 {
		rp.NumRetries = wrapUint32(d.NumRetries)
	}
	on := append([]string{}, d.RetryOn...)
	if d.RetryOnConnectFailure && !slices.Contains(on, "connect-failure") {
		on = append(on, "connect-failure")
	}
	if len(d.RetryOnStatusCodes) > 0 {
		on = append(on, "retriable-status-codes")
		rp.RetriableStatusCodes = append([]uint32{}, d.RetryOnStatusCodes...)
	}
	rp.RetryOn = strings.Join(on, ",")
	a.RetryPolicy = rp
}

// setTimeout sets a route timeout: positive as given, negative disables it
// (Envoy's 0), zero leaves Envoy's default.
func setTimeout(dst **durationpb.Duration, d time.Duration) {
	switch {
	case d > 0:
		*dst = duration(d)
	case d < 0:
		*dst = duration(0)
	}
}

// headerMods converts header modifiers: Add appends, Set overwrites.
func headerMods(m *structs.HTTPHeaderModifiers) ([]*corev3.HeaderValueOption, []string) {
	if m.IsZero() {
		return nil, nil
	}
	var add []*corev3.HeaderValueOption
	for _, k := range sortedKeys(m.Add) {
		add = append(add, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: k, Value: m.Add[k]},
			AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD,
		})
	}
	for _, k := range sortedKeys(m.Set) {
		add = append(add, &corev3.HeaderValueOption{
			Header:       &corev3.HeaderValue{Key: k, Value: m.Set[k]},
			AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
		})
	}
	var remove []string
	if len(m.Remove) > 0 {
		remove = append(remove, m.Remove...)
	}
	return add, remove
}

// hashPolicies are a hash-based load balancer's request hashing rules.
func hashPolicies(lb *structs.LoadBalancer) []*routev3.RouteAction_HashPolicy {
	if !lb.IsHashBased() {
		return nil
	}
	var out []*routev3.RouteAction_HashPolicy
	for _, p := range lb.HashPolicies {
		hp := &routev3.RouteAction_HashPolicy{Terminal: p.Terminal}
		switch {
		case p.SourceIP:
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_ConnectionProperties_{
				ConnectionProperties: &routev3.RouteAction_HashPolicy_ConnectionProperties{SourceIp: true},
			}
		case p.Field == "header":
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Header_{Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: p.FieldValue}}
		case p.Field == "query_parameter":
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_QueryParameter_{QueryParameter: &routev3.RouteAction_HashPolicy_QueryParameter{Name: p.FieldValue}}
		case p.Field == "cookie":
			c := &routev3.RouteAction_HashPolicy_Cookie{Name: p.FieldValue}
			if cc := p.CookieConfig; cc != nil {
				c.Path = cc.Path
				switch {
				case cc.Session:
					c.Ttl = duration(0) // a present zero TTL makes a session cookie
				case cc.TTL > 0:
					c.Ttl = duration(cc.TTL)
				}
			}
			hp.PolicySpecifier = &routev3.RouteAction_HashPolicy_Cookie_{Cookie: c}
		default:
			continue
		}
		out = append(out, hp)
	}
	return out
}
