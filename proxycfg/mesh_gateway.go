package proxycfg

import (
	"context"
	"slices"

	"github.com/trellis-mesh/trellis/structs"
)

// meshGateway is the state machine of a mesh gateway.
//
// Watches: roots and the mesh entry (common); the services of the local
// datacenter and, per service, its Connect endpoints (the gateway routes
// incoming SNI to them); every service-resolver entry (subsets); the
// known datacenters and, per other datacenter, its mesh gateways (the
// gateway forwards traffic for remote datacenters to them). Services and
// datacenters that disappear lose their watches. It also watches its own
// resolved service config (watchGatewayServiceConfig).
//
// Valid once the roots, the mesh entry, the service list and the
// resolvers are known. Not supported: WAN federation of servers through
// mesh gateways, peering, and the gateway's own leaf (Consul needs one
// only for those).
type meshGateway struct {
	svcConfig    *structs.ServiceConfigResponse
	servicesSet  bool
	resolversSet bool
	// services and gateways are mutated in place and copied into each
	// snapshot; their values (result lists) are shared and read-only.
	services  map[string]structs.CheckServiceNodes
	resolvers map[string]*structs.ServiceResolverConfigEntry
	dcs       []string
	gateways  map[string]structs.CheckServiceNodes
}

func (g *meshGateway) start(s *state) error {
	g.services = make(map[string]structs.CheckServiceNodes)
	g.gateways = make(map[string]structs.CheckServiceNodes)
	listReq := &structs.DCSpecificRequest{QueryOptions: s.query()}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchServiceList}, listReq, func(ctx context.Context, corr string) error {
		return s.m.ds.ServiceList.Notify(ctx, listReq, corr, s.events)
	}); err != nil {
		return err
	}
	resReq := &structs.ConfigEntryQuery{Kind: structs.ServiceResolver, QueryOptions: s.query()}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchResolvers}, resReq, func(ctx context.Context, corr string) error {
		return s.m.ds.ConfigEntryList.Notify(ctx, resReq, corr, s.events)
	}); err != nil {
		return err
	}
	dcReq := &structs.DCSpecificRequest{QueryOptions: s.query()}
	if _, err := s.reg.ensure(s.ctx, watchKey{kind: watchDatacenters}, dcReq, func(ctx context.Context, corr string) error {
		return s.m.ds.Datacenters.Notify(ctx, dcReq, corr, s.events)
	}); err != nil {
		return err
	}
	return watchGatewayServiceConfig(s)
}

func (g *meshGateway) handle(s *state, w *watch, ev UpdateEvent) bool {
	switch w.kind {
	case watchServiceConfig:
		return store(s, ev, &g.svcConfig)
	case watchServiceList:
		r, ok := resultAs[structs.IndexedServices](s, ev)
		if ok {
			g.servicesSet = true
			g.reconcileServices(s, r.Services)
		}
		return ok
	case watchServiceHealth:
		r, ok := resultAs[structs.IndexedCheckServiceNodes](s, ev)
		if ok {
			g.services[w.key] = nonNilNodes(r.Nodes)
		}
		return ok
	case watchResolvers:
		r, ok := resultAs[structs.IndexedConfigEntries](s, ev)
		if ok {
			res := make(map[string]*structs.ServiceResolverConfigEntry, len(r.Entries))
			for _, e := range r.Entries {
				if re, isRes := e.(*structs.ServiceResolverConfigEntry); isRes {
					res[re.Name] = re
				}
			}
			g.resolvers, g.resolversSet = res, true
		}
		return ok
	case watchDatacenters:
		r, ok := resultAs[DatacenterList](s, ev)
		if ok {
			g.reconcileDatacenters(s, r.Datacenters)
		}
		return ok
	case watchMeshGateways:
		r, ok := resultAs[structs.IndexedCheckServiceNodes](s, ev)
		if ok {
			g.gateways[w.key] = nonNilNodes(r.Nodes)
		}
		return ok
	}
	return false
}

func (g *meshGateway) reconcileServices(s *state, services map[string][]string) {
	keep := func(name string) bool {
		_, ok := services[name]
		return ok && name != structs.ConsulServiceName
	}
	s.reg.cancelWhere(watchServiceHealth, "", keep)
	for name := range g.services {
		if !keep(name) {
			delete(g.services, name)
		}
	}
	for name := range services {
		if !keep(name) {
			continue
		}
		req := &structs.ServiceSpecificRequest{ServiceName: name, Connect: true, QueryOptions: s.query()}
		s.watchOrLog(watchKey{kind: watchServiceHealth, key: name}, req, func(ctx context.Context, corr string) error {
			return s.m.ds.Health.Notify(ctx, req, corr, s.events)
		})
	}
}

func (g *meshGateway) reconcileDatacenters(s *state, dcs []string) {
	local := s.m.cfg.Datacenter
	others := make([]string, 0, len(dcs))
	for _, dc := range dcs {
		if dc != local && dc != "" && !slices.Contains(others, dc) {
			others = append(others, dc)
		}
	}
	slices.Sort(others)
	g.dcs = others
	keep := func(dc string) bool { return slices.Contains(others, dc) }
	s.reg.cancelWhere(watchMeshGateways, "", keep)
	for dc := range g.gateways {
		if !keep(dc) {
			delete(g.gateways, dc)
		}
	}
	for _, dc := range others {
		req := &structs.ServiceKindRequest{Kind: structs.ServiceKindMeshGateway, QueryOptions: structs.QueryOptions{Datacenter: dc, Token: s.token}}
		s.watchOrLog(watchKey{kind: watchMeshGateways, key: dc}, req, func(ctx context.Context, corr string) error {
			return s.m.ds.ServicesByKind.Notify(ctx, req, corr, s.events)
		})
	}
}

func (g *meshGateway) valid() bool { return g.servicesSet && g.resolversSet }

func (g *meshGateway) newSnapshot(snap ConfigSnapshot) *ConfigSnapshot {
	services := make(map[string]structs.CheckServiceNodes, len(g.services))
	for k, v := range g.services {
		services[k] = v
	}
	gateways := make(map[string]structs.CheckServiceNodes, len(g.gateways))
	for k, v := range g.gateways {
		gateways[k] = v
	}
	snap.MeshGateway = &MeshGatewaySnapshot{
		Services:             services,
		Resolvers:            g.resolvers,
		Datacenters:          g.dcs,
		GatewaysByDatacenter: gateways,
		ServiceConfig:        g.svcConfig,
	}
	return &snap
}
