package query

import (
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// GatewayServices lists the services of the ingress or terminating
// gateway named gateway, as the store's gateway-services table holds them
// (its config entry with wildcards expanded: see state.Store.GatewayServices).
// A gateway without an entry has none.
func GatewayServices(ws memdb.WatchSet, st *state.Store, gateway string) (*structs.IndexedGatewayServices, error) {
	if gateway == "" {
		return nil, ErrMissingName
	}
	idx, svcs, err := st.GatewayServices(ws, gateway)
	if err != nil {
		return nil, err
	}
	out := &structs.IndexedGatewayServices{Services: svcs}
	out.Index = idx
	return out, nil
}

// ingressGatewayNodes lists the instances (with their checks) of the
// ingress gateways whose config entry exposes service, by name or through
// a wildcard, carrying every tag of tags: Consul's
// /v1/health/ingress/<service>. Gateways come in name order. It watches
// the ingress-gateway entries, what their wildcards expand to, and the
// gateways' health.
func ingressGatewayNodes(ws memdb.WatchSet, st *state.Store, service string, tags []string) (uint64, structs.CheckServiceNodes, error) {
	idx, links, err := st.ServiceGateways(ws, service, structs.ServiceKindIngressGateway)
	if err != nil {
		return 0, nil, err
	}
	var gateways []string
	for _, l := range links {
		if !slices.Contains(gateways, l.Gateway) {
			gateways = append(gateways, l.Gateway)
		}
	}
	out := structs.CheckServiceNodes{}
	for _, gw := range gateways {
		hidx, nodes, err := st.CheckServiceNodes(ws, gw, tags, false)
		if err != nil {
			return 0, nil, err
		}
		idx = max(idx, hidx)
		for _, n := range nodes {
			if n.Service != nil && n.Service.Kind == structs.ServiceKindIngressGateway {
				out = append(out, n)
			}
		}
	}
	return idx, out, nil
}
