package proxycfg

import (
	"context"

	"github.com/trellis-mesh/trellis/structs"
)

// ingressGateway is the state machine of an ingress gateway.
//
// Watches: roots and the mesh entry (common); the gateway's own leaf
// (it originates mTLS towards upstreams), its ingress-gateway config entry
// (listeners, TLS) and its gateway services (the entry's services with
// wildcards expanded). Each service becomes an upstream, with its
// discovery chain and the endpoints of every chain target, exactly as a
// sidecar's upstream (upstreamSet); the listener's protocol is passed as
// the chain's protocol override, as Consul does. It also watches its own
// resolved service config (watchGatewayServiceConfig).
//
// Valid once the roots, the mesh entry, the leaf, the config entry (or
// its absence) and the gateway services are known.
type ingressGateway struct {
	svcConfig   *structs.ServiceConfigResponse
	leaf        *structs.IssuedCert
	entry       *structs.IngressGatewayConfigEntry
	entrySet    bool
	services    []*structs.GatewayService
	servicesSet bool
	// listeners is rebuilt (a fresh map) on every change of entry or
	// services, so snapshots share it as is.
	listeners map[IngressListenerKey]*IngressListenerSnapshot
	ups       upstreamSet
}

func (g *ingressGateway) start(s *state) error {
	name := s.svc.Service
	leafReq := &LeafRequest{Service: name, Datacenter: s.m.cfg.Datacenter, Token: s.token}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchLeaf}, leafReq, func(ctx context.Context, corr string) error {
		return s.m.ds.Leaf.Notify(ctx, leafReq, corr, s.events)
	}); err != nil {
		return err
	}
	entryReq := &structs.ConfigEntryQuery{Kind: structs.IngressGateway, Name: name, QueryOptions: s.query()}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchGatewayEntry}, entryReq, func(ctx context.Context, corr string) error {
		return s.m.ds.ConfigEntry.Notify(ctx, entryReq, corr, s.events)
	}); err != nil {
		return err
	}
	gsReq := &structs.ServiceSpecificRequest{ServiceName: name, QueryOptions: s.query()}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchGatewayServices}, gsReq, func(ctx context.Context, corr string) error {
		return s.m.ds.GatewayServices.Notify(ctx, gsReq, corr, s.events)
	}); err != nil {
		return err
	}
	return watchGatewayServiceConfig(s)
}

// watchGatewayServiceConfig watches a gateway's own resolved service
// config, as a sidecar watches its destination's (same data source and
// request shape; a gateway has no upstreams to resolve). In Consul every
// proxy kind gets proxy-defaults (access logs above all) merged into its
// registration; here the gateways read it from this watch. No gateway
// waits for it: its snapshot is delivered without, and the config's
// arrival (or any later change) makes a new one.
func watchGatewayServiceConfig(s *state) error {
	req := &structs.ServiceConfigRequest{Name: s.svc.Service, QueryOptions: s.query()}
	_, err := s.reg.ensure(s.ctx, watchKey{kind: watchServiceConfig}, req, func(ctx context.Context, corr string) error {
		return s.m.ds.ResolvedServiceConfig.Notify(ctx, req, corr, s.events)
	})
	return err
}

func (g *ingressGateway) handle(s *state, w *watch, ev UpdateEvent) bool {
	switch w.kind {
	case watchServiceConfig:
		return store(s, ev, &g.svcConfig)
	case watchLeaf:
		return store(s, ev, &g.leaf)
	case watchGatewayEntry:
		r, ok := resultAs[structs.ConfigEntryResponse](s, ev)
		if ok {
			g.entry, _ = r.Entry.(*structs.IngressGatewayConfigEntry)
			g.entrySet = true
			g.rebuildListeners()
		}
		return ok
	case watchGatewayServices:
		r, ok := resultAs[structs.IndexedGatewayServices](s, ev)
		if ok {
			g.services, g.servicesSet = r.Services, true
			g.reconcile(s)
			g.rebuildListeners()
		}
		return ok
	}
	changed, _ := g.ups.handle(s, w, ev)
	return changed
}

// reconcile makes one upstream per exposed service.
func (g *ingressGateway) reconcile(s *state) {
	want := make(map[UpstreamID]bool, len(g.services))
	for _, gs := range g.services {
		if gs == nil || gs.Service == "" {
			continue
		}
		id := UpstreamID(gs.Service)
		if want[id] {
			continue // exposed on several listeners: one chain serves all
		}
		want[id] = true
		up := &structs.Upstream{DestinationName: gs.Service, LocalBindPort: gs.Port}
		req := &structs.DiscoveryChainRequest{
			Name:                 gs.Service,
			EvaluateInDatacenter: s.m.cfg.Datacenter,
			OverrideProtocol:     gs.Protocol,
			OverrideMeshGateway:  s.svc.Proxy.MeshGateway,
			QueryOptions:         s.query(),
		}
		g.ups.set(s, id, up, nil, req)
	}
	g.ups.retain(s, func(id UpstreamID) bool { return want[id] })
}

// rebuildListeners groups the gateway services by listener.
func (g *ingressGateway) rebuildListeners() {
	ls := make(map[IngressListenerKey]*IngressListenerSnapshot)
	for _, gs := range g.services {
		if gs == nil || gs.Service == "" {
			continue
		}
		key := IngressListenerKey{Protocol: gs.Protocol, Port: gs.Port}
		l := ls[key]
		if l == nil {
			l = &IngressListenerSnapshot{Key: key, Config: g.listenerConfig(gs.Port)}
			ls[key] = l
		}
		l.Services = append(l.Services, gs)
		l.Upstreams = append(l.Upstreams, UpstreamID(gs.Service))
	}
	g.listeners = ls
}

func (g *ingressGateway) listenerConfig(port int) *structs.IngressListener {
	if g.entry == nil {
		return nil
	}
	for i := range g.entry.Listeners {
		if g.entry.Listeners[i].Port == port {
			return &g.entry.Listeners[i]
		}
	}
	return nil
}

func (g *ingressGateway) valid() bool {
	return g.leaf != nil && g.entrySet && g.servicesSet
}

func (g *ingressGateway) newSnapshot(snap ConfigSnapshot) *ConfigSnapshot {
	snap.IngressGateway = &IngressGatewaySnapshot{
		Leaf:          g.leaf,
		Config:        g.entry,
		Listeners:     g.listeners,
		Upstreams:     g.ups.snapshot(),
		ServiceConfig: g.svcConfig,
	}
	return &snap
}
