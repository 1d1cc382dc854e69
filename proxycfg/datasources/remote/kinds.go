package remote

import (
	"context"
	"fmt"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/internal/fanout"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// One type per proxycfg data-source interface; each validates its request
// and names the RPC method that answers it.

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidRequest}, args...)...)
}

type caRoots struct{ s *Sources }

func (c caRoots) Notify(ctx context.Context, req *structs.DCSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	return subscribe[structs.DCSpecificRequest, structs.IndexedCARoots](c.s, ctx, structs.MethodConnectCARoots, req, "", corr, ch, nil)
}

type intentionsSource struct{ s *Sources }

// Notify asks Intention.Match by destination for the one service; the
// reply's only match list is the result.
func (c intentionsSource) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("intentions: no service name")
	}
	mreq := &structs.IntentionQueryRequest{
		Match:        &structs.IntentionQueryMatch{Type: structs.IntentionMatchDestination, Names: []string{req.ServiceName}},
		QueryOptions: req.QueryOptions,
	}
	return subscribe[structs.IntentionQueryRequest, structs.IndexedIntentionMatches](c.s, ctx, structs.MethodIntentionMatch, mreq, req.ServiceName, corr, ch,
		func(r *structs.IndexedIntentionMatches) (any, error) {
			out := &structs.IndexedIntentions{Intentions: structs.Intentions{}, QueryMeta: r.QueryMeta}
			if len(r.Matches) == 1 && r.Matches[0] != nil {
				out.Intentions = r.Matches[0]
			}
			return out, nil
		})
}

type intentionUpstreams struct{ s *Sources }

func (c intentionUpstreams) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("intention upstreams: no service name")
	}
	return subscribe[structs.ServiceSpecificRequest, structs.ServiceNames](c.s, ctx, structs.MethodIntentionUpstreams, req, req.ServiceName, corr, ch, nil)
}

type configEntry struct{ s *Sources }

func (c configEntry) Notify(ctx context.Context, req *structs.ConfigEntryQuery, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Kind == "" || req.Name == "" {
		return invalid("config entry: kind and name are required")
	}
	if !structs.ValidConfigEntryKind(req.Kind) {
		return invalid("config entry: unknown kind %q", req.Kind)
	}
	return subscribe[structs.ConfigEntryQuery, structs.ConfigEntryResponse](c.s, ctx, structs.MethodConfigEntryGet, req, req.Kind+"/"+req.Name, corr, ch, nil)
}

type configEntryList struct{ s *Sources }

func (c configEntryList) Notify(ctx context.Context, req *structs.ConfigEntryQuery, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Kind == "" || !structs.ValidConfigEntryKind(req.Kind) {
		return invalid("config entry list: unknown kind %q", req.Kind)
	}
	return subscribe[structs.ConfigEntryQuery, structs.IndexedConfigEntries](c.s, ctx, structs.MethodConfigEntryList, req, req.Kind, corr, ch,
		func(r *structs.IndexedConfigEntries) (any, error) {
			if r.Entries == nil {
				r.Entries = []structs.ConfigEntry{} // msgpack turns empty into nil
			}
			return r, nil
		})
}

type serviceConfig struct{ s *Sources }

func (c serviceConfig) Notify(ctx context.Context, req *structs.ServiceConfigRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Name == "" {
		return invalid("service config: no service name")
	}
	return subscribe[structs.ServiceConfigRequest, structs.ServiceConfigResponse](c.s, ctx, structs.MethodResolveServiceConfig, req, req.Name, corr, ch, nil)
}

type discoveryChain struct{ s *Sources }

func (c discoveryChain) Notify(ctx context.Context, req *structs.DiscoveryChainRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Name == "" {
		return invalid("discovery chain: no service name")
	}
	return subscribe[structs.DiscoveryChainRequest, structs.DiscoveryChainResponse](c.s, ctx, structs.MethodDiscoveryChainGet, req, req.Name, corr, ch, nil)
}

type health struct{ s *Sources }

// Notify asks Health.ServiceNodes without the filter, which it applies
// to each reply itself.
func (c health) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("health: no service name")
	}
	filter := req.Filter
	if filter != "" {
		if _, err := structs.ParseFilter(filter); err != nil {
			return invalid("health: filter: %v", err)
		}
	}
	return subscribe[structs.ServiceSpecificRequest, structs.IndexedCheckServiceNodes](c.s, ctx, structs.MethodHealthServiceNodes, req, req.ServiceName, corr, ch,
		func(r *structs.IndexedCheckServiceNodes) (any, error) {
			nodes, err := query.FilterNodes(r.Nodes, filter)
			if err != nil {
				return nil, err
			}
			if nodes == nil {
				nodes = structs.CheckServiceNodes{}
			}
			r.Nodes = nodes
			return r, nil
		})
}

type serviceList struct{ s *Sources }

func (c serviceList) Notify(ctx context.Context, req *structs.DCSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	return subscribe[structs.DCSpecificRequest, structs.IndexedServices](c.s, ctx, structs.MethodCatalogListServices, req, "", corr, ch, nil)
}

type gatewayServices struct{ s *Sources }

func (c gatewayServices) Notify(ctx context.Context, req *structs.ServiceSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.ServiceName == "" {
		return invalid("gateway services: no gateway name")
	}
	return subscribe[structs.ServiceSpecificRequest, structs.IndexedGatewayServices](c.s, ctx, structs.MethodGatewayServices, req, req.ServiceName, corr, ch, nil)
}

type servicesByKind struct{ s *Sources }

func (c servicesByKind) Notify(ctx context.Context, req *structs.ServiceKindRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	if req.Kind == structs.ServiceKindTypical {
		return invalid("services by kind: no kind")
	}
	return subscribe[structs.ServiceKindRequest, structs.IndexedCheckServiceNodes](c.s, ctx, structs.MethodServicesByKind, req, string(req.Kind), corr, ch, nil)
}

// datacenters answers with the agent's datacenter only: Trellis has no
// WAN federation yet.
type datacenters struct{ s *Sources }

func (c datacenters) Notify(ctx context.Context, req *structs.DCSpecificRequest, corr string, ch chan<- proxycfg.UpdateEvent) error {
	list := &proxycfg.DatacenterList{Datacenters: []string{c.s.cfg.Datacenter}}
	list.Index = 1
	return c.s.group.Subscribe(ctx, fanout.Key("datacenters", req), "datacenters", corr, ch, func() fanout.Runner {
		return fanout.Static(list)
	})
}
