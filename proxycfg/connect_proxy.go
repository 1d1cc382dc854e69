package proxycfg

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// connectProxy is the state machine of a sidecar (kind connect-proxy).
//
// Watches: CA roots and the mesh entry (common to every kind); the leaf,
// the intentions and the resolved central config of the destination
// service; once that config is known, one discovery chain per upstream,
// then the endpoints of every chain target (upstreamSet). In transparent
// mode it also watches the services intentions let the destination reach
// and treats each as an implicit upstream.
//
// Valid once the roots, the mesh entry (or its absence), the leaf, the
// intentions and the resolved config are known. Upstream chains and
// endpoints are not required: an upstream whose chain is unknown is in the
// snapshot without one.
//
// Transparent proxying is partial: implicit upstreams come from
// IntentionUpstreams and get chains (which carry the upstream's virtual
// IPs) and endpoints like explicit ones, but nothing here provides
// MeshDestinationsOnly enforcement beyond carrying the mesh entry, or
// DialedDirectly passthrough data.
type connectProxy struct {
	leaf          *structs.IssuedCert
	intentions    structs.Intentions
	intentionsSet bool
	svcConfig     *structs.ServiceConfigResponse
	// implicit are the transparent-mode upstream names, sorted.
	implicit []string
	// dynamic are the run-time upstream names (SetUpstreams), sorted.
	dynamic  []string
	ups      upstreamSet
	warnedPQ bool
}

func (c *connectProxy) start(s *state) error {
	dest := s.svc.Proxy.DestinationServiceName
	leafReq := &LeafRequest{Service: dest, Datacenter: s.m.cfg.Datacenter, Token: s.token}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchLeaf}, leafReq, func(ctx context.Context, corr string) error {
		return s.m.ds.Leaf.Notify(ctx, leafReq, corr, s.events)
	}); err != nil {
		return err
	}
	ixnReq := &structs.ServiceSpecificRequest{ServiceName: dest, QueryOptions: s.query()}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchIntentions}, ixnReq, func(ctx context.Context, corr string) error {
		return s.m.ds.Intentions.Notify(ctx, ixnReq, corr, s.events)
	}); err != nil {
		return err
	}
	_, err := c.watchServiceConfig(s)
	return err
}

// watchServiceConfig starts (or, when the upstream names changed,
// restarts) the watch of the destination's resolved config, which asks
// for the central config of every declared and run-time upstream. The
// last result stays in use until the new one arrives.
func (c *connectProxy) watchServiceConfig(s *state) (bool, error) {
	var names []string
	for _, u := range s.svc.Proxy.Upstreams {
		if u.DestinationType != "prepared_query" && !slices.Contains(names, u.DestinationName) {
			names = append(names, u.DestinationName)
		}
	}
	for _, n := range c.dynamic {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	cfgReq := &structs.ServiceConfigRequest{Name: s.svc.Proxy.DestinationServiceName, Upstreams: names, QueryOptions: s.query()}
	return s.reg.ensure(s.ctx, watchKey{kind: watchServiceConfig}, cfgReq, func(ctx context.Context, corr string) error {
		return s.m.ds.ResolvedServiceConfig.Notify(ctx, cfgReq, corr, s.events)
	})
}

func (c *connectProxy) handle(s *state, w *watch, ev UpdateEvent) bool {
	switch w.kind {
	case watchLeaf:
		return store(s, ev, &c.leaf)
	case watchIntentions:
		r, ok := resultAs[structs.IndexedIntentions](s, ev)
		if ok {
			c.intentions, c.intentionsSet = r.Intentions, true
		}
		return ok
	case watchServiceConfig:
		r, ok := resultAs[structs.ServiceConfigResponse](s, ev)
		if ok {
			c.svcConfig = r
			c.reconcile(s)
		}
		return ok
	case watchIntentionUpstreams:
		r, ok := resultAs[structs.ServiceNames](s, ev)
		if ok {
			c.implicit = r.Services
			c.reconcile(s)
		}
		return ok
	}
	changed, _ := c.ups.handle(s, w, ev)
	return changed
}

// mode is the effective proxy mode.
func (c *connectProxy) mode(svc *structs.NodeService) structs.ProxyMode {
	if svc.Proxy.Mode != structs.ProxyModeDefault || c.svcConfig == nil {
		return svc.Proxy.Mode
	}
	return c.svcConfig.Mode
}

// reconcile makes the upstream set (and the transparent-mode watch)
// follow the registration, the central config and the implicit
// upstreams. Chain requests depend on the central config, so nothing is
// watched before it is known.
func (c *connectProxy) reconcile(s *state) {
	if c.svcConfig == nil {
		return
	}
	dest := s.svc.Proxy.DestinationServiceName
	transparent := c.mode(s.svc) == structs.ProxyModeTransparent
	iuKey := watchKey{kind: watchIntentionUpstreams}
	if transparent {
		req := &structs.ServiceSpecificRequest{ServiceName: dest, QueryOptions: s.query()}
		s.watchOrLog(iuKey, req, func(ctx context.Context, corr string) error {
			return s.m.ds.IntentionUpstreams.Notify(ctx, req, corr, s.events)
		})
	} else {
		s.reg.cancelKey(iuKey)
		c.implicit = nil
	}

	want := make(map[UpstreamID]bool, len(s.svc.Proxy.Upstreams)+len(c.implicit)+len(c.dynamic))
	for i := range s.svc.Proxy.Upstreams {
		up := &s.svc.Proxy.Upstreams[i]
		if up.DestinationType == "prepared_query" {
			if !c.warnedPQ {
				c.warnedPQ = true
				s.log().Warn("proxycfg: prepared-query upstreams are not supported; ignoring", "upstream", up.DestinationName)
			}
			continue
		}
		id := NewUpstreamID(up)
		if want[id] {
			continue // a duplicate definition: the first one wins
		}
		want[id] = true
		cfg := c.upstreamConfig(up.DestinationName)
		c.ups.set(s, id, up, cfg, c.chainRequest(s, up, cfg))
	}
	for _, name := range slices.Concat(c.implicit, c.dynamic) {
		id := UpstreamID(name)
		if want[id] || name == dest || name == structs.WildcardSpecifier {
			continue
		}
		want[id] = true
		up := &structs.Upstream{DestinationName: name, CentrallyConfigured: true}
		cfg := c.upstreamConfig(name)
		c.ups.set(s, id, up, cfg, c.chainRequest(s, up, cfg))
	}
	c.ups.retain(s, func(id UpstreamID) bool { return want[id] })
}

// upstreamConfig is the central config of one upstream: its own entry,
// else the defaults.
func (c *connectProxy) upstreamConfig(name string) *structs.UpstreamConfig {
	if cfg := c.svcConfig.UpstreamConfigs[name]; cfg != nil {
		return cfg
	}
	return c.svcConfig.UpstreamDefaults
}

// chainRequest is the discovery-chain request of one upstream. Overrides
// come from the upstream's own definition first, then from the central
// upstream config; the mesh gateway mode falls back to the proxy's and the
// service's.
func (c *connectProxy) chainRequest(s *state, up *structs.Upstream, cfg *structs.UpstreamConfig) *structs.DiscoveryChainRequest {
	dc := up.Datacenter
	if dc == "" {
		dc = s.m.cfg.Datacenter
	}
	req := &structs.DiscoveryChainRequest{Name: up.DestinationName, EvaluateInDatacenter: dc, QueryOptions: s.query()}
	var cfgMGW, cfgProto string
	var cfgTimeoutMs int
	if cfg != nil {
		cfgMGW, cfgProto, cfgTimeoutMs = cfg.MeshGateway.Mode, cfg.Protocol, cfg.ConnectTimeoutMs
	}
	req.OverrideMeshGateway.Mode = firstNonEmpty(up.MeshGateway.Mode, cfgMGW, s.svc.Proxy.MeshGateway.Mode, c.svcConfig.MeshGateway.Mode)
	req.OverrideProtocol = firstNonEmpty(strings.ToLower(structs.OpaqueString(up.Config, "protocol")), cfgProto)
	if ms, ok := structs.OpaqueInt(up.Config, "connect_timeout_ms"); ok && ms > 0 {
		req.OverrideConnectTimeout = time.Duration(ms) * time.Millisecond
	} else if cfgTimeoutMs > 0 {
		req.OverrideConnectTimeout = time.Duration(cfgTimeoutMs) * time.Millisecond
	}
	return req
}

func (c *connectProxy) valid() bool {
	return c.leaf != nil && c.intentionsSet && c.svcConfig != nil
}

// sidecarSnapshot is a sidecar's snapshot and its ConnectProxy part, in
// one allocation instead of two (a snapshot is built for every change of
// every proxy). They live and die together anyway.
type sidecarSnapshot struct {
	snap ConfigSnapshot
	cp   ConnectProxySnapshot
}

func (c *connectProxy) newSnapshot(common ConfigSnapshot) *ConfigSnapshot {
	b := &sidecarSnapshot{
		snap: common,
		cp: ConnectProxySnapshot{
			Leaf:          c.leaf,
			Intentions:    c.intentions,
			ServiceConfig: c.svcConfig,
			Mode:          c.mode(common.Service),
			Upstreams:     c.ups.snapshot(),
		},
	}
	b.snap.ConnectProxy = &b.cp
	return &b.snap
}
