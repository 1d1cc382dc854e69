package state

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Catalog reads. Each returns the highest Raft index its result depends on
// and adds to ws (which may be nil) the watch channels that close when the
// result may have changed. Results are deep copies the caller owns; lists
// are empty rather than nil when nothing matches.

// GetNode returns one node, or nil when it is not registered. Node names are
// case-insensitive.
func (s *Store) GetNode(ws memdb.WatchSet, node string) (uint64, *structs.Node, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	ch, raw, err := tx.FirstWatch(tableNodes, indexID, node)
	if err != nil {
		return 0, nil, fmt.Errorf("node lookup failed: %w", err)
	}
	ws.Add(ch)
	idx := maxIndex(tx, tableNodes)
	if raw == nil {
		return idx, nil, nil
	}
	return idx, raw.(*structs.Node).Clone(), nil
}

// Nodes lists every node whose metadata carries every pair of metaFilter
// (all nodes when it is empty), ordered by name.
func (s *Store) Nodes(ws memdb.WatchSet, metaFilter map[string]string) (uint64, structs.Nodes, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	it, err := tx.Get(tableNodes, indexID)
	if err != nil {
		return 0, nil, fmt.Errorf("failed nodes lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	out := structs.Nodes{}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		n := raw.(*structs.Node)
		if satisfiesMeta(n.Meta, metaFilter) {
			out = append(out, n.Clone())
		}
	}
	return maxIndex(tx, tableNodes), out, nil
}

// satisfiesMeta reports whether meta holds every key of filter with the
// same value.
func satisfiesMeta(meta, filter map[string]string) bool {
	for k, v := range filter {
		if got, ok := meta[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Services maps every service name to its tags, deduplicated and in the
// order first seen (as Consul answers /v1/catalog/services). With a
// metaFilter only instances on nodes carrying that metadata count.
func (s *Store) Services(ws memdb.WatchSet, metaFilter map[string]string) (uint64, map[string][]string, error) {
	return s.ServicesWhere(ws, metaFilter, nil)
}

// ServicesWhere is Services counting only the instances keep accepts
// (all when keep is nil), flattened with their node as ServiceNodes, which
// keep must not modify: /v1/catalog/services?filter= (Consul filters the
// instances, then lists the services that still have one).
func (s *Store) ServicesWhere(ws memdb.WatchSet, metaFilter map[string]string, keep func(*structs.ServiceNode) bool) (uint64, map[string][]string, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()

	var nodeOK map[string]bool
	idx := maxIndex(tx, tableServices)
	if len(metaFilter) > 0 {
		it, err := tx.Get(tableNodes, indexID)
		if err != nil {
			return 0, nil, fmt.Errorf("failed nodes lookup: %w", err)
		}
		ws.Add(it.WatchCh())
		nodeOK = make(map[string]bool)
		for raw := it.Next(); raw != nil; raw = it.Next() {
			n := raw.(*structs.Node)
			if satisfiesMeta(n.Meta, metaFilter) {
				nodeOK[strings.ToLower(n.Node)] = true
			}
		}
		idx = maxIndex(tx, tableServices, tableNodes)
	}

	it, err := tx.Get(tableServices, indexID)
	if err != nil {
		return 0, nil, fmt.Errorf("failed services lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	out := make(map[string][]string)
	seen := make(map[string]map[string]bool)
	for raw := it.Next(); raw != nil; raw = it.Next() {
		r := raw.(*serviceRow)
		if nodeOK != nil && !nodeOK[strings.ToLower(r.Node)] {
			continue
		}
		if keep != nil {
			n, err := getNode(tx, r.Node)
			if err != nil {
				return 0, nil, err
			}
			if n == nil || !keep(r.Service.ToServiceNode(n)) {
				continue
			}
		}
		name := r.Service.Service
		if _, ok := out[name]; !ok {
			out[name] = []string{}
			seen[name] = make(map[string]bool)
		}
		for _, t := range r.Service.Tags {
			if !seen[name][t] {
				seen[name][t] = true
				out[name] = append(out[name], t)
			}
		}
	}
	return idx, out, nil
}

// ServiceNodes lists the instances of service flattened with their nodes.
// Only instances carrying every tag in tags (compared case-insensitively)
// are returned. With connect set it lists the service's Connect endpoints
// instead: connect-proxy instances whose destination is service, plus
// Connect-native instances of service.
func (s *Store) ServiceNodes(ws memdb.WatchSet, service string, tags []string, connect bool) (uint64, structs.ServiceNodes, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	rows, idx, err := serviceInstances(tx, ws, service, connect)
	if err != nil {
		return 0, nil, err
	}
	out := structs.ServiceNodes{}
	for _, r := range rows {
		if !hasAllTags(r.Service.Tags, tags) {
			continue
		}
		n, err := getNode(tx, r.Node)
		if err != nil {
			return 0, nil, err
		}
		if n == nil {
			continue
		}
		out = append(out, r.Service.Clone().ToServiceNode(n.Clone()))
	}
	return idx, out, nil
}

// serviceInstances lists the stored instances of service (or its Connect
// endpoints) and the index covering their health results: the service's
// (or Connect) key while it has instances, the services table otherwise,
// which the write that removed the last instance moved.
//
// With connect, the instances of the terminating gateways fronting
// service follow its own Connect endpoints: Consul appends them rather
// than replacing, so that a service can move into the mesh with some
// instances behind a gateway and some with sidecars.
func serviceInstances(tx *memdb.Txn, ws memdb.WatchSet, service string, connect bool) ([]*serviceRow, uint64, error) {
	rows, idx, err := ownInstances(tx, ws, service, connect)
	if err != nil || !connect {
		return rows, idx, err
	}
	gw, gidx, err := terminatingGatewayInstances(tx, ws, service)
	if err != nil {
		return nil, 0, err
	}
	return append(rows, gw...), max(idx, gidx), nil
}

func ownInstances(tx *memdb.Txn, ws memdb.WatchSet, service string, connect bool) ([]*serviceRow, uint64, error) {
	index, key := indexService, serviceIndexKey(service)
	if connect {
		index, key = indexConnect, connectIndexKey(service)
	}
	it, err := tx.Get(tableServices, index, service)
	if err != nil {
		return nil, 0, fmt.Errorf("failed service lookup: %w", err)
	}
	// Fires when an instance is added or removed, including the first.
	ws.Add(it.WatchCh())
	var rows []*serviceRow
	for raw := it.Next(); raw != nil; raw = it.Next() {
		rows = append(rows, raw.(*serviceRow))
	}
	// The key's own watch fires on every change of the health results
	// (checks, node records), which the iterator above does not see.
	if v, ok := indexValue(tx, ws, key); ok && len(rows) > 0 {
		return rows, v, nil
	}
	return rows, maxIndex(tx, tableServices), nil
}

// hasAllTags reports whether have carries every tag of want, ignoring case.
func hasAllTags(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if strings.EqualFold(h, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// NodeServices returns a node with its services keyed by service ID, or nil
// when the node is not registered.
func (s *Store) NodeServices(ws memdb.WatchSet, node string) (uint64, *structs.NodeServices, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	ch, raw, err := tx.FirstWatch(tableNodes, indexID, node)
	if err != nil {
		return 0, nil, fmt.Errorf("node lookup failed: %w", err)
	}
	ws.Add(ch)
	if raw == nil {
		return maxIndex(tx, tableNodes), nil, nil
	}
	n := raw.(*structs.Node)
	it, err := tx.Get(tableServices, indexNode, n.Node)
	if err != nil {
		return 0, nil, fmt.Errorf("failed service lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	out := &structs.NodeServices{Node: n.Clone(), Services: make(map[string]*structs.NodeService)}
	for r := it.Next(); r != nil; r = it.Next() {
		svc := r.(*serviceRow).Service
		out.Services[svc.ID] = svc.Clone()
	}
	return nodeIndex(tx, n.Node), out, nil
}

// NodeService returns one service instance of a node (a copy), or nil.
// Its WatchSet fires when that instance changes or goes away, not when
// the node's other services do: a follower of one proxy's registration
// stays O(1) per write on a node with thousands of services.
func (s *Store) NodeService(ws memdb.WatchSet, node, serviceID string) (*structs.NodeService, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	raw, err := firstWatch(tx, ws, tableServices, indexID, node, serviceID)
	if err != nil || raw == nil {
		return nil, err
	}
	return raw.(*serviceRow).Service.Clone(), nil
}

// nodeIndex is the index covering a registered node's record, services and
// checks.
func nodeIndex(tx *memdb.Txn, node string) uint64 {
	if v, ok := indexValue(tx, nil, nodeIndexKey(node)); ok {
		return v
	}
	return maxIndex(tx, tableNodes, tableServices, tableChecks)
}
