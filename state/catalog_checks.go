package state

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// EnsureCheck creates or updates a health check on an existing node. A
// service check must name a service registered on that node; its
// ServiceName and ServiceTags are taken from that service. An empty status
// means critical. A check that is (or turns) critical invalidates every
// session that depends on it, in the same transaction.
func (s *Store) EnsureCheck(idx uint64, chk *structs.HealthCheck) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.ensureCheck(chk) })
}

func (tx *writeTxn) ensureCheck(in *structs.HealthCheck) error {
	if in == nil {
		return nil
	}
	if in.Node == "" {
		return ErrMissingNodeName
	}
	if in.CheckID == "" {
		return ErrMissingCheckID
	}
	c := in.Clone()
	if c.Status == "" {
		c.Status = structs.HealthCritical
	}
	if c.Type == "" {
		c.Type = c.Definition.TypeFromDefinition()
	}
	n, err := getNode(tx.Txn, c.Node)
	if err != nil {
		return err
	}
	if n == nil {
		return ErrMissingNode
	}
	c.Node = n.Node

	var svc *structs.NodeService
	if c.ServiceID != "" {
		row, err := getServiceRow(tx.Txn, n.Node, c.ServiceID)
		if err != nil {
			return err
		}
		if row == nil {
			return ErrMissingService
		}
		svc = row.Service
		c.ServiceID = svc.ID
		c.ServiceName = svc.Service
		c.ServiceTags = slices.Clone(svc.Tags)
	} else {
		c.ServiceName = ""
		c.ServiceTags = nil
	}

	existing, err := getCheck(tx.Txn, n.Node, c.CheckID)
	if err != nil {
		return err
	}
	if existing != nil {
		c.CreateIndex = existing.CreateIndex
		c.ModifyIndex = existing.ModifyIndex
		if sameCheck(existing, c) {
			return nil
		}
	} else {
		c.CreateIndex = tx.idx
	}
	c.ModifyIndex = tx.idx
	if err := tx.Insert(tableChecks, c); err != nil {
		return fmt.Errorf("failed inserting check: %w", err)
	}
	if err := tx.bumpIndex(tableChecks); err != nil {
		return err
	}
	if err := tx.bumpCheckSubjects(c); err != nil {
		return err
	}
	if existing != nil && !strings.EqualFold(existing.ServiceID, c.ServiceID) {
		// The check moved between services (or between node and service
		// level): the old subject's results changed too.
		if err := tx.bumpCheckSubjects(existing); err != nil {
			return err
		}
	}
	if c.Status == structs.HealthCritical {
		return tx.invalidateCheckSessions(c.Node, c.CheckID)
	}
	return nil
}

// bumpCheckSubjects moves the keys of everything whose results include the
// check: its service's instance, or, for a node-level check, every instance
// on the node.
func (tx *writeTxn) bumpCheckSubjects(c *structs.HealthCheck) error {
	if c.ServiceID == "" {
		return tx.bumpNode(c.Node)
	}
	if err := tx.bumpIndex(nodeIndexKey(c.Node)); err != nil {
		return err
	}
	row, err := getServiceRow(tx.Txn, c.Node, c.ServiceID)
	if err != nil {
		return err
	}
	if row != nil {
		return tx.bumpInstance(row.Service)
	}
	return nil
}

// DeleteCheck removes a check and invalidates the sessions that depended
// on it. A missing check is not an error.
func (s *Store) DeleteCheck(idx uint64, node, checkID string) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.deleteCheck(node, checkID) })
}

func (tx *writeTxn) deleteCheck(node, checkID string) error {
	c, err := getCheck(tx.Txn, node, checkID)
	if err != nil || c == nil {
		return err
	}
	if err := tx.Delete(tableChecks, c); err != nil {
		return fmt.Errorf("failed deleting check: %w", err)
	}
	if err := tx.bumpIndex(tableChecks); err != nil {
		return err
	}
	if err := tx.bumpCheckSubjects(c); err != nil {
		return err
	}
	return tx.invalidateCheckSessions(c.Node, c.CheckID)
}

// invalidateCheckSessions destroys every session on node that depends on
// checkID (as a node check or a service check).
func (tx *writeTxn) invalidateCheckSessions(node, checkID string) error {
	sessions, err := sessionsOnNode(tx.Txn, nil, node)
	if err != nil {
		return err
	}
	for _, sess := range sessions {
		for _, id := range sess.CheckIDs() {
			if strings.EqualFold(id, checkID) {
				if err := tx.deleteSession(sess.ID); err != nil {
					return fmt.Errorf("failed to invalidate session '%s': %w", sess.ID, err)
				}
				break
			}
		}
	}
	return nil
}

func getCheck(tx *memdb.Txn, node, checkID string) (*structs.HealthCheck, error) {
	raw, err := tx.First(tableChecks, indexID, node, checkID)
	if err != nil {
		return nil, fmt.Errorf("failed check lookup: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.HealthCheck), nil
}

// checksOnNode lists every check on the node (node and service level), in
// check ID order, and adds the iterator's watch channel to ws.
func checksOnNode(tx *memdb.Txn, ws memdb.WatchSet, node string) ([]*structs.HealthCheck, error) {
	it, err := tx.Get(tableChecks, indexNode, node)
	if err != nil {
		return nil, fmt.Errorf("failed check lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	return collectChecks(it), nil
}

// serviceChecksOnNode lists the checks of one service instance.
func serviceChecksOnNode(tx *memdb.Txn, node, serviceID string) ([]*structs.HealthCheck, error) {
	it, err := tx.Get(tableChecks, indexNodeService, node, serviceID)
	if err != nil {
		return nil, fmt.Errorf("failed check lookup: %w", err)
	}
	return collectChecks(it), nil
}

func collectChecks(it memdb.ResultIterator) []*structs.HealthCheck {
	var out []*structs.HealthCheck
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.HealthCheck))
	}
	return out
}
