package state

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Catalog writes: nodes and services. Check writes are in catalog_checks.go,
// catalog reads in catalog_read.go and catalog_health.go.

// EnsureRegistration applies a catalog registration in one transaction: the
// node (unless SkipNodeUpdate is set and the node exists), then the
// service, then Check and Checks. Either all of it is stored or none.
// Unchanged parts are not rewritten, so re-registering the same thing
// (anti-entropy does it constantly) moves no index and wakes no watcher.
func (s *Store) EnsureRegistration(idx uint64, req *structs.RegisterRequest) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.ensureRegistration(req) })
}

func (tx *writeTxn) ensureRegistration(req *structs.RegisterRequest) error {
	if req.Node == "" {
		return ErrMissingNodeName
	}
	existing, err := getNode(tx.Txn, req.Node)
	if err != nil {
		return err
	}
	if existing == nil || (!req.SkipNodeUpdate && registrationChangesNode(req, existing)) {
		n := &structs.Node{
			ID:              req.ID,
			Node:            req.Node,
			Address:         req.Address,
			Datacenter:      req.Datacenter,
			TaggedAddresses: req.TaggedAddresses,
			Meta:            req.NodeMeta,
			Locality:        req.Locality,
		}
		if err := tx.ensureNode(n); err != nil {
			return fmt.Errorf("failed inserting node: %w", err)
		}
	}
	if req.Service != nil {
		if err := tx.ensureService(req.Node, req.Service); err != nil {
			return fmt.Errorf("failed inserting service: %w", err)
		}
	}
	checks := req.Checks
	if req.Check != nil {
		checks = append(structs.HealthChecks{req.Check}, checks...)
	}
	for _, chk := range checks {
		if chk == nil {
			continue
		}
		c := chk
		if c.Node == "" {
			// The HTTP endpoint fills it in; a registration built in code
			// may leave it to mean "this node".
			c = chk.Clone()
			c.Node = req.Node
		}
		if !strings.EqualFold(c.Node, req.Node) {
			return errorf(ErrCheckNodeMismatch, "check node %q does not match node %q", c.Node, req.Node)
		}
		if err := tx.ensureCheck(c); err != nil {
			return fmt.Errorf("failed inserting check on node %q: %w", c.Node, err)
		}
	}
	return nil
}

// registrationChangesNode reports whether the registration would change the
// stored node record.
func registrationChangesNode(req *structs.RegisterRequest, n *structs.Node) bool {
	return req.ID != n.ID ||
		!strings.EqualFold(req.Node, n.Node) ||
		req.Address != n.Address ||
		req.Datacenter != n.Datacenter ||
		!stringMapsEqual(req.TaggedAddresses, n.TaggedAddresses) ||
		!stringMapsEqual(req.NodeMeta, n.Meta) ||
		!req.Locality.Same(n.Locality)
}

// EnsureNode creates or updates a node.
func (s *Store) EnsureNode(idx uint64, n *structs.Node) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.ensureNode(n) })
}

func (tx *writeTxn) ensureNode(in *structs.Node) error {
	if in == nil || in.Node == "" {
		return ErrMissingNodeName
	}
	n := in.Clone()

	// A node ID identifies a machine across renames: registering a known
	// ID under a new name renames the node (dropping what was registered
	// under the old name), unless the new name belongs to a live node.
	var existing *structs.Node
	if n.ID != "" {
		raw, err := tx.First(tableNodes, indexUUID, n.ID)
		if err != nil {
			return fmt.Errorf("node lookup by ID failed: %w", err)
		}
		if raw != nil {
			byID := raw.(*structs.Node)
			if strings.EqualFold(byID.Node, n.Node) {
				existing = byID
			} else {
				if err := tx.checkNodeNameFree(n, false); err != nil {
					return fmt.Errorf("Error while renaming Node ID: %q (%s): %w", n.ID, n.Address, err)
				}
				if err := tx.deleteNode(byID.Node); err != nil {
					return fmt.Errorf("Error while renaming Node ID: %q (%s) from %s to %s: %w",
						n.ID, n.Address, byID.Node, n.Node, err)
				}
			}
		} else if err := tx.checkNodeNameFree(n, true); err != nil {
			return fmt.Errorf("Error while renaming Node ID: %q: %w", n.ID, err)
		}
	}
	if existing == nil {
		var err error
		if existing, err = getNode(tx.Txn, n.Node); err != nil {
			return err
		}
	}

	if existing != nil {
		if nodeSame(existing, n) {
			return nil
		}
		n.CreateIndex = existing.CreateIndex
	} else {
		n.CreateIndex = tx.idx
	}
	n.ModifyIndex = tx.idx
	if err := tx.Insert(tableNodes, n); err != nil {
		return fmt.Errorf("failed inserting node: %w", err)
	}
	if err := tx.bumpIndex(tableNodes); err != nil {
		return err
	}
	// Every instance on the node carries the node's address and metadata
	// in its health results.
	return tx.bumpNode(n.Node)
}

// checkNodeNameFree refuses to give n's name away when a node with another
// ID holds it and that node is alive (its serfHealth check exists and is
// not critical). allowClashWithoutID lets an ID-less node be taken over,
// which is how a node gains an ID.
func (tx *writeTxn) checkNodeNameFree(n *structs.Node, allowClashWithoutID bool) error {
	other, err := getNode(tx.Txn, n.Node)
	if err != nil || other == nil || other.ID == n.ID {
		return err
	}
	raw, err := tx.First(tableChecks, indexID, other.Node, structs.SerfCheckID)
	if err != nil {
		return fmt.Errorf("Cannot get status of node %s: %w", other.Node, err)
	}
	healthy := raw != nil && raw.(*structs.HealthCheck).Status != structs.HealthCritical
	if healthy && !(other.ID == "" && allowClashWithoutID) {
		return errorf(ErrNodeNameReserved, "Node name %s is reserved by node %s with name %s (%s)",
			n.Node, other.ID, other.Node, other.Address)
	}
	return nil
}

func nodeSame(a, b *structs.Node) bool {
	return a.ID == b.ID && a.Node == b.Node && a.Address == b.Address && a.Datacenter == b.Datacenter &&
		stringMapsEqual(a.TaggedAddresses, b.TaggedAddresses) && stringMapsEqual(a.Meta, b.Meta) &&
		a.Locality.Same(b.Locality)
}

// stringMapsEqual treats nil and empty as equal: JSON clients send either.
func stringMapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// DeleteNode removes a node with its services and checks, and destroys its
// sessions (releasing or deleting their locks). A missing node is not an
// error.
func (s *Store) DeleteNode(idx uint64, node string) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.deleteNode(node) })
}

func (tx *writeTxn) deleteNode(name string) error {
	n, err := getNode(tx.Txn, name)
	if err != nil || n == nil {
		return err
	}
	rows, err := servicesOnNode(tx.Txn, n.Node)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := tx.deleteService(n.Node, r.Service.ID); err != nil {
			return err
		}
	}
	checks, err := checksOnNode(tx.Txn, nil, n.Node)
	if err != nil {
		return err
	}
	for _, c := range checks {
		if err := tx.deleteCheck(n.Node, c.CheckID); err != nil {
			return err
		}
	}
	if err := tx.Delete(tableNodes, n); err != nil {
		return fmt.Errorf("failed deleting node: %w", err)
	}
	if err := tx.bumpIndex(tableNodes); err != nil {
		return err
	}
	if err := tx.deleteIndexKey(nodeIndexKey(n.Node)); err != nil {
		return err
	}
	if err := tx.deleteNodeCoordinates(n.Node); err != nil {
		return err
	}
	sessions, err := sessionsOnNode(tx.Txn, nil, n.Node)
	if err != nil {
		return err
	}
	for _, sess := range sessions {
		if err := tx.deleteSession(sess.ID); err != nil {
			return fmt.Errorf("failed to delete session '%s': %w", sess.ID, err)
		}
	}
	return nil
}

// EnsureService creates or updates a service instance on an existing node.
// An empty ID defaults to the service name, as in Consul.
func (s *Store) EnsureService(idx uint64, node string, svc *structs.NodeService) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.ensureService(node, svc) })
}

func (tx *writeTxn) ensureService(node string, in *structs.NodeService) error {
	if node == "" {
		return ErrMissingNodeName
	}
	if in == nil {
		return nil
	}
	svc := in.Clone()
	if svc.ID == "" {
		svc.ID = svc.Service
	}
	if svc.Service == "" {
		return ErrMissingServiceName
	}
	// Agent-local bookkeeping never belongs in the catalog.
	svc.LocallyRegisteredAsSidecar = false
	// Consul stores {1, 1} for missing or invalid weights (a passing
	// weight below 1, a negative warning weight), so every read shows
	// the weights DNS and proxies apply.
	if w := svc.Weights; w == nil || w.Passing < 1 || w.Warning < 0 {
		svc.Weights = &structs.Weights{Passing: 1, Warning: 1}
	}

	n, err := getNode(tx.Txn, node)
	if err != nil {
		return err
	}
	if n == nil {
		return ErrMissingNode
	}
	existing, err := getServiceRow(tx.Txn, n.Node, svc.ID)
	if err != nil {
		return err
	}
	// Before the comparison: the stored copy carries the address, the
	// agent's does not.
	if err := tx.tagVirtualIP(svc); err != nil {
		return err
	}
	if existing != nil {
		svc.CreateIndex = existing.Service.CreateIndex
		svc.ModifyIndex = existing.Service.ModifyIndex
		if sameService(existing.Service, svc) {
			return nil
		}
	} else {
		svc.CreateIndex = tx.idx
	}
	svc.ModifyIndex = tx.idx
	if err := tx.Insert(tableServices, &serviceRow{Node: n.Node, Service: svc}); err != nil {
		return fmt.Errorf("failed inserting service: %w", err)
	}
	if err := tx.bumpIndex(tableServices, nodeIndexKey(n.Node)); err != nil {
		return err
	}
	if err := tx.bumpInstance(svc); err != nil {
		return err
	}
	if err := tx.refreshWildcardsTxn(svc.Service, connectDestination(svc)); err != nil {
		return err
	}
	if existing == nil {
		return nil
	}
	if err := tx.refreshWildcardsTxn(existing.Service.Service, connectDestination(existing.Service)); err != nil {
		return err
	}
	// The old name or Connect destination lost an instance.
	if err := tx.bumpInstance(existing.Service); err != nil {
		return err
	}
	if err := tx.pruneServiceKeys(existing.Service); err != nil {
		return err
	}
	if old := meshVirtualIPName(existing.Service); old != "" && old != meshVirtualIPName(svc) {
		if err := tx.freeVirtualIP(old); err != nil {
			return err
		}
	}
	// Service checks carry the service's name and tags; keep them true.
	if existing.Service.Service != svc.Service || !stringsEqual(existing.Service.Tags, svc.Tags) {
		return tx.retagServiceChecks(n.Node, svc)
	}
	return nil
}

// retagServiceChecks rewrites the ServiceName and ServiceTags of svc's
// checks after the service was renamed or retagged.
func (tx *writeTxn) retagServiceChecks(node string, svc *structs.NodeService) error {
	checks, err := serviceChecksOnNode(tx.Txn, node, svc.ID)
	if err != nil {
		return err
	}
	for _, old := range checks {
		c := old.Clone()
		c.ServiceName = svc.Service
		c.ServiceTags = slices.Clone(svc.Tags)
		c.ModifyIndex = tx.idx
		if err := tx.Insert(tableChecks, c); err != nil {
			return fmt.Errorf("failed updating check: %w", err)
		}
	}
	if len(checks) > 0 {
		return tx.bumpIndex(tableChecks)
	}
	return nil
}

// DeleteService removes a service instance and its checks (invalidating the
// sessions that depended on them). A missing service is not an error.
func (s *Store) DeleteService(idx uint64, node, serviceID string) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.deleteService(node, serviceID) })
}

func (tx *writeTxn) deleteService(node, serviceID string) error {
	row, err := getServiceRow(tx.Txn, node, serviceID)
	if err != nil || row == nil {
		return err
	}
	checks, err := serviceChecksOnNode(tx.Txn, row.Node, row.Service.ID)
	if err != nil {
		return err
	}
	for _, c := range checks {
		if err := tx.deleteCheck(c.Node, c.CheckID); err != nil {
			return err
		}
	}
	if err := tx.Delete(tableServices, row); err != nil {
		return fmt.Errorf("failed deleting service: %w", err)
	}
	if err := tx.bumpIndex(tableServices, nodeIndexKey(row.Node)); err != nil {
		return err
	}
	if err := tx.bumpInstance(row.Service); err != nil {
		return err
	}
	if err := tx.refreshWildcardsTxn(row.Service.Service, connectDestination(row.Service)); err != nil {
		return err
	}
	if err := tx.pruneServiceKeys(row.Service); err != nil {
		return err
	}
	if name := meshVirtualIPName(row.Service); name != "" {
		return tx.freeVirtualIP(name)
	}
	return nil
}

// bumpInstance moves the index keys of everything whose results include
// svc: its service and, for a Connect endpoint, its destination's Connect
// key.
func (tx *writeTxn) bumpInstance(svc *structs.NodeService) error {
	if err := tx.bumpIndex(serviceIndexKey(svc.Service)); err != nil {
		return err
	}
	if d := connectDestination(svc); d != "" {
		return tx.bumpIndex(connectIndexKey(d))
	}
	return nil
}

// bumpNode moves the node's key and the keys of every instance on it: used
// when something every instance's health results include (the node record,
// a node-level check) changes.
func (tx *writeTxn) bumpNode(node string) error {
	if err := tx.bumpIndex(nodeIndexKey(node)); err != nil {
		return err
	}
	rows, err := servicesOnNode(tx.Txn, node)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := tx.bumpInstance(r.Service); err != nil {
			return err
		}
	}
	return nil
}

// pruneServiceKeys drops the service and Connect keys that svc fed once no
// instance feeds them any more.
func (tx *writeTxn) pruneServiceKeys(svc *structs.NodeService) error {
	if raw, err := tx.First(tableServices, indexService, svc.Service); err != nil {
		return fmt.Errorf("failed service lookup: %w", err)
	} else if raw == nil {
		if err := tx.deleteIndexKey(serviceIndexKey(svc.Service)); err != nil {
			return err
		}
	}
	d := connectDestination(svc)
	if d == "" {
		return nil
	}
	if raw, err := tx.First(tableServices, indexConnect, d); err != nil {
		return fmt.Errorf("failed service lookup: %w", err)
	} else if raw == nil {
		return tx.deleteIndexKey(connectIndexKey(d))
	}
	return nil
}

// Shared lookups. They return the stored objects: callers inside the
// package copy before handing anything out.

func getNode(tx *memdb.Txn, name string) (*structs.Node, error) {
	raw, err := tx.First(tableNodes, indexID, name)
	if err != nil {
		return nil, fmt.Errorf("node lookup failed: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.Node), nil
}

func getServiceRow(tx *memdb.Txn, node, serviceID string) (*serviceRow, error) {
	raw, err := tx.First(tableServices, indexID, node, serviceID)
	if err != nil {
		return nil, fmt.Errorf("failed service lookup: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*serviceRow), nil
}

func servicesOnNode(tx *memdb.Txn, node string) ([]*serviceRow, error) {
	it, err := tx.Get(tableServices, indexNode, node)
	if err != nil {
		return nil, fmt.Errorf("failed service lookup: %w", err)
	}
	var rows []*serviceRow
	for raw := it.Next(); raw != nil; raw = it.Next() {
		rows = append(rows, raw.(*serviceRow))
	}
	return rows, nil
}

// stringsEqual treats nil and empty as equal.
func stringsEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
