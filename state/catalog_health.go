package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Health reads: the catalog seen through its checks.

// CheckServiceNodes lists the instances of service (or, with connect, its
// Connect endpoints; see ServiceNodes) each with its node and the checks
// that apply to it: the node-level checks first, then the instance's own.
// Only instances carrying every tag in tags are returned.
func (s *Store) CheckServiceNodes(ws memdb.WatchSet, service string, tags []string, connect bool) (uint64, structs.CheckServiceNodes, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	rows, idx, err := serviceInstances(tx, ws, service, connect)
	if err != nil {
		return 0, nil, err
	}
	out := structs.CheckServiceNodes{}
	nodeChecks := make(map[string][]*structs.HealthCheck)
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
		nc, ok := nodeChecks[n.Node]
		if !ok {
			all, err := checksOnNode(tx, nil, n.Node)
			if err != nil {
				return 0, nil, err
			}
			for _, c := range all {
				if c.ServiceID == "" {
					nc = append(nc, c)
				}
			}
			nodeChecks[n.Node] = nc
		}
		sc, err := serviceChecksOnNode(tx, n.Node, r.Service.ID)
		if err != nil {
			return 0, nil, err
		}
		checks := make(structs.HealthChecks, 0, len(nc)+len(sc))
		for _, c := range nc {
			checks = append(checks, c.Clone())
		}
		for _, c := range sc {
			checks = append(checks, c.Clone())
		}
		out = append(out, structs.CheckServiceNode{
			Node:    n.Clone(),
			Service: r.Service.Clone(),
			Checks:  checks,
		})
	}
	return idx, out, nil
}

// terminatingGatewayInstances lists the instances of the terminating
// gateways that front service, in gateway order, with the index of the
// last change to the links or to those gateways' health. It watches both.
func terminatingGatewayInstances(tx *memdb.Txn, ws memdb.WatchSet, service string) ([]*serviceRow, uint64, error) {
	links, err := serviceGatewaysTxn(tx, ws, service, structs.ServiceKindTerminatingGateway)
	if err != nil {
		return nil, 0, err
	}
	// The table's own index, not maxIndex's fallback to the store's last
	// one: unlinking the service must move its index too.
	idx, _ := indexValue(tx, nil, tableGatewayServices)
	var out []*serviceRow
	for _, l := range links {
		rows, gidx, err := ownInstances(tx, ws, l.Gateway, false)
		if err != nil {
			return nil, 0, err
		}
		for _, r := range rows {
			if r.Service.Kind == structs.ServiceKindTerminatingGateway {
				out = append(out, r)
			}
		}
		idx = max(idx, gidx)
	}
	return out, idx, nil
}

// NodeChecks lists every check registered on node (node and service level),
// ordered by check ID.
func (s *Store) NodeChecks(ws memdb.WatchSet, node string) (uint64, structs.HealthChecks, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	checks, err := checksOnNode(tx, ws, node)
	if err != nil {
		return 0, nil, err
	}
	n, err := getNode(tx, node)
	if err != nil {
		return 0, nil, err
	}
	idx := maxIndex(tx, tableNodes)
	if n != nil {
		idx = nodeIndex(tx, n.Node)
	}
	return idx, cloneChecks(checks), nil
}

// ServiceChecks lists the checks of every instance of service.
func (s *Store) ServiceChecks(ws memdb.WatchSet, service string) (uint64, structs.HealthChecks, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	it, err := tx.Get(tableChecks, indexService, service)
	if err != nil {
		return 0, nil, fmt.Errorf("failed check lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	checks := collectChecks(it)
	idx, ok := indexValue(tx, nil, serviceIndexKey(service))
	if !ok {
		idx = maxIndex(tx, tableServices)
	}
	return idx, cloneChecks(checks), nil
}

// ChecksInState lists the checks whose status is state; "any" lists every
// check. An unknown state matches nothing (Consul answers 200 [] for it).
func (s *Store) ChecksInState(ws memdb.WatchSet, state string) (uint64, structs.HealthChecks, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	var (
		it  memdb.ResultIterator
		err error
	)
	if state == structs.HealthAny {
		it, err = tx.Get(tableChecks, indexID)
	} else {
		it, err = tx.Get(tableChecks, indexStatus, state)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("failed check lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	return maxIndex(tx, tableChecks), cloneChecks(collectChecks(it)), nil
}
