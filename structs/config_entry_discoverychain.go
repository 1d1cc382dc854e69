package structs

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The three kinds that shape a discovery chain: a router (L7 routes) at the
// top, splitters (weighted splits) below it, resolvers (which instances,
// redirects, failover) at the bottom. Their validation texts are Consul's.

// ServiceRouterConfigEntry (kind service-router) routes L7 requests for the
// service named Name by path, header, query parameter or method. The first
// matching route wins; unmatched traffic goes to the service itself.
type ServiceRouterConfigEntry struct {
	Kind   string
	Name   string
	Routes []ServiceRoute    `json:",omitempty"`
	Meta   map[string]string `json:",omitempty"`
	RaftIndex
}

// ServiceRoute is one routing rule: requests matching Match go to
// Destination.
type ServiceRoute struct {
	Match       *ServiceRouteMatch       `json:",omitempty"`
	Destination *ServiceRouteDestination `json:",omitempty"`
}

// ServiceRouteMatch holds the match criteria of a route.
type ServiceRouteMatch struct {
	HTTP *ServiceRouteHTTPMatch `json:",omitempty"`
}

// ServiceRouteHTTPMatch matches HTTP requests; every given criterion must
// hold.
type ServiceRouteHTTPMatch struct {
	PathExact       string                            `json:",omitempty" alias:"path_exact"`
	PathPrefix      string                            `json:",omitempty" alias:"path_prefix"`
	PathRegex       string                            `json:",omitempty" alias:"path_regex"`
	CaseInsensitive bool                              `json:",omitempty" alias:"case_insensitive"`
	Header          []ServiceRouteHTTPMatchHeader     `json:",omitempty"`
	QueryParam      []ServiceRouteHTTPMatchQueryParam `json:",omitempty" alias:"query_param"`
	Methods         []string                          `json:",omitempty"`
}

// ServiceRouteHTTPMatchHeader matches one request header.
type ServiceRouteHTTPMatchHeader struct {
	Name    string
	Present bool   `json:",omitempty"`
	Exact   string `json:",omitempty"`
	Prefix  string `json:",omitempty"`
	Suffix  string `json:",omitempty"`
	Regex   string `json:",omitempty"`
	Invert  bool   `json:",omitempty"`
}

// ServiceRouteHTTPMatchQueryParam matches one query parameter.
type ServiceRouteHTTPMatchQueryParam struct {
	Name    string
	Present bool   `json:",omitempty"`
	Exact   string `json:",omitempty"`
	Regex   string `json:",omitempty"`
}

// ServiceRouteDestination says where matching requests go and how they are
// proxied. An empty Service means the router's own service.
type ServiceRouteDestination struct {
	Service               string               `json:",omitempty"`
	ServiceSubset         string               `json:",omitempty" alias:"service_subset"`
	Namespace             string               `json:",omitempty"`
	Partition             string               `json:",omitempty"`
	PrefixRewrite         string               `json:",omitempty" alias:"prefix_rewrite"`
	RequestTimeout        Duration             `json:",omitempty" alias:"request_timeout"`
	IdleTimeout           Duration             `json:",omitempty" alias:"idle_timeout"`
	NumRetries            uint32               `json:",omitempty" alias:"num_retries"`
	RetryOnConnectFailure bool                 `json:",omitempty" alias:"retry_on_connect_failure"`
	RetryOn               []string             `json:",omitempty" alias:"retry_on"`
	RetryOnStatusCodes    []uint32             `json:",omitempty" alias:"retry_on_status_codes"`
	RequestHeaders        *HTTPHeaderModifiers `json:",omitempty" alias:"request_headers"`
	ResponseHeaders       *HTTPHeaderModifiers `json:",omitempty" alias:"response_headers"`
}

// HTTPHeaderModifiers adds, sets and removes HTTP headers.
type HTTPHeaderModifiers struct {
	Add    map[string]string `json:",omitempty"`
	Set    map[string]string `json:",omitempty"`
	Remove []string          `json:",omitempty"`
}

// IsZero reports whether m changes nothing.
func (m *HTTPHeaderModifiers) IsZero() bool {
	return m == nil || (len(m.Add) == 0 && len(m.Set) == 0 && len(m.Remove) == 0)
}

// GetKind implements ConfigEntry.
func (e *ServiceRouterConfigEntry) GetKind() string { return ServiceRouter }

// GetName implements ConfigEntry.
func (e *ServiceRouterConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *ServiceRouterConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *ServiceRouterConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: methods are uppercased.
func (e *ServiceRouterConfigEntry) Normalize() error {
	e.Kind = ServiceRouter
	for _, r := range e.Routes {
		if r.Match == nil || r.Match.HTTP == nil {
			continue
		}
		for i, m := range r.Match.HTTP.Methods {
			r.Match.HTTP.Methods[i] = strings.ToUpper(m)
		}
	}
	return nil
}

// Validate implements ConfigEntry.
func (e *ServiceRouterConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	for i, route := range e.Routes {
		eligibleForPrefixRewrite := false
		if route.Match != nil && route.Match.HTTP != nil {
			m := route.Match.HTTP
			pathParts := 0
			if m.PathExact != "" {
				eligibleForPrefixRewrite = true
				pathParts++
				if !strings.HasPrefix(m.PathExact, "/") {
					return fmt.Errorf("Route[%d] PathExact doesn't start with '/': %q", i, m.PathExact)
				}
			}
			if m.PathPrefix != "" {
				eligibleForPrefixRewrite = true
				pathParts++
				if !strings.HasPrefix(m.PathPrefix, "/") {
					return fmt.Errorf("Route[%d] PathPrefix doesn't start with '/': %q", i, m.PathPrefix)
				}
			}
			if m.PathRegex != "" {
				pathParts++
			}
			if pathParts > 1 {
				return fmt.Errorf("Route[%d] should only contain at most one of PathExact, PathPrefix, or PathRegex", i)
			}
			for j, hdr := range m.Header {
				if hdr.Name == "" {
					return fmt.Errorf("Route[%d] Header[%d] missing required Name field", i, j)
				}
				if countSet(hdr.Present, hdr.Exact, hdr.Regex, hdr.Prefix, hdr.Suffix) != 1 {
					return fmt.Errorf("Route[%d] Header[%d] should only contain one of Present, Exact, Prefix, Suffix, or Regex", i, j)
				}
			}
			for j, qm := range m.QueryParam {
				if qm.Name == "" {
					return fmt.Errorf("Route[%d] QueryParam[%d] missing required Name field", i, j)
				}
				if countSet(qm.Present, qm.Exact, qm.Regex) != 1 {
					return fmt.Errorf("Route[%d] QueryParam[%d] should only contain one of Present, Exact, or Regex", i, j)
				}
			}
			found := make(map[string]bool)
			for _, method := range m.Methods {
				if !isValidHTTPMethod(method) {
					return fmt.Errorf("Route[%d] Methods contains an invalid method %q", i, method)
				}
				if found[method] {
					return fmt.Errorf("Route[%d] Methods contains %q more than once", i, method)
				}
				found[method] = true
			}
		}
		if d := route.Destination; d != nil {
			if d.PrefixRewrite != "" && !eligibleForPrefixRewrite {
				return fmt.Errorf("Route[%d] cannot make use of PrefixRewrite without configuring either PathExact or PathPrefix", i)
			}
			for _, r := range d.RetryOn {
				if !isValidRetryCondition(r) {
					return fmt.Errorf("Route[%d] contains an invalid retry condition: %q", i, r)
				}
			}
		}
	}
	return nil
}

// ListRelatedServices lists the services the router sends traffic to,
// itself included (its implicit catch-all route).
func (e *ServiceRouterConfigEntry) ListRelatedServices() []string {
	found := map[string]bool{e.Name: true}
	for _, r := range e.Routes {
		if r.Destination != nil {
			found[defaultIfEmpty(r.Destination.Service, e.Name)] = true
		}
	}
	return sortedKeys(found)
}

// countSet counts the given criteria that are set (true or non-empty).
func countSet(present bool, values ...string) int {
	n := 0
	if present {
		n++
	}
	for _, v := range values {
		if v != "" {
			n++
		}
	}
	return n
}

func isValidHTTPMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

func isValidRetryCondition(r string) bool {
	switch r {
	case "5xx", "gateway-error", "reset", "connect-failure", "envoy-ratelimited", "retriable-4xx",
		"refused-stream", "cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable":
		return true
	}
	return false
}

// ServiceSplitterConfigEntry (kind service-splitter) splits the traffic of
// the service named Name between services or subsets by weight. Weights
// must add up to 100 (to 0.01).
type ServiceSplitterConfigEntry struct {
	Kind   string
	Name   string
	Splits []ServiceSplit    `json:",omitempty"`
	Meta   map[string]string `json:",omitempty"`
	RaftIndex
}

// ServiceSplit is one leg of a split.
type ServiceSplit struct {
	Weight          float32
	Service         string               `json:",omitempty"`
	ServiceSubset   string               `json:",omitempty" alias:"service_subset"`
	Namespace       string               `json:",omitempty"`
	Partition       string               `json:",omitempty"`
	RequestHeaders  *HTTPHeaderModifiers `json:",omitempty" alias:"request_headers"`
	ResponseHeaders *HTTPHeaderModifiers `json:",omitempty" alias:"response_headers"`
}

// GetKind implements ConfigEntry.
func (e *ServiceSplitterConfigEntry) GetKind() string { return ServiceSplitter }

// GetName implements ConfigEntry.
func (e *ServiceSplitterConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *ServiceSplitterConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *ServiceSplitterConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: weights are rounded to 0.01.
func (e *ServiceSplitterConfigEntry) Normalize() error {
	e.Kind = ServiceSplitter
	for i := range e.Splits {
		e.Splits[i].Weight = NormalizeServiceSplitWeight(e.Splits[i].Weight)
	}
	return nil
}

// NormalizeServiceSplitWeight rounds a weight to the smallest representable
// share, 0.01%.
func NormalizeServiceSplitWeight(w float32) float32 {
	return float32(scaleWeight(w)) / 100
}

// scaleWeight converts a weight to hundredths of a percent.
func scaleWeight(w float32) int {
	return int(math.Round(float64(w * 100)))
}

// Validate implements ConfigEntry.
func (e *ServiceSplitterConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if len(e.Splits) == 0 {
		return errors.New("no splits configured")
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	type splitKey struct{ service, subset, namespace, partition string }
	found := make(map[splitKey]bool)
	sum := 0
	for _, s := range e.Splits {
		k := splitKey{defaultIfEmpty(s.Service, e.Name), s.ServiceSubset, s.Namespace, s.Partition}
		if found[k] {
			return fmt.Errorf("split destination occurs more than once: service=%q, subset=%q, namespace=%q, partition=%q",
				k.service, k.subset, k.namespace, k.partition)
		}
		found[k] = true
		sum += scaleWeight(s.Weight)
	}
	if sum != 100*100 {
		return fmt.Errorf("the sum of all split weights must be 100, not %f", float32(sum)/100)
	}
	return nil
}

// ListRelatedServices lists the other services the splitter sends traffic
// to.
func (e *ServiceSplitterConfigEntry) ListRelatedServices() []string {
	found := map[string]bool{}
	for _, s := range e.Splits {
		if svc := defaultIfEmpty(s.Service, e.Name); svc != e.Name {
			found[svc] = true
		}
	}
	return sortedKeys(found)
}

// ServiceResolverConfigEntry (kind service-resolver) decides which instances
// serve the service named Name: named subsets selected by filter
// expressions, a default subset, a redirect to another service or
// datacenter, failover targets, timeouts and the load balancing policy.
type ServiceResolverConfigEntry struct {
	Kind           string
	Name           string
	DefaultSubset  string                             `json:",omitempty" alias:"default_subset"`
	Subsets        map[string]ServiceResolverSubset   `json:",omitempty"`
	Redirect       *ServiceResolverRedirect           `json:",omitempty"`
	Failover       map[string]ServiceResolverFailover `json:",omitempty"`
	ConnectTimeout Duration                           `json:",omitempty" alias:"connect_timeout"`
	RequestTimeout Duration                           `json:",omitempty" alias:"request_timeout"`
	// PrioritizeByLocality is stored and served; Trellis has no localities.
	PrioritizeByLocality *ServiceResolverPrioritizeByLocality `json:",omitempty" alias:"prioritize_by_locality"`
	LoadBalancer         *LoadBalancer                        `json:",omitempty" alias:"load_balancer"`
	Meta                 map[string]string                    `json:",omitempty"`
	RaftIndex
}

// ServiceResolverSubset selects instances by a filter expression over the
// service instance (Service.Meta.version == "v1", "canary" in
// Service.Tags, ...).
type ServiceResolverSubset struct {
	Filter      string `json:",omitempty"`
	OnlyPassing bool   `json:",omitempty" alias:"only_passing"`
}

// ServiceResolverRedirect resolves another service, subset or datacenter
// instead.
type ServiceResolverRedirect struct {
	Service       string `json:",omitempty"`
	ServiceSubset string `json:",omitempty" alias:"service_subset"`
	Namespace     string `json:",omitempty"`
	Partition     string `json:",omitempty"`
	Datacenter    string `json:",omitempty"`
	Peer          string `json:",omitempty"`
	SamenessGroup string `json:",omitempty" alias:"sameness_group"`
}

// ServiceResolverFailover lists where traffic goes when the resolved
// instances are unhealthy.
type ServiceResolverFailover struct {
	Service       string                          `json:",omitempty"`
	ServiceSubset string                          `json:",omitempty" alias:"service_subset"`
	Namespace     string                          `json:",omitempty"`
	Datacenters   []string                        `json:",omitempty"`
	Targets       []ServiceResolverFailoverTarget `json:",omitempty"`
	Policy        *ServiceResolverFailoverPolicy  `json:",omitempty"`
	SamenessGroup string                          `json:",omitempty" alias:"sameness_group"`
}

// ServiceResolverFailoverTarget is one explicit failover target.
type ServiceResolverFailoverTarget struct {
	Service       string `json:",omitempty"`
	ServiceSubset string `json:",omitempty" alias:"service_subset"`
	Partition     string `json:",omitempty"`
	Namespace     string `json:",omitempty"`
	Datacenter    string `json:",omitempty"`
	Peer          string `json:",omitempty"`
}

// ServiceResolverFailoverPolicy selects the failover mechanism.
type ServiceResolverFailoverPolicy struct {
	Mode    string   `json:",omitempty"`
	Regions []string `json:",omitempty"`
}

// ServiceResolverPrioritizeByLocality selects locality-aware routing.
type ServiceResolverPrioritizeByLocality struct {
	Mode string `json:",omitempty"`
}

// LoadBalancer selects Envoy's load balancing policy for the service.
type LoadBalancer struct {
	Policy             string              `json:",omitempty"`
	RingHashConfig     *RingHashConfig     `json:",omitempty" alias:"ring_hash_config"`
	LeastRequestConfig *LeastRequestConfig `json:",omitempty" alias:"least_request_config"`
	HashPolicies       []HashPolicy        `json:",omitempty" alias:"hash_policies"`
}

// RingHashConfig configures the ring_hash policy.
type RingHashConfig struct {
	MinimumRingSize uint64 `json:",omitempty" alias:"minimum_ring_size"`
	MaximumRingSize uint64 `json:",omitempty" alias:"maximum_ring_size"`
}

// LeastRequestConfig configures the least_request policy.
type LeastRequestConfig struct {
	ChoiceCount uint32 `json:",omitempty" alias:"choice_count"`
}

// HashPolicy says what a hash-based policy hashes.
type HashPolicy struct {
	Field        string        `json:",omitempty"`
	FieldValue   string        `json:",omitempty" alias:"field_value"`
	CookieConfig *CookieConfig `json:",omitempty" alias:"cookie_config"`
	SourceIP     bool          `json:",omitempty" alias:"source_ip"`
	Terminal     bool          `json:",omitempty"`
}

// CookieConfig configures cookie hashing. TTL is nanoseconds in JSON, as
// in Consul.
type CookieConfig struct {
	Session bool          `json:",omitempty"`
	TTL     time.Duration `json:",omitempty"`
	Path    string        `json:",omitempty"`
}

// IsHashBased reports whether the policy hashes requests to hosts.
func (lb *LoadBalancer) IsHashBased() bool {
	return lb != nil && (lb.Policy == "maglev" || lb.Policy == "ring_hash")
}

// GetKind implements ConfigEntry.
func (e *ServiceResolverConfigEntry) GetKind() string { return ServiceResolver }

// GetName implements ConfigEntry.
func (e *ServiceResolverConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *ServiceResolverConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *ServiceResolverConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry.
func (e *ServiceResolverConfigEntry) Normalize() error {
	e.Kind = ServiceResolver
	return nil
}

// IsDefault reports whether the resolver does nothing a missing resolver
// would not do.
func (e *ServiceResolverConfigEntry) IsDefault() bool {
	return e.DefaultSubset == "" && len(e.Subsets) == 0 && e.Redirect == nil && len(e.Failover) == 0 &&
		e.ConnectTimeout == 0 && e.RequestTimeout == 0 && e.LoadBalancer == nil
}

// SubsetExists reports whether name is "" (the unnamed default) or one of
// the resolver's subsets.
func (e *ServiceResolverConfigEntry) SubsetExists(name string) bool {
	if name == "" {
		return true
	}
	_, ok := e.Subsets[name]
	return ok
}

var (
	validServiceSubset     = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	serviceSubsetMaxLength = 63
	validLBPolicies        = map[string]bool{"": true, "random": true, "round_robin": true, "least_request": true, "ring_hash": true, "maglev": true}
	validHashPolicies      = map[string]bool{"header": true, "cookie": true, "query_parameter": true}
)

// validateServiceSubset checks that a subset name can be a DNS label (it
// becomes part of SNI names).
func validateServiceSubset(subset string) error {
	if subset == "" || len(subset) > serviceSubsetMaxLength {
		return errors.New("must be non-empty and 63 characters or fewer")
	}
	if !validServiceSubset.MatchString(subset) {
		return errors.New("must be 63 characters or fewer, begin or end with lower case alphanumeric characters, and contain lower case alphanumeric characters or '-' in between")
	}
	return nil
}

// Validate implements ConfigEntry.
func (e *ServiceResolverConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	for _, name := range sortedKeys(e.Subsets) {
		if name == "" {
			return errors.New("Subset defined with empty name")
		}
		if err := validateServiceSubset(name); err != nil {
			return fmt.Errorf("Subset %q is invalid: %w", name, err)
		}
		if f := e.Subsets[name].Filter; f != "" {
			if _, err := ParseFilter(f); err != nil {
				return fmt.Errorf("Filter for subset %q is not a valid expression: %w", name, err)
			}
		}
	}
	isSubset := func(s string) bool { _, ok := e.Subsets[s]; return ok }
	if e.DefaultSubset != "" && !isSubset(e.DefaultSubset) {
		return fmt.Errorf("DefaultSubset %q is not a valid subset", e.DefaultSubset)
	}
	if r := e.Redirect; r != nil {
		if err := r.validateCE(); err != nil {
			return fmt.Errorf("Redirect: %w", err)
		}
		if len(e.Failover) > 0 {
			return errors.New("Redirect and Failover cannot both be set")
		}
		if *r == (ServiceResolverRedirect{}) {
			return errors.New("Redirect is empty")
		}
		switch {
		case r.Peer != "" && r.ServiceSubset != "":
			return errors.New("Redirect.Peer cannot be set with Redirect.ServiceSubset")
		case r.Peer != "" && r.Datacenter != "":
			return errors.New("Redirect.Peer cannot be set with Redirect.Datacenter")
		case r.Service == "":
			if r.ServiceSubset != "" {
				return errors.New("Redirect.ServiceSubset defined without Redirect.Service")
			}
			if r.Peer != "" {
				return errors.New("Redirect.Peer defined without Redirect.Service")
			}
		case r.ServiceSubset != "" && r.Service == e.Name:
			if !isSubset(r.ServiceSubset) {
				return fmt.Errorf("Redirect.ServiceSubset %q is not a valid subset of %q", r.ServiceSubset, e.Name)
			}
		}
	}
	for _, subset := range sortedKeys(e.Failover) {
		f := e.Failover[subset]
		prefix := fmt.Sprintf("Bad Failover[%q]: ", subset)
		if f.Namespace != "" && f.Namespace != IntentionDefaultNamespace {
			return errors.New(prefix + "Setting Namespace requires Consul Enterprise")
		}
		if subset != "*" && !isSubset(subset) {
			return errors.New(prefix + "not a valid subset subset")
		}
		if f.Service == "" && f.ServiceSubset == "" && f.Namespace == "" && len(f.Datacenters) == 0 && len(f.Targets) == 0 && f.SamenessGroup == "" {
			return errors.New(prefix + "one of Service, ServiceSubset, Namespace, Targets, SamenessGroup, or Datacenters is required")
		}
		if p := f.Policy; p != nil && p.Mode != "" && p.Mode != "default" && p.Mode != "sequential" && p.Mode != "order-by-locality" {
			return fmt.Errorf("Bad Failover[%q]: Policy must be one of '', 'default', or 'order-by-locality'", subset)
		}
		if f.ServiceSubset != "" && (f.Service == "" || f.Service == e.Name) && !isSubset(f.ServiceSubset) {
			return fmt.Errorf("%sServiceSubset %q is not a valid subset of %q", prefix, f.ServiceSubset, f.Service)
		}
		if len(f.Datacenters) != 0 && len(f.Targets) != 0 {
			return fmt.Errorf("Bad Failover[%q]: Targets cannot be set with Datacenters", subset)
		}
		if f.ServiceSubset != "" && len(f.Targets) != 0 {
			return fmt.Errorf("Bad Failover[%q]: Targets cannot be set with ServiceSubset", subset)
		}
		if f.Service != "" && len(f.Targets) != 0 {
			return fmt.Errorf("Bad Failover[%q]: Targets cannot be set with Service", subset)
		}
		for i, t := range f.Targets {
			tp := fmt.Sprintf("Bad Failover[%q].Targets[%d]: ", subset, i)
			switch {
			case t.Partition != "" && t.Partition != IntentionDefaultNamespace:
				return errors.New(tp + "Setting Partition requires Consul Enterprise")
			case t.Namespace != "" && t.Namespace != IntentionDefaultNamespace:
				return errors.New(tp + "Setting Namespace requires Consul Enterprise")
			case t.Peer != "" && t.ServiceSubset != "":
				return errors.New(tp + "Peer cannot be set with ServiceSubset")
			case t.Peer != "" && t.Datacenter != "":
				return errors.New(tp + "Peer cannot be set with Datacenter")
			case t.ServiceSubset != "" && (t.Service == "" || t.Service == e.Name) && !isSubset(t.ServiceSubset):
				return fmt.Errorf("%sServiceSubset %q is not a valid subset of %q", tp, t.ServiceSubset, e.Name)
			}
		}
		for _, dc := range f.Datacenters {
			if dc == "" {
				return fmt.Errorf("Bad Failover[%q].Datacenters: found empty datacenter", subset)
			}
		}
	}
	if e.ConnectTimeout < 0 {
		return fmt.Errorf("Bad ConnectTimeout '%s', must be >= 0", e.ConnectTimeout.Duration())
	}
	if e.RequestTimeout < 0 {
		return fmt.Errorf("Bad RequestTimeout '%s', must be >= 0", e.RequestTimeout.Duration())
	}
	return e.LoadBalancer.validate()
}

// validateCE refuses what needs Consul Enterprise (namespaces and
// partitions other than the default), with Consul CE's messages.
func (r *ServiceResolverRedirect) validateCE() error {
	if r.Partition != "" && r.Partition != IntentionDefaultNamespace {
		return errors.New("Setting Partition requires Consul Enterprise")
	}
	if r.Namespace != "" && r.Namespace != IntentionDefaultNamespace {
		return errors.New("Setting Namespace requires Consul Enterprise")
	}
	return nil
}

func (lb *LoadBalancer) validate() error {
	if lb == nil {
		return nil
	}
	if !validLBPolicies[lb.Policy] {
		return fmt.Errorf("Bad LoadBalancer policy: %q is not supported", lb.Policy)
	}
	if lb.Policy != "ring_hash" && lb.RingHashConfig != nil {
		return fmt.Errorf("Bad LoadBalancer configuration. RingHashConfig specified for incompatible load balancing policy %q", lb.Policy)
	}
	if lb.Policy != "least_request" && lb.LeastRequestConfig != nil {
		return fmt.Errorf("Bad LoadBalancer configuration. LeastRequestConfig specified for incompatible load balancing policy %q", lb.Policy)
	}
	if !lb.IsHashBased() && len(lb.HashPolicies) > 0 {
		return fmt.Errorf("Bad LoadBalancer configuration: HashPolicies specified for non-hash-based Policy: %q", lb.Policy)
	}
	for i, hp := range lb.HashPolicies {
		switch {
		case hp.Field != "" && !validHashPolicies[hp.Field]:
			return fmt.Errorf("Bad LoadBalancer HashPolicy[%d]: %q is not a supported field", i, hp.Field)
		case hp.SourceIP && hp.Field != "":
			return fmt.Errorf("Bad LoadBalancer HashPolicy[%d]: A single hash policy cannot hash both a source address and a %q", i, hp.Field)
		case hp.SourceIP && hp.FieldValue != "":
			return fmt.Errorf("Bad LoadBalancer HashPolicy[%d]: A FieldValue cannot be specified when hashing SourceIP", i)
		case hp.Field != "" && hp.FieldValue == "":
			return fmt.Errorf("Bad LoadBalancer HashPolicy[%d]: Field %q was specified without a FieldValue", i, hp.Field)
		case hp.FieldValue != "" && hp.Field == "":
			return fmt.Errorf("Bad LoadBalancer HashPolicy[%d]: FieldValue requires a Field to apply to", i)
		case hp.CookieConfig != nil && hp.Field != "cookie":
			return fmt.Errorf("Bad LoadBalancer HashPolicy[%d]: cookie_config provided for %q", i, hp.Field)
		case hp.CookieConfig != nil && hp.CookieConfig.Session && hp.CookieConfig.TTL != 0:
			return fmt.Errorf("Bad LoadBalancer HashPolicy[%d]: a session cookie cannot have an associated TTL", i)
		}
	}
	return nil
}

// ListRelatedServices lists the other services the resolver redirects or
// fails over to.
func (e *ServiceResolverConfigEntry) ListRelatedServices() []string {
	found := map[string]bool{}
	add := func(svc string) {
		if svc = defaultIfEmpty(svc, e.Name); svc != e.Name {
			found[svc] = true
		}
	}
	if e.Redirect != nil {
		add(e.Redirect.Service)
	}
	for _, f := range e.Failover {
		if len(f.Targets) == 0 {
			add(f.Service)
			continue
		}
		for _, t := range f.Targets {
			if t.Peer == "" {
				add(t.Service)
			}
		}
	}
	return sortedKeys(found)
}

// DiscoveryChainConfigEntry is implemented by the kinds that link a
// service's discovery chain to other services.
type DiscoveryChainConfigEntry interface {
	ConfigEntry
	// ListRelatedServices names the services, other than the entry's own
	// where that is implied, whose chains or resolvers the entry uses.
	ListRelatedServices() []string
}

var (
	_ DiscoveryChainConfigEntry = (*ServiceRouterConfigEntry)(nil)
	_ DiscoveryChainConfigEntry = (*ServiceSplitterConfigEntry)(nil)
	_ DiscoveryChainConfigEntry = (*ServiceResolverConfigEntry)(nil)
)

// sortedKeys returns the keys of a string-keyed map in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
