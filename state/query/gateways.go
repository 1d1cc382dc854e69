package query

import (
	"cmp"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// GatewayServices lists the services of the ingress or terminating
// gateway named gateway, as its config entry links them; a gateway
// without an entry has none. A wildcard ("*") expands, for ingress, to
// every Connect service and, for terminating, to every ordinary service
// (kind typical), each marked FromWildcard; a service the entry names
// explicitly keeps its explicit settings. Ingress services are in (port,
// service) order, terminating ones in service order.
func GatewayServices(ws memdb.WatchSet, st *state.Store, gateway string) (*structs.IndexedGatewayServices, error) {
	if gateway == "" {
		return nil, ErrMissingName
	}
	iIdx, ing, err := st.ConfigEntry(ws, structs.IngressGateway, gateway)
	if err != nil {
		return nil, err
	}
	tIdx, term, err := st.ConfigEntry(ws, structs.TerminatingGateway, gateway)
	if err != nil {
		return nil, err
	}
	out := &structs.IndexedGatewayServices{Services: []*structs.GatewayService{}}
	out.Index = max(iIdx, tIdx)
	switch {
	case ing != nil:
		idx, svcs, err := ingressServices(ws, st, ing.(*structs.IngressGatewayConfigEntry))
		if err != nil {
			return nil, err
		}
		out.Services, out.Index = svcs, max(out.Index, idx)
	case term != nil:
		idx, svcs, err := terminatingServices(ws, st, term.(*structs.TerminatingGatewayConfigEntry))
		if err != nil {
			return nil, err
		}
		out.Services, out.Index = svcs, max(out.Index, idx)
	}
	return out, nil
}

func ingressServices(ws memdb.WatchSet, st *state.Store, e *structs.IngressGatewayConfigEntry) (uint64, []*structs.GatewayService, error) {
	var idx uint64
	var wildcard []string // loaded on first use
	out := []*structs.GatewayService{}
	for _, l := range e.Listeners {
		explicit := make(map[string]bool)
		for _, s := range l.Services {
			if s.Name != structs.WildcardSpecifier {
				explicit[s.Name] = true
			}
		}
		for _, s := range l.Services {
			gs := &structs.GatewayService{
				Gateway: e.Name, Service: s.Name, GatewayKind: structs.ServiceKindIngressGateway,
				Port: l.Port, Protocol: l.Protocol, Hosts: s.Hosts,
			}
			if s.Name != structs.WildcardSpecifier {
				out = append(out, gs)
				continue
			}
			if wildcard == nil {
				var err error
				if idx, wildcard, err = connectServices(ws, st); err != nil {
					return 0, nil, err
				}
			}
			for _, name := range wildcard {
				if name == e.Name || explicit[name] {
					continue
				}
				w := *gs
				w.Service, w.Hosts, w.FromWildcard = name, nil, true
				out = append(out, &w)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *structs.GatewayService) int {
		return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Service, b.Service))
	})
	return idx, out, nil
}

func terminatingServices(ws memdb.WatchSet, st *state.Store, e *structs.TerminatingGatewayConfigEntry) (uint64, []*structs.GatewayService, error) {
	var idx uint64
	byName := make(map[string]*structs.GatewayService)
	var wild *structs.LinkedService
	for i := range e.Services {
		ls := &e.Services[i]
		if ls.Name == structs.WildcardSpecifier {
			wild = ls
			continue
		}
		byName[ls.Name] = linked(e.Name, ls, ls.Name, false)
	}
	if wild != nil {
		var (
			names []string
			err   error
		)
		idx, names, err = servicesWhere(ws, st, func(name string) (bool, error) {
			_, nodes, err := st.ServiceNodes(nil, name, nil, false)
			return slices.ContainsFunc(nodes, func(n *structs.ServiceNode) bool {
				return n.ServiceKind == structs.ServiceKindTypical
			}), err
		})
		if err != nil {
			return 0, nil, err
		}
		for _, name := range names {
			if name != e.Name && byName[name] == nil {
				byName[name] = linked(e.Name, wild, name, true)
			}
		}
	}
	out := make([]*structs.GatewayService, 0, len(byName))
	for _, gs := range byName {
		out = append(out, gs)
	}
	slices.SortFunc(out, func(a, b *structs.GatewayService) int { return cmp.Compare(a.Service, b.Service) })
	return idx, out, nil
}

func linked(gateway string, ls *structs.LinkedService, name string, wildcard bool) *structs.GatewayService {
	return &structs.GatewayService{
		Gateway: gateway, Service: name, GatewayKind: structs.ServiceKindTerminatingGateway,
		CAFile: ls.CAFile, CertFile: ls.CertFile, KeyFile: ls.KeyFile, SNI: ls.SNI,
		FromWildcard: wildcard,
	}
}

// ingressGatewayNodes lists the instances (with their checks) of the
// ingress gateways whose config entry exposes service, by name or through
// a wildcard, carrying every tag of tags: Consul's
// /v1/health/ingress/<service>. Gateways come in name order. It watches
// the ingress-gateway entries, what their wildcards expand to, and the
// gateways' health.
func ingressGatewayNodes(ws memdb.WatchSet, st *state.Store, service string, tags []string) (uint64, structs.CheckServiceNodes, error) {
	idx, entries, err := st.ConfigEntriesByKind(ws, structs.IngressGateway)
	if err != nil {
		return 0, nil, err
	}
	var gateways []string
	for _, e := range entries {
		ing, ok := e.(*structs.IngressGatewayConfigEntry)
		if !ok {
			continue
		}
		sidx, svcs, err := ingressServices(ws, st, ing)
		if err != nil {
			return 0, nil, err
		}
		idx = max(idx, sidx)
		if slices.ContainsFunc(svcs, func(gs *structs.GatewayService) bool { return gs.Service == service }) {
			gateways = append(gateways, ing.Name)
		}
	}
	slices.Sort(gateways)
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
