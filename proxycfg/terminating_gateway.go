package proxycfg

import (
	"context"
	"reflect"

	"github.com/trellis-mesh/trellis/structs"
)

// terminatingGateway is the state machine of a terminating gateway.
//
// Watches: roots and the mesh entry (common); the gateway's linked
// services; and per linked service its own instances (the gateway dials
// them directly), its leaf (the gateway presents the service's identity to
// the mesh), the intentions to it (the gateway enforces them), its
// resolved central config (protocol) and its resolver entry (subsets).
// Unlinking a service cancels its five watches. It also watches its own
// resolved service config (watchGatewayServiceConfig).
//
// Valid once the roots, the mesh entry and the linked services are known;
// each TerminatingService says itself whether it is Ready.
type terminatingGateway struct {
	svcConfig   *structs.ServiceConfigResponse
	servicesSet bool
	// services values are never modified once stored (copy on change);
	// the map itself is copied into each snapshot.
	services map[string]*TerminatingService
}

func (g *terminatingGateway) start(s *state) error {
	g.services = make(map[string]*TerminatingService)
	req := &structs.ServiceSpecificRequest{ServiceName: s.svc.Service, QueryOptions: s.query()}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchGatewayServices}, req, func(ctx context.Context, corr string) error {
		return s.m.ds.GatewayServices.Notify(ctx, req, corr, s.events)
	}); err != nil {
		return err
	}
	return watchGatewayServiceConfig(s)
}

func (g *terminatingGateway) handle(s *state, w *watch, ev UpdateEvent) bool {
	switch w.kind {
	case watchServiceConfig: // the gateway's own, not a linked service's
		return store(s, ev, &g.svcConfig)
	case watchGatewayServices:
		r, ok := resultAs[structs.IndexedGatewayServices](s, ev)
		if ok {
			g.servicesSet = true
			g.reconcile(s, r.Services)
		}
		return ok
	}
	cur := g.services[w.owner]
	if cur == nil {
		return false
	}
	nu := *cur
	switch w.kind {
	case watchServiceHealth:
		r, ok := resultAs[structs.IndexedCheckServiceNodes](s, ev)
		if !ok {
			return false
		}
		nu.Endpoints = nonNilNodes(r.Nodes)
	case watchServiceLeaf:
		r, ok := resultAs[structs.IssuedCert](s, ev)
		if !ok {
			return false
		}
		nu.Leaf = r
	case watchServiceIntents:
		r, ok := resultAs[structs.IndexedIntentions](s, ev)
		if !ok {
			return false
		}
		nu.Intentions, nu.IntentionsSet = r.Intentions, true
	case watchServiceSvcConf:
		r, ok := resultAs[structs.ServiceConfigResponse](s, ev)
		if !ok {
			return false
		}
		nu.Config = r
	case watchResolver:
		r, ok := resultAs[structs.ConfigEntryResponse](s, ev)
		if !ok {
			return false
		}
		nu.Resolver, _ = r.Entry.(*structs.ServiceResolverConfigEntry)
		nu.ResolverSet = true
	default:
		return false
	}
	g.services[w.owner] = &nu
	return true
}

// reconcile follows the linked services: new ones get their watches,
// unlinked ones lose them.
func (g *terminatingGateway) reconcile(s *state, links []*structs.GatewayService) {
	want := make(map[string]*structs.GatewayService, len(links))
	for _, gs := range links {
		if gs != nil && gs.Service != "" {
			want[gs.Service] = gs
		}
	}
	for name := range g.services {
		if want[name] == nil {
			s.reg.cancelOwner(name)
			delete(g.services, name)
		}
	}
	for name, gs := range want {
		cur := g.services[name]
		switch {
		case cur == nil:
			g.services[name] = &TerminatingService{Link: gs}
			g.watchService(s, name)
		case !reflect.DeepEqual(cur.Link, gs):
			nu := *cur
			nu.Link = gs
			g.services[name] = &nu
		}
	}
}

func (g *terminatingGateway) watchService(s *state, name string) {
	q := s.query()
	health := &structs.ServiceSpecificRequest{ServiceName: name, QueryOptions: q}
	s.watchOrLog(watchKey{kind: watchServiceHealth, owner: name}, health, func(ctx context.Context, corr string) error {
		return s.m.ds.Health.Notify(ctx, health, corr, s.events)
	})
	leaf := &LeafRequest{Service: name, Datacenter: q.Datacenter, Token: s.token}
	s.watchOrLog(watchKey{kind: watchServiceLeaf, owner: name}, leaf, func(ctx context.Context, corr string) error {
		return s.m.ds.Leaf.Notify(ctx, leaf, corr, s.events)
	})
	ixn := &structs.ServiceSpecificRequest{ServiceName: name, QueryOptions: q}
	s.watchOrLog(watchKey{kind: watchServiceIntents, owner: name}, ixn, func(ctx context.Context, corr string) error {
		return s.m.ds.Intentions.Notify(ctx, ixn, corr, s.events)
	})
	conf := &structs.ServiceConfigRequest{Name: name, QueryOptions: q}
	s.watchOrLog(watchKey{kind: watchServiceSvcConf, owner: name}, conf, func(ctx context.Context, corr string) error {
		return s.m.ds.ResolvedServiceConfig.Notify(ctx, conf, corr, s.events)
	})
	res := &structs.ConfigEntryQuery{Kind: structs.ServiceResolver, Name: name, QueryOptions: q}
	s.watchOrLog(watchKey{kind: watchResolver, owner: name}, res, func(ctx context.Context, corr string) error {
		return s.m.ds.ConfigEntry.Notify(ctx, res, corr, s.events)
	})
}

func (g *terminatingGateway) valid() bool { return g.servicesSet }

func (g *terminatingGateway) newSnapshot(snap ConfigSnapshot) *ConfigSnapshot {
	services := make(map[string]*TerminatingService, len(g.services))
	for k, v := range g.services {
		services[k] = v
	}
	snap.TerminatingGateway = &TerminatingGatewaySnapshot{Services: services, ServiceConfig: g.svcConfig}
	return &snap
}
