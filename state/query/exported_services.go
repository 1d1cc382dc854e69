package query

import (
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ExportedServices resolves the exported-services entry into the list GET
// /v1/exported-services answers, in service name order: the wildcard "*"
// stands for every typical service in the catalog (not proxies or
// gateways, and not the consul service itself), and a service named both
// explicitly and by the wildcard gets the consumers of both. Without an
// entry the list is empty. It wakes when the entry changes and, if it
// has a wildcard, when the catalog's services do.
func ExportedServices(ws memdb.WatchSet, st *state.Store) (uint64, []structs.ResolvedExportedService, error) {
	idx, e, err := st.ConfigEntry(ws, structs.ExportedServices, structs.DefaultPartitionName)
	if err != nil || e == nil {
		return idx, nil, err
	}
	entry, ok := e.(*structs.ExportedServicesConfigEntry)
	if !ok {
		return idx, nil, nil
	}
	peers := map[string]map[string]bool{}
	addPeers := func(name string, consumers []structs.ServiceConsumer) {
		if peers[name] == nil {
			peers[name] = map[string]bool{}
		}
		for _, c := range consumers {
			if c.Peer != "" {
				peers[name][c.Peer] = true
			}
		}
	}
	for _, svc := range entry.Services {
		if svc.Name != structs.WildcardSpecifier {
			addPeers(svc.Name, svc.Consumers)
			continue
		}
		catIdx, names, err := st.ServicesWhere(ws, nil, func(sn *structs.ServiceNode) bool {
			return sn.ServiceKind == structs.ServiceKindTypical
		})
		if err != nil {
			return 0, nil, err
		}
		idx = max(idx, catIdx)
		for name := range names {
			if name != structs.ConsulServiceName {
				addPeers(name, svc.Consumers)
			}
		}
	}
	out := make([]structs.ResolvedExportedService, 0, len(peers))
	for name, set := range peers {
		r := structs.ResolvedExportedService{Service: name}
		for p := range set {
			r.Consumers.Peers = append(r.Consumers.Peers, p)
		}
		sort.Strings(r.Consumers.Peers)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Service < out[j].Service })
	return idx, out, nil
}
