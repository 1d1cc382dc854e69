package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Snapshot is a consistent read-only view of the whole store (one memdb
// read transaction), from which the FSM streams its snapshot records. It
// holds no lock: writes go on while it is read. Every object returned is a
// copy the caller owns.
type Snapshot struct {
	tx        *memdb.Txn
	lastIndex uint64
}

// Snapshot opens a view of the store as it is now. Close it when done.
func (s *Store) Snapshot() *Snapshot {
	tx := s.db.Txn(false)
	return &Snapshot{tx: tx, lastIndex: lastIndexTxn(tx)}
}

// LastIndex is the highest index in the view's index table.
func (sn *Snapshot) LastIndex() uint64 { return sn.lastIndex }

// Close releases the view.
func (sn *Snapshot) Close() { sn.tx.Abort() }

// Nodes lists every node, ordered by name.
func (sn *Snapshot) Nodes() (structs.Nodes, error) {
	it, err := sn.tx.Get(tableNodes, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot nodes: %w", err)
	}
	var out structs.Nodes
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.Node).Clone())
	}
	return out, nil
}

// Services lists the services registered on node.
func (sn *Snapshot) Services(node string) ([]*structs.NodeService, error) {
	rows, err := servicesOnNode(sn.tx, node)
	if err != nil {
		return nil, err
	}
	out := make([]*structs.NodeService, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Service.Clone())
	}
	return out, nil
}

// Checks lists the checks registered on node.
func (sn *Snapshot) Checks(node string) (structs.HealthChecks, error) {
	checks, err := checksOnNode(sn.tx, nil, node)
	if err != nil {
		return nil, err
	}
	return cloneChecks(checks), nil
}

// KVs lists every KV entry in key order.
func (sn *Snapshot) KVs() (structs.DirEntries, error) {
	entries, err := listKVs(sn.tx, nil, "")
	if err != nil {
		return nil, err
	}
	out := make(structs.DirEntries, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Clone())
	}
	return out, nil
}

// Tombstones lists every tombstone not yet reaped.
func (sn *Snapshot) Tombstones() ([]Tombstone, error) {
	stones, err := tombstonesUnder(sn.tx, "")
	if err != nil {
		return nil, err
	}
	out := make([]Tombstone, 0, len(stones))
	for _, t := range stones {
		out = append(out, *t)
	}
	return out, nil
}

// Sessions lists every session.
func (sn *Snapshot) Sessions() (structs.Sessions, error) {
	it, err := sn.tx.Get(tableSessions, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot sessions: %w", err)
	}
	var out structs.Sessions
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.Session).Clone())
	}
	return out, nil
}

// Indexes lists every entry of the index table.
func (sn *Snapshot) Indexes() ([]IndexEntry, error) {
	it, err := sn.tx.Get(tableIndex, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot indexes: %w", err)
	}
	var out []IndexEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, *raw.(*IndexEntry))
	}
	return out, nil
}

// Restore loads snapshot records into a store in one write transaction.
// Use it on a fresh store from NewStore: the FSM fills the new store, commits,
// swaps it in for the old one and abandons the old one. Records keep their
// Raft indexes; the index table is rebuilt from the Index records (and,
// in case a stream lacks some, raised to cover every record restored).
// Records may come in any order, except that a node's services and checks,
// and a check's service, must follow the node and service they belong to.
type Restore struct {
	store *Store
	tx    *memdb.Txn
}

// Restore starts a restore. It holds the store's write lock until Commit or
// Abort.
func (s *Store) Restore() *Restore {
	return &Restore{store: s, tx: s.db.Txn(true)}
}

// Commit makes everything restored visible at once, after deriving the
// tables that snapshots do not carry (gateway_services.go). On error
// nothing is committed and the restore is aborted.
func (r *Restore) Commit() error {
	if err := r.rebuildGatewayServices(); err != nil {
		r.tx.Abort()
		return err
	}
	r.tx.Commit()
	return nil
}

// Abort drops everything restored.
func (r *Restore) Abort() { r.tx.Abort() }

// raise lifts every key to at least idx.
func (r *Restore) raise(idx uint64, keys ...string) error {
	for _, k := range keys {
		if err := setIndexMax(r.tx, k, idx); err != nil {
			return err
		}
	}
	return nil
}

// Node restores a node.
func (r *Restore) Node(n *structs.Node) error {
	if n == nil || n.Node == "" {
		return ErrMissingNodeName
	}
	c := n.Clone()
	if err := r.tx.Insert(tableNodes, c); err != nil {
		return fmt.Errorf("restore node %q: %w", n.Node, err)
	}
	return r.raise(c.ModifyIndex, tableNodes, nodeIndexKey(c.Node))
}

// Service restores one service instance of node.
func (r *Restore) Service(node string, svc *structs.NodeService) error {
	if svc == nil {
		return nil
	}
	n, err := getNode(r.tx, node)
	if err != nil {
		return err
	}
	if n == nil {
		return fmt.Errorf("restore service %q: %w", svc.ID, ErrMissingNode)
	}
	c := svc.Clone()
	if err := r.tx.Insert(tableServices, &serviceRow{Node: n.Node, Service: c}); err != nil {
		return fmt.Errorf("restore service %q: %w", svc.ID, err)
	}
	keys := []string{tableServices, nodeIndexKey(n.Node), serviceIndexKey(c.Service)}
	if d := connectDestination(c); d != "" {
		keys = append(keys, connectIndexKey(d))
	}
	return r.raise(c.ModifyIndex, keys...)
}

// Check restores a check.
func (r *Restore) Check(chk *structs.HealthCheck) error {
	if chk == nil {
		return nil
	}
	c := chk.Clone()
	if err := r.tx.Insert(tableChecks, c); err != nil {
		return fmt.Errorf("restore check %q: %w", c.CheckID, err)
	}
	keys := []string{tableChecks, nodeIndexKey(c.Node)}
	if c.ServiceName != "" {
		keys = append(keys, serviceIndexKey(c.ServiceName))
	}
	return r.raise(c.ModifyIndex, keys...)
}

// KV restores a KV entry.
func (r *Restore) KV(e *structs.DirEntry) error {
	if e == nil {
		return nil
	}
	if err := r.tx.Insert(tableKVs, e.Clone()); err != nil {
		return fmt.Errorf("restore kv %q: %w", e.Key, err)
	}
	return r.raise(e.ModifyIndex, tableKVs)
}

// Tombstone restores a tombstone.
func (r *Restore) Tombstone(t Tombstone) error {
	c := t
	if err := r.tx.Insert(tableTombstones, &c); err != nil {
		return fmt.Errorf("restore tombstone %q: %w", t.Key, err)
	}
	return r.raise(t.Index, tableTombstones)
}

// Session restores a session.
func (r *Restore) Session(sess *structs.Session) error {
	if sess == nil {
		return nil
	}
	if err := r.tx.Insert(tableSessions, sess.Clone()); err != nil {
		return fmt.Errorf("restore session %q: %w", sess.ID, err)
	}
	return r.raise(sess.ModifyIndex, tableSessions)
}

// Index restores an index table entry (never lowering one already raised).
func (r *Restore) Index(e IndexEntry) error {
	return r.raise(e.Value, e.Key)
}
