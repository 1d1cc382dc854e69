package serverstate

import (
	"context"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/internal/fanout"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// One type per proxycfg data-source interface; each validates its request
// and names the read that answers it and the RPC method whose ACL rule
// that read follows (the CA roots and the datacenters need none).

type caRoots struct{ s *Sources }

func (c caRoots) Notify(ctx context.Context, req *structs.DCSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	return c.s.watch(ctx, "roots", req, req.Datacenter, "", corr, ch, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.CARoots(ws, st)
	})
}

type intentionsSource struct{ s *Sources }

func (c intentionsSource) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("intentions: no service name")
	}
	// The question Intention.Match answers for a client agent's proxy,
	// and so the one its ACL rule (intentions:read) is asked of.
	matchArgs := &structs.IntentionQueryRequest{
		Match:        &structs.IntentionQueryMatch{Type: structs.IntentionMatchDestination, Names: []string{req.ServiceName}},
		QueryOptions: req.QueryOptions,
	}
	return c.s.watch(ctx, "intentions", req, req.Datacenter, req.ServiceName, corr, ch, c.s.guard(structs.MethodIntentionMatch, matchArgs, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.IntentionsForDestination(ws, st, req.ServiceName)
	}))
}

type intentionUpstreams struct{ s *Sources }

func (c intentionUpstreams) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("intention upstreams: no service name")
	}
	allow := c.s.defaultAllow
	return c.s.watch(ctx, "intention-upstreams", req, req.Datacenter, req.ServiceName, corr, ch, c.s.guard(structs.MethodIntentionUpstreams, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.IntentionUpstreams(ws, st, req.ServiceName, allow)
	}))
}

type configEntry struct{ s *Sources }

func (c configEntry) Notify(ctx context.Context, req *structs.ConfigEntryQuery, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Kind == "" || req.Name == "" {
		return invalid("config entry: kind and name are required")
	}
	if !structs.ValidConfigEntryKind(req.Kind) {
		return invalid("config entry: unknown kind %q", req.Kind)
	}
	return c.s.watch(ctx, "config-entry", req, req.Datacenter, req.Kind+"/"+req.Name, corr, ch, c.s.guard(structs.MethodConfigEntryGet, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		idx, e, err := st.ConfigEntry(ws, req.Kind, req.Name)
		if err != nil {
			return nil, err
		}
		out := &structs.ConfigEntryResponse{Entry: e}
		out.Index = idx
		return out, nil
	}))
}

type configEntryList struct{ s *Sources }

func (c configEntryList) Notify(ctx context.Context, req *structs.ConfigEntryQuery, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Kind == "" || !structs.ValidConfigEntryKind(req.Kind) {
		return invalid("config entry list: unknown kind %q", req.Kind)
	}
	return c.s.watch(ctx, "config-entries", req, req.Datacenter, req.Kind, corr, ch, c.s.guard(structs.MethodConfigEntryList, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		idx, entries, err := st.ConfigEntriesByKind(ws, req.Kind)
		if err != nil {
			return nil, err
		}
		out := &structs.IndexedConfigEntries{Kind: req.Kind, Entries: entries}
		out.Index = idx
		return out, nil
	}))
}

type serviceConfig struct{ s *Sources }

func (c serviceConfig) Notify(ctx context.Context, req *structs.ServiceConfigRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Name == "" {
		return invalid("service config: no service name")
	}
	return c.s.watch(ctx, "service-config", req, req.Datacenter, req.Name, corr, ch, c.s.guard(structs.MethodResolveServiceConfig, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.ResolveServiceConfig(ws, st, req)
	}))
}

type discoveryChain struct{ s *Sources }

func (c discoveryChain) Notify(ctx context.Context, req *structs.DiscoveryChainRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Name == "" {
		return invalid("discovery chain: no service name")
	}
	dc := c.s.cfg.Datacenter
	return c.s.watch(ctx, "discovery-chain", req, req.Datacenter, req.Name, corr, ch, c.s.guard(structs.MethodDiscoveryChainGet, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.DiscoveryChain(ws, st, req, dc)
	}))
}

type health struct{ s *Sources }

func (c health) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("health: no service name")
	}
	if req.Filter != "" {
		if _, err := structs.ParseFilter(req.Filter); err != nil {
			return invalid("health: filter: %v", err)
		}
	}
	return c.s.watch(ctx, "health", req, req.Datacenter, req.ServiceName, corr, ch, c.s.guard(structs.MethodHealthServiceNodes, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.ServiceHealth(ws, st, req)
	}))
}

type serviceList struct{ s *Sources }

func (c serviceList) Notify(ctx context.Context, req *structs.DCSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	return c.s.watch(ctx, "services", req, req.Datacenter, "", corr, ch, c.s.guard(structs.MethodCatalogListServices, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		idx, svcs, err := st.Services(ws, req.NodeMetaFilters)
		if err != nil {
			return nil, err
		}
		out := &structs.IndexedServices{Services: svcs}
		out.Index = idx
		return out, nil
	}))
}

type gatewayServices struct{ s *Sources }

func (c gatewayServices) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("gateway services: no gateway name")
	}
	return c.s.watch(ctx, "gateway-services", req, req.Datacenter, req.ServiceName, corr, ch, c.s.guard(structs.MethodGatewayServices, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.GatewayServices(ws, st, req.ServiceName)
	}))
}

type servicesByKind struct{ s *Sources }

func (c servicesByKind) Notify(ctx context.Context, req *structs.ServiceKindRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Kind == structs.ServiceKindTypical {
		return invalid("services by kind: no kind")
	}
	return c.s.watch(ctx, "services-by-kind", req, req.Datacenter, string(req.Kind), corr, ch, c.s.guard(structs.MethodServicesByKind, req, func(ws memdb.WatchSet, st *state.Store) (any, error) {
		return query.ServicesByKind(ws, st, req.Kind)
	}))
}

// datacenters answers with the local datacenter only: Trellis has no WAN
// federation yet, so the store knows no other.
type datacenters struct{ s *Sources }

func (c datacenters) Notify(ctx context.Context, req *structs.DCSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	list := &proxycfg.DatacenterList{Datacenters: []string{c.s.cfg.Datacenter}}
	list.Index = 1
	return c.s.group.Subscribe(ctx, fanout.Key("datacenters", req), "datacenters", corr, ch, func() fanout.Runner {
		return fanout.Static(list)
	})
}
