package discoverychain

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mitchellh/hashstructure"

	"github.com/trellis-mesh/trellis/structs"
)

// The namespace and partition of every target: Trellis has only the
// defaults, and names them as Consul's community edition does.
const (
	defaultNamespace = "default"
	defaultPartition = "default"
)

// DefaultConnectTimeout is the connect timeout of a resolver that sets
// none.
const DefaultConnectTimeout = 5 * time.Second

// ErrInvalidRequest is returned for a request missing a required field.
var ErrInvalidRequest = errors.New("discoverychain: invalid compile request")

// GraphError is a problem with the config entries themselves (a redirect
// loop, a router on a tcp service, a missing subset, ...). Its message is
// Consul's and is shown to the user who wrote the offending entry.
type GraphError struct {
	Message string
}

func (e *GraphError) Error() string { return e.Message }

// CompileRequest is everything a compilation depends on.
type CompileRequest struct {
	ServiceName          string
	EvaluateInDatacenter string
	// EvaluateInTrustDomain names the mesh's trust domain
	// ("<cluster-id>.consul"); it ends every target's SNI and SPIFFE ID. It
	// may be empty while no CA exists: SNIs then end in ".internal." and
	// targets carry no SPIFFE ID.
	EvaluateInTrustDomain string

	// OverrideMeshGateway replaces the mesh gateway mode of every target.
	OverrideMeshGateway structs.MeshGatewayConfig
	// OverrideProtocol replaces the chain's protocol; an L4 protocol drops
	// routers and splitters from the chain.
	OverrideProtocol string
	// OverrideConnectTimeout replaces every resolver's connect timeout.
	OverrideConnectTimeout time.Duration

	Entries *Entries
}

// Compile builds the chain of req.ServiceName.
func Compile(req CompileRequest) (*structs.CompiledDiscoveryChain, error) {
	switch {
	case req.ServiceName == "":
		return nil, fmt.Errorf("%w: serviceName is required", ErrInvalidRequest)
	case req.EvaluateInDatacenter == "":
		return nil, fmt.Errorf("%w: evaluateInDatacenter is required", ErrInvalidRequest)
	case req.Entries == nil:
		return nil, fmt.Errorf("%w: entries is required", ErrInvalidRequest)
	}
	c := &compiler{
		req:             req,
		entries:         req.Entries,
		resolvers:       make(map[string]*structs.ServiceResolverConfigEntry, len(req.Entries.Resolvers)),
		splitterNodes:   make(map[string]*structs.DiscoveryGraphNode),
		resolveNodes:    make(map[string]*structs.DiscoveryGraphNode),
		nodes:           make(map[string]*structs.DiscoveryGraphNode),
		loadedTargets:   make(map[string]*structs.DiscoveryTarget),
		retainedTargets: make(map[string]bool),
	}
	for k, v := range req.Entries.Resolvers {
		c.resolvers[k] = v
	}
	if req.OverrideProtocol != "" {
		c.disableAdvancedRouting = !structs.IsProtocolHTTPLike(req.OverrideProtocol)
	}
	chain, err := c.compile()
	if err != nil {
		return nil, err
	}
	// Route and split definitions point into the input entries: sever them.
	return structs.CloneDiscoveryChain(chain), nil
}

// compiler holds the intermediate state of one compilation.
type compiler struct {
	req     CompileRequest
	entries *Entries

	// resolvers starts as a copy of the input and gains default resolvers
	// as services without one are reached.
	resolvers     map[string]*structs.ServiceResolverConfigEntry
	splitterNodes map[string]*structs.DiscoveryGraphNode // by node name
	resolveNodes  map[string]*structs.DiscoveryGraphNode // by target ID

	usesAdvancedRouting    bool
	disableAdvancedRouting bool
	customizedBy           struct{ meshGateway, protocol, connectTimeout bool }

	protocol    string
	serviceMeta map[string]string
	startNode   string

	nodes           map[string]*structs.DiscoveryGraphNode
	loadedTargets   map[string]*structs.DiscoveryTarget
	retainedTargets map[string]bool
}

// serviceNodeName is how routers and splitters are named: svc.ns.partition.
func serviceNodeName(service string) string {
	return service + "." + defaultNamespace + "." + defaultPartition
}

func (c *compiler) recordNode(n *structs.DiscoveryGraphNode) {
	switch n.Type {
	case structs.DiscoveryGraphNodeTypeSplitter:
		c.splitterNodes[n.Name] = n
	case structs.DiscoveryGraphNodeTypeResolver:
		c.resolveNodes[n.Resolver.Target] = n
	}
	c.nodes[n.MapKey()] = n
}

// recordProtocol notes the protocol of a service reached by the chain;
// every service of a chain must share one.
func (c *compiler) recordProtocol(service string) error {
	p := strings.ToLower(c.entries.Protocol(service))
	if c.protocol == "" {
		c.protocol = p
		return nil
	}
	if c.protocol != p {
		return &GraphError{Message: fmt.Sprintf(
			"discovery chain %q uses inconsistent protocols; service %q has %q which is not %q",
			c.req.ServiceName, service, p, c.protocol)}
	}
	return nil
}

func (c *compiler) compile() (*structs.CompiledDiscoveryChain, error) {
	if err := c.assembleChain(); err != nil {
		return nil, err
	}
	if err := c.detectCircularReferences(); err != nil {
		return nil, err
	}
	c.flattenAdjacentSplitterNodes()
	c.removeUnusedNodes()
	for id := range c.loadedTargets {
		if !c.retainedTargets[id] {
			delete(c.loadedTargets, id)
		}
	}
	if !structs.IsProtocolHTTPLike(c.protocol) && c.usesAdvancedRouting {
		return nil, &GraphError{Message: fmt.Sprintf(
			"discovery chain %q uses a protocol %q that does not permit advanced routing or splitting behavior",
			c.req.ServiceName, c.protocol)}
	}
	if o := c.req.OverrideProtocol; o != "" && o != c.protocol {
		c.protocol = o
		c.customizedBy.protocol = true
	}
	hash, err := c.customizationHash()
	if err != nil {
		return nil, err
	}
	return &structs.CompiledDiscoveryChain{
		ServiceName:       c.req.ServiceName,
		Namespace:         defaultNamespace,
		Partition:         defaultPartition,
		Datacenter:        c.req.EvaluateInDatacenter,
		CustomizationHash: hash,
		Default:           c.isDefaultChain(),
		Protocol:          c.protocol,
		ServiceMeta:       c.serviceMeta,
		StartNode:         c.startNode,
		Nodes:             c.nodes,
		Targets:           c.loadedTargets,
	}, nil
}

// customizationHash identifies the overrides that changed the result (8
// hex digits), or is empty when none did.
func (c *compiler) customizationHash() (string, error) {
	cb := c.customizedBy
	if !cb.meshGateway && !cb.protocol && !cb.connectTimeout {
		return "", nil
	}
	// Consul hashes the overrides that took effect with hashstructure (v1),
	// whose result depends on the field and type names: an anonymous struct
	// with these fields gives Consul's hash, which clients see in the chain
	// and in the names of the clusters built from it.
	var customizations struct {
		OverrideMeshGateway    structs.MeshGatewayConfig
		OverrideProtocol       string
		OverrideConnectTimeout time.Duration
	}
	if cb.meshGateway {
		customizations.OverrideMeshGateway = c.req.OverrideMeshGateway
	}
	if cb.protocol {
		customizations.OverrideProtocol = c.req.OverrideProtocol
	}
	if cb.connectTimeout {
		customizations.OverrideConnectTimeout = c.req.OverrideConnectTimeout
	}
	v, err := hashstructure.Hash(customizations, nil)
	if err != nil {
		return "", fmt.Errorf("discovery chain: customization hash: %w", err)
	}
	return fmt.Sprintf("%x", v)[:8], nil
}

// isDefaultChain reports whether the chain is just the default resolution
// of the service itself (no routing, splitting, redirect or resolver
// settings).
func (c *compiler) isDefaultChain() bool {
	n := c.nodes[c.startNode]
	if n == nil || n.Type != structs.DiscoveryGraphNodeTypeResolver || !n.Resolver.Default {
		return false
	}
	t := c.loadedTargets[n.Resolver.Target]
	return t != nil && t.Service == c.req.ServiceName
}

// assembleChain builds the nodes from the top: the router of the chain's
// own service (the only router consulted), else its splitter or resolver.
func (c *compiler) assembleChain() error {
	service := c.req.ServiceName
	if sd := c.entries.Services[service]; sd != nil {
		c.serviceMeta = sd.Meta
	}
	router := c.entries.Routers[service]
	if router != nil && c.disableAdvancedRouting {
		router = nil
		c.customizedBy.protocol = true
	}
	if router == nil {
		n, err := c.getSplitterOrResolverNode(c.newTarget(structs.DiscoveryTargetOpts{Service: service}))
		if err != nil {
			return err
		}
		c.startNode = n.MapKey()
		return nil
	}

	routeNode := &structs.DiscoveryGraphNode{
		Type:   structs.DiscoveryGraphNodeTypeRouter,
		Name:   serviceNodeName(router.Name),
		Routes: make([]*structs.DiscoveryRoute, 0, len(router.Routes)+1),
	}
	c.usesAdvancedRouting = true
	if err := c.recordProtocol(router.Name); err != nil {
		return err
	}
	for i := range router.Routes {
		route := router.Routes[i]
		compiled := &structs.DiscoveryRoute{Definition: &route}
		routeNode.Routes = append(routeNode.Routes, compiled)

		svc, subset := service, ""
		if d := route.Destination; d != nil {
			svc, subset = defaultIfEmpty(d.Service, service), d.ServiceSubset
		}
		var (
			n   *structs.DiscoveryGraphNode
			err error
		)
		if subset == "" {
			n, err = c.getSplitterOrResolverNode(c.newTarget(structs.DiscoveryTargetOpts{Service: svc}))
		} else {
			// A route to a subset is not eligible for further splitting.
			n, err = c.getResolverNode(c.newTarget(structs.DiscoveryTargetOpts{Service: svc, ServiceSubset: subset}), false)
		}
		if err != nil {
			return err
		}
		compiled.NextNode = n.MapKey()
	}

	// The implicit catch-all route sends unmatched traffic to the service
	// itself.
	next, err := c.getSplitterOrResolverNode(c.newTarget(structs.DiscoveryTargetOpts{Service: router.Name}))
	if err != nil {
		return err
	}
	routeNode.Routes = append(routeNode.Routes, &structs.DiscoveryRoute{
		Definition: &structs.ServiceRoute{
			Match: &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/"}},
			Destination: &structs.ServiceRouteDestination{
				Service: router.Name, Namespace: defaultNamespace, Partition: defaultPartition,
			},
		},
		NextNode: next.MapKey(),
	})
	c.startNode = routeNode.MapKey()
	c.recordNode(routeNode)
	return nil
}

// newTarget returns the target named by opts (the chain's datacenter by
// default), creating it with its SNI and SPIFFE ID on first use.
func (c *compiler) newTarget(o structs.DiscoveryTargetOpts) *structs.DiscoveryTarget {
	o.Namespace = defaultNamespace
	o.Partition = defaultPartition
	o.Datacenter = defaultIfEmpty(o.Datacenter, c.req.EvaluateInDatacenter)
	id := structs.DiscoveryTargetID(o)
	if t, ok := c.loadedTargets[id]; ok {
		return t
	}
	t := &structs.DiscoveryTarget{
		ID:            id,
		Service:       o.Service,
		ServiceSubset: o.ServiceSubset,
		Namespace:     o.Namespace,
		Partition:     o.Partition,
		Datacenter:    o.Datacenter,
		SNI:           TargetSNI(o, c.req.EvaluateInTrustDomain),
		SpiffeID:      SpiffeID(c.req.EvaluateInTrustDomain, o.Datacenter, o.Service),
	}
	t.Name = t.SNI
	c.loadedTargets[id] = t
	return t
}

// TargetSNI is the SNI (and cluster name) of a target:
// "[subset.]service.namespace.dc.internal.<trust domain>".
func TargetSNI(o structs.DiscoveryTargetOpts, trustDomain string) string {
	parts := []string{o.Service, defaultIfEmpty(o.Namespace, defaultNamespace), o.Datacenter, "internal", trustDomain}
	if o.ServiceSubset != "" {
		parts = append([]string{o.ServiceSubset}, parts...)
	}
	return strings.Join(parts, ".")
}

// SpiffeID is the identity of a service's instances:
// "spiffe://<trust domain>/ns/default/dc/<dc>/svc/<service>", or "" when
// the trust domain is not known yet.
func SpiffeID(trustDomain, datacenter, service string) string {
	if trustDomain == "" {
		return ""
	}
	return fmt.Sprintf("spiffe://%s/ns/%s/dc/%s/svc/%s", trustDomain, defaultNamespace, datacenter, service)
}

// rewriteTarget applies a redirect or failover to a target: another
// service drops the subset, an explicit subset or datacenter replaces the
// current one.
func (c *compiler) rewriteTarget(t *structs.DiscoveryTarget, o structs.DiscoveryTargetOpts) *structs.DiscoveryTarget {
	m := t.Opts()
	if o.Service != "" && o.Service != m.Service {
		m.Service = o.Service
		m.ServiceSubset = ""
	}
	if o.ServiceSubset != "" {
		m.ServiceSubset = o.ServiceSubset
	}
	if o.Datacenter != "" {
		m.Datacenter = o.Datacenter
	}
	return c.newTarget(m)
}

func (c *compiler) getSplitterOrResolverNode(t *structs.DiscoveryTarget) (*structs.DiscoveryGraphNode, error) {
	n, err := c.getSplitterNode(t.Service)
	if err != nil || n != nil {
		return n, err
	}
	return c.getResolverNode(t, false)
}

func (c *compiler) getSplitterNode(service string) (*structs.DiscoveryGraphNode, error) {
	name := serviceNodeName(service)
	if prev, ok := c.splitterNodes[name]; ok {
		return prev, nil
	}
	splitter := c.entries.Splitters[service]
	if splitter != nil && c.disableAdvancedRouting {
		splitter = nil
		c.customizedBy.protocol = true
	}
	if splitter == nil {
		return nil, nil
	}
	n := &structs.DiscoveryGraphNode{
		Type:   structs.DiscoveryGraphNodeTypeSplitter,
		Name:   name,
		Splits: make([]*structs.DiscoverySplit, 0, len(splitter.Splits)),
	}
	// Recorded before recursing, so a loop back to it ends here (and is
	// reported by detectCircularReferences).
	c.recordNode(n)
	hasLB := false
	for i := range splitter.Splits {
		split := splitter.Splits[i]
		compiled := &structs.DiscoverySplit{Definition: &split, Weight: split.Weight}
		n.Splits = append(n.Splits, compiled)

		svc := defaultIfEmpty(split.Service, service)
		if svc != service && split.ServiceSubset == "" {
			next, err := c.getSplitterNode(svc)
			if err != nil {
				return nil, err
			}
			if next != nil {
				compiled.NextNode = next.MapKey()
				continue
			}
		}
		rn, err := c.getResolverNode(c.newTarget(structs.DiscoveryTargetOpts{Service: svc, ServiceSubset: split.ServiceSubset}), false)
		if err != nil {
			return nil, err
		}
		compiled.NextNode = rn.MapKey()
		// A route can apply one hash policy only: take the first hash-based
		// load balancer among the legs.
		if !hasLB && rn.LoadBalancer.IsHashBased() {
			n.LoadBalancer = rn.LoadBalancer
			hasLB = true
		}
	}
	c.usesAdvancedRouting = true
	return n, nil
}

// getResolverNode resolves a target through its resolver: redirects and the
// default subset first, then the node with its failover targets. With
// forFailover the node is returned without being recorded or failed over
// itself (failover is not recursive).
func (c *compiler) getResolverNode(t *structs.DiscoveryTarget, forFailover bool) (*structs.DiscoveryGraphNode, error) {
	history := map[string]bool{}
	var order []string
	for {
		if prev, ok := c.resolveNodes[t.ID]; ok {
			return prev, nil
		}
		if err := c.recordProtocol(t.Service); err != nil {
			return nil, err
		}
		resolver := c.resolver(t.Service)
		if history[t.ID] {
			order = append(order, t.ID)
			return nil, &GraphError{Message: fmt.Sprintf("detected circular resolver redirect: [%s]", strings.Join(order, " -> "))}
		}
		history[t.ID] = true
		order = append(order, t.ID)

		if r := resolver.Redirect; r != nil {
			redirected := c.rewriteTarget(t, structs.DiscoveryTargetOpts{
				Service: r.Service, ServiceSubset: r.ServiceSubset, Datacenter: r.Datacenter,
			})
			if redirected.ID != t.ID {
				t = redirected
				continue
			}
		}
		if t.ServiceSubset == "" && resolver.DefaultSubset != "" {
			t = c.rewriteTarget(t, structs.DiscoveryTargetOpts{ServiceSubset: resolver.DefaultSubset})
			continue
		}
		return c.buildResolverNode(t, resolver, forFailover)
	}
}

// resolver returns the service's resolver, materializing a default one.
func (c *compiler) resolver(service string) *structs.ServiceResolverConfigEntry {
	r, ok := c.resolvers[service]
	if !ok || r == nil {
		r = &structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: service}
		c.resolvers[service] = r
	}
	return r
}

func (c *compiler) buildResolverNode(t *structs.DiscoveryTarget, resolver *structs.ServiceResolverConfigEntry, forFailover bool) (*structs.DiscoveryGraphNode, error) {
	if !resolver.SubsetExists(t.ServiceSubset) {
		return nil, &GraphError{Message: fmt.Sprintf("service %q does not have a subset named %q", t.Service, t.ServiceSubset)}
	}
	timeout := resolver.ConnectTimeout.Duration()
	if timeout < 1 {
		timeout = DefaultConnectTimeout
	}
	if o := c.req.OverrideConnectTimeout; o > 0 && o != timeout {
		timeout = o
		c.customizedBy.connectTimeout = true
	}
	t.ConnectTimeout = structs.Duration(timeout)
	n := &structs.DiscoveryGraphNode{
		Type: structs.DiscoveryGraphNodeTypeResolver,
		Name: t.ID,
		Resolver: &structs.DiscoveryResolver{
			Default:        resolver.IsDefault(),
			Target:         t.ID,
			ConnectTimeout: structs.Duration(timeout),
			RequestTimeout: resolver.RequestTimeout.Duration(),
		},
		LoadBalancer: resolver.LoadBalancer,
	}
	t.Subset = resolver.Subsets[t.ServiceSubset]

	sd := c.entries.Services[t.Service]
	if sd != nil && sd.ExternalSNI != "" {
		t.SNI = sd.ExternalSNI
		t.External = true
		for _, chk := range []struct {
			what string
			set  bool
		}{
			{"redirects", resolver.Redirect != nil}, {"subsets", len(resolver.Subsets) > 0}, {"failover", len(resolver.Failover) > 0},
		} {
			if chk.set {
				return nil, &GraphError{Message: fmt.Sprintf(
					"service %q has an external SNI set; cannot define %s for external services", t.Service, chk.what)}
			}
		}
	}
	if t.External {
		t.MeshGateway.Mode = ""
	} else {
		if sd != nil {
			t.MeshGateway = sd.MeshGateway
			t.TransparentProxy.DialedDirectly = sd.TransparentProxy.DialedDirectly
		}
		if pd := c.entries.ProxyDefaults; pd != nil {
			if t.MeshGateway.Mode == "" {
				t.MeshGateway.Mode = pd.MeshGateway.Mode
			}
			if !t.TransparentProxy.DialedDirectly {
				t.TransparentProxy.DialedDirectly = pd.TransparentProxy.DialedDirectly
			}
		}
		if o := c.req.OverrideMeshGateway.Mode; o != "" && o != t.MeshGateway.Mode {
			t.MeshGateway.Mode = o
			c.customizedBy.meshGateway = true
		}
	}
	c.retainedTargets[t.ID] = true
	if forFailover {
		return n, nil
	}
	c.recordNode(n)

	failover, ok := resolver.Failover[t.ServiceSubset]
	if !ok {
		failover, ok = resolver.Failover["*"]
	}
	if !ok {
		return n, nil
	}
	var targets []*structs.DiscoveryTarget
	add := func(o structs.DiscoveryTargetOpts) {
		if ft := c.rewriteTarget(t, o); ft.ID != t.ID {
			targets = append(targets, ft)
		}
	}
	switch {
	case len(failover.Datacenters) > 0:
		for _, dc := range failover.Datacenters {
			add(structs.DiscoveryTargetOpts{Service: failover.Service, ServiceSubset: failover.ServiceSubset, Datacenter: dc})
		}
	case len(failover.Targets) > 0:
		for _, ft := range failover.Targets {
			add(structs.DiscoveryTargetOpts{Service: ft.Service, ServiceSubset: ft.ServiceSubset, Datacenter: ft.Datacenter})
		}
	default:
		add(structs.DiscoveryTargetOpts{Service: failover.Service, ServiceSubset: failover.ServiceSubset})
	}
	if len(targets) == 0 {
		return n, nil
	}
	df := &structs.DiscoveryFailover{Policy: failover.Policy}
	for _, ft := range targets {
		fn, err := c.getResolverNode(ft, true)
		if err != nil {
			return nil, err
		}
		df.Targets = append(df.Targets, fn.Resolver.Target)
	}
	n.Resolver.Failover = df
	return n, nil
}

// detectCircularReferences walks the router and splitter nodes depth-first
// and refuses a path that comes back to a node on it.
func (c *compiler) detectCircularReferences() error {
	var path []string
	onPath := map[string]bool{}
	var visit func(name string) error
	visit = func(name string) error {
		path = append(path, name)
		if onPath[name] {
			return &GraphError{Message: fmt.Sprintf("detected circular reference: [%s]", strings.Join(path, " -> "))}
		}
		onPath[name] = true
		n := c.nodes[name]
		var next []string
		switch n.Type {
		case structs.DiscoveryGraphNodeTypeRouter:
			for _, r := range n.Routes {
				next = append(next, r.NextNode)
			}
		case structs.DiscoveryGraphNodeTypeSplitter:
			for _, s := range n.Splits {
				next = append(next, s.NextNode)
			}
		}
		for _, nn := range next {
			if err := visit(nn); err != nil {
				return err
			}
		}
		onPath[name] = false
		path = path[:len(path)-1]
		return nil
	}
	return visit(c.startNode)
}

// flattenAdjacentSplitterNodes replaces each split that leads to another
// splitter by that splitter's legs, with multiplied weights and merged
// header changes, until no splitter leads to a splitter.
func (c *compiler) flattenAdjacentSplitterNodes() {
	for {
		changed := false
		for _, key := range sortedKeys(c.nodes) {
			n := c.nodes[key]
			if n.Type != structs.DiscoveryGraphNodeTypeSplitter {
				continue
			}
			fixed := make([]*structs.DiscoverySplit, 0, len(n.Splits))
			nodeChanged := false
			for _, s := range n.Splits {
				next := c.nodes[s.NextNode]
				if next.Type != structs.DiscoveryGraphNodeTypeSplitter {
					fixed = append(fixed, s)
					continue
				}
				nodeChanged = true
				for _, inner := range next.Splits {
					fixed = append(fixed, &structs.DiscoverySplit{
						Definition: mergeSplit(inner.Definition, s.Definition),
						Weight:     structs.NormalizeServiceSplitWeight(s.Weight * inner.Weight / 100),
						NextNode:   inner.NextNode,
					})
				}
			}
			if nodeChanged {
				n.Splits = fixed
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}

// mergeSplit returns a copy of child with the parent's request header
// changes applied under the child's, and the child's response changes
// under the parent's (a request passes the parent first, a response the
// child first).
func mergeSplit(child, parent *structs.ServiceSplit) *structs.ServiceSplit {
	out := *child
	if parent != nil {
		out.RequestHeaders = mergeHeaders(parent.RequestHeaders, child.RequestHeaders)
		out.ResponseHeaders = mergeHeaders(child.ResponseHeaders, parent.ResponseHeaders)
	}
	return &out
}

func mergeHeaders(base, over *structs.HTTPHeaderModifiers) *structs.HTTPHeaderModifiers {
	if base.IsZero() {
		return over
	}
	if over.IsZero() {
		return base
	}
	m := &structs.HTTPHeaderModifiers{Add: map[string]string{}, Set: map[string]string{}}
	for _, src := range []*structs.HTTPHeaderModifiers{base, over} {
		for k, v := range src.Add {
			m.Add[k] = v
		}
		for k, v := range src.Set {
			m.Set[k] = v
		}
	}
	seen := map[string]bool{}
	for _, src := range []*structs.HTTPHeaderModifiers{base, over} {
		for _, r := range src.Remove {
			if !seen[r] {
				seen[r] = true
				m.Remove = append(m.Remove, r)
			}
		}
	}
	return m
}

// removeUnusedNodes drops nodes no longer reachable from the start (after
// flattening).
func (c *compiler) removeUnusedNodes() {
	visited := map[string]bool{}
	todo := []string{c.startNode}
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if visited[name] {
			continue
		}
		visited[name] = true
		n := c.nodes[name]
		for _, r := range n.Routes {
			todo = append(todo, r.NextNode)
		}
		for _, s := range n.Splits {
			todo = append(todo, s.NextNode)
		}
	}
	for name := range c.nodes {
		if !visited[name] {
			delete(c.nodes, name)
		}
	}
}
