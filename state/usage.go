package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// usageConnectKinds are the mesh kinds Consul's usage counts, each shown
// even when zero.
var usageConnectKinds = []string{
	"api-gateway", "connect-native", string(structs.ServiceKindConnectProxy), string(structs.ServiceKindIngressGateway),
	string(structs.ServiceKindMeshGateway), string(structs.ServiceKindTerminatingGateway),
}

// ServiceUsage counts the catalog's nodes, service names and instances
// (Consul's /v1/operator/usage), at the index of the nodes and services
// tables.
func (s *Store) ServiceUsage(ws memdb.WatchSet) (uint64, structs.ServiceUsage, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	u := structs.ServiceUsage{ConnectServiceInstances: make(map[string]int, len(usageConnectKinds))}
	for _, k := range usageConnectKinds {
		u.ConnectServiceInstances[k] = 0
	}
	nodes, err := tx.Get(tableNodes, indexID)
	if err != nil {
		return 0, u, fmt.Errorf("failed node lookup: %w", err)
	}
	ws.Add(nodes.WatchCh())
	for raw := nodes.Next(); raw != nil; raw = nodes.Next() {
		u.Nodes++
	}
	it, err := tx.Get(tableServices, indexID)
	if err != nil {
		return 0, u, fmt.Errorf("failed service lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	names := map[string]bool{}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		svc := raw.(*serviceRow).Service
		u.ServiceInstances++
		names[svc.Service] = true
		switch {
		case svc.Kind != structs.ServiceKindTypical:
			u.ConnectServiceInstances[string(svc.Kind)]++
		case svc.Connect.Native:
			u.ConnectServiceInstances["connect-native"]++
			u.BillableServiceInstances++
		case svc.Service != structs.ConsulServiceName:
			u.BillableServiceInstances++
		}
	}
	u.Services = len(names)
	return maxIndex(tx, tableNodes, tableServices), u, nil
}
