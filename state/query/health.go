package query

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ServiceHealth lists the instances of req.ServiceName (or, with
// req.Connect, its Connect endpoints, or with req.Ingress the instances of
// the ingress gateways that expose it) with their checks, keeping only
// those that carry every tag of req.ServiceTags (with TagFilter), pass
// every check (with PassingOnly), run on nodes whose meta holds every pair
// of NodeMetaFilters, and match req.Filter (see FilterNodes).
func ServiceHealth(ws memdb.WatchSet, st *state.Store, req *structs.ServiceSpecificRequest) (*structs.IndexedCheckServiceNodes, error) {
	if req.ServiceName == "" {
		return nil, ErrMissingName
	}
	var tags []string
	if req.TagFilter {
		tags = req.ServiceTags
	}
	var idx uint64
	var nodes structs.CheckServiceNodes
	var err error
	if req.Ingress {
		idx, nodes, err = ingressGatewayNodes(ws, st, req.ServiceName, tags)
	} else {
		idx, nodes, err = st.CheckServiceNodes(ws, req.ServiceName, tags, req.Connect)
	}
	if err != nil {
		return nil, err
	}
	out := nodes[:0:0]
	for i := range nodes {
		if req.PassingOnly && !nodes[i].Passing() {
			continue
		}
		if len(req.NodeMetaFilters) > 0 && (nodes[i].Node == nil || !metaMatches(nodes[i].Node.Meta, req.NodeMetaFilters)) {
			continue
		}
		out = append(out, nodes[i])
	}
	if out, err = FilterNodes(out, req.Filter); err != nil {
		return nil, err
	}
	res := &structs.IndexedCheckServiceNodes{Nodes: out}
	res.Index = idx
	return res, nil
}

// FilterNodes keeps the instances matching expr (structs.ParseFilter
// syntax, evaluated against each structs.CheckServiceNode: selectors such
// as Service.Meta.version or Node.Node). An empty expr keeps all; nodes
// itself is never modified.
func FilterNodes(nodes structs.CheckServiceNodes, expr string) (structs.CheckServiceNodes, error) {
	if expr == "" {
		return nodes, nil
	}
	f, err := structs.ParseFilter(expr)
	if err == nil {
		err = f.Check((*structs.CheckServiceNode)(nil))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	out := structs.CheckServiceNodes{}
	for i := range nodes {
		if f.Evaluate(&nodes[i]) {
			out = append(out, nodes[i])
		}
	}
	return out, nil
}

// ServicesByKind lists every instance of every service of the given kind
// (mesh gateways, in practice) with its checks, by service name, node and
// service ID. It watches the services table (instances added or removed
// anywhere) and the health of the services that have such instances.
func ServicesByKind(ws memdb.WatchSet, st *state.Store, kind structs.ServiceKind) (*structs.IndexedCheckServiceNodes, error) {
	idx, services, err := st.Services(ws, nil)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(services))
	for name := range services {
		names = append(names, name)
	}
	slices.Sort(names)
	out := structs.CheckServiceNodes{}
	for _, name := range names {
		// A first look without watches finds the services that matter;
		// only their health is watched.
		_, nodes, err := st.ServiceNodes(nil, name, nil, false)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(nodes, func(n *structs.ServiceNode) bool { return n.ServiceKind == kind }) {
			continue
		}
		hidx, csn, err := st.CheckServiceNodes(ws, name, nil, false)
		if err != nil {
			return nil, err
		}
		idx = max(idx, hidx)
		for _, n := range csn {
			if n.Service != nil && n.Service.Kind == kind {
				out = append(out, n)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b structs.CheckServiceNode) int {
		return cmp.Or(
			cmp.Compare(a.Service.Service, b.Service.Service),
			cmp.Compare(nodeName(a.Node), nodeName(b.Node)),
			cmp.Compare(a.Service.ID, b.Service.ID),
		)
	})
	res := &structs.IndexedCheckServiceNodes{Nodes: out}
	res.Index = idx
	return res, nil
}

func nodeName(n *structs.Node) string {
	if n == nil {
		return ""
	}
	return n.Node
}

func metaMatches(meta, filters map[string]string) bool {
	for k, v := range filters {
		if mv, ok := meta[k]; !ok || mv != v {
			return false
		}
	}
	return true
}
