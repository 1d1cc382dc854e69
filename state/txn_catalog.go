package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Catalog and session operations of a transaction, with Consul's verbs,
// results and error texts. Writes go through the same writeTxn methods as
// the catalog endpoints, so they move the same index keys and wake the same
// blocking queries. get, set and cas return a copy of the entity as stored
// after the operation; deletes return nothing.

// catalogEntity is what a catalog verb needs to know of the entity it
// names: how it is called in messages, whether it exists and at which
// ModifyIndex, and how to write or remove it.
type catalogEntity struct {
	kind   string // "Node", "Service", "Check"
	what   string // `node "n1"`, `service "s" on node "n1"`, ...
	exists bool
	have   uint64 // its ModifyIndex, when it exists
	set    func() error
	del    func() error
}

// run applies verb to the entity, returning whether the operation has a
// result. cas and delete-cas compare ModifyIndex as Consul does: cas with
// 0 only creates, otherwise both must find the entity at the given index.
func (e catalogEntity) run(wtx *writeTxn, verb structs.CatalogOp, want uint64) (bool, error) {
	if wtx == nil && verb.IsWrite() {
		return false, fmt.Errorf("%s verb %q is not allowed in a read-only transaction", e.kind, verb)
	}
	switch verb {
	case structs.CatalogGet:
		return true, nil
	case structs.CatalogSet:
		return true, e.set()
	case structs.CatalogCAS:
		if (want == 0 && e.exists) || (want != 0 && (!e.exists || e.have != want)) {
			return false, fmt.Errorf("failed to set %s, index is stale", e.what)
		}
		return true, e.set()
	case structs.CatalogDelete:
		return false, e.del()
	case structs.CatalogDeleteCAS:
		if !e.exists || e.have != want {
			return false, fmt.Errorf("failed to delete %s, index is stale", e.what)
		}
		return false, e.del()
	}
	return false, fmt.Errorf("unknown %s verb %q", e.kind, verb)
}

// found is the result lookup's answer: the stored entity, or Consul's
// error when it is missing.
func (e catalogEntity) found(raw any, err error) (any, error) {
	if err == nil && raw == nil {
		err = fmt.Errorf("%s doesn't exist", e.what)
	}
	return raw, err
}

// txnNode runs one node operation.
func txnNode(tx *memdb.Txn, wtx *writeTxn, ws memdb.WatchSet, op *structs.TxnNodeOp) (structs.TxnResults, error) {
	name := op.Node.Node
	existing, err := getNode(tx, name)
	if err != nil {
		return nil, err
	}
	e := catalogEntity{
		kind: "Node", what: fmt.Sprintf("node %q", name), exists: existing != nil,
		set: func() error { return wtx.ensureNode(&op.Node) },
		del: func() error { return wtx.deleteNode(name) },
	}
	if existing != nil {
		e.have = existing.ModifyIndex
	}
	if ok, err := e.run(wtx, op.Verb, op.Node.ModifyIndex); !ok || err != nil {
		return nil, err
	}
	// Consul finds the result by ID when the operation gives one.
	index, arg := indexID, name
	if op.Node.ID != "" {
		index, arg = indexUUID, op.Node.ID
	}
	raw, err := e.found(firstWatch(tx, ws, tableNodes, index, arg))
	if err != nil {
		return nil, err
	}
	return structs.TxnResults{{Node: raw.(*structs.Node).Clone()}}, nil
}

// txnService runs one service operation. A set or cas without a service
// ID writes the ID of the service's name, as a registration does; the
// other verbs take the ID as given (the server's pre-check defaults it for
// deletes, as Consul's does).
func txnService(tx *memdb.Txn, wtx *writeTxn, ws memdb.WatchSet, op *structs.TxnServiceOp) (structs.TxnResults, error) {
	node, id := op.Node, op.Service.ID
	if id == "" && (op.Verb == structs.CatalogSet || op.Verb == structs.CatalogCAS) {
		id = op.Service.Service
	}
	existing, err := getServiceRow(tx, node, id)
	if err != nil {
		return nil, err
	}
	e := catalogEntity{
		kind: "Service", what: fmt.Sprintf("service %q on node %q", id, node), exists: existing != nil,
		set: func() error { return wtx.ensureService(node, &op.Service) },
		del: func() error { return wtx.deleteService(node, id) },
	}
	if existing != nil {
		e.have = existing.Service.ModifyIndex
	}
	if ok, err := e.run(wtx, op.Verb, op.Service.ModifyIndex); !ok || err != nil {
		return nil, err
	}
	raw, err := e.found(firstWatch(tx, ws, tableServices, indexID, node, id))
	if err != nil {
		return nil, err
	}
	return structs.TxnResults{{Service: raw.(*serviceRow).Service.Clone()}}, nil
}

// txnCheck runs one check operation.
func txnCheck(tx *memdb.Txn, wtx *writeTxn, ws memdb.WatchSet, op *structs.TxnCheckOp) (structs.TxnResults, error) {
	node, id := op.Check.Node, op.Check.CheckID
	existing, err := getCheck(tx, node, id)
	if err != nil {
		return nil, err
	}
	e := catalogEntity{
		kind: "Check", what: fmt.Sprintf("check %q on node %q", id, node), exists: existing != nil,
		set: func() error { return wtx.ensureCheck(&op.Check) },
		del: func() error { return wtx.deleteCheck(node, id) },
	}
	if existing != nil {
		e.have = existing.ModifyIndex
	}
	if ok, err := e.run(wtx, op.Verb, op.Check.ModifyIndex); !ok || err != nil {
		return nil, err
	}
	raw, err := e.found(firstWatch(tx, ws, tableChecks, indexID, node, id))
	if err != nil {
		return nil, err
	}
	return structs.TxnResults{{Check: raw.(*structs.HealthCheck).Clone()}}, nil
}

// firstWatch looks one object up and watches it.
func firstWatch(tx *memdb.Txn, ws memdb.WatchSet, table, index string, args ...any) (any, error) {
	ch, raw, err := tx.FirstWatch(table, index, args...)
	if err != nil {
		return nil, fmt.Errorf("%s lookup failed: %w", table, err)
	}
	ws.Add(ch)
	return raw, nil
}

// txnSession runs one session operation; it has no result. Destroying a
// missing session is not an error, as in Consul.
func txnSession(wtx *writeTxn, op *structs.TxnSessionOp) error {
	var err error
	switch {
	case wtx == nil:
		err = fmt.Errorf("Session verb %q is not allowed in a read-only transaction", op.Verb)
	case op.Verb == structs.TxnSessionDelete:
		err = wtx.deleteSession(op.Session.ID)
	default:
		err = fmt.Errorf("unknown Session verb %q", op.Verb)
	}
	if err != nil {
		return fmt.Errorf("failed to delete session: %w", err)
	}
	return nil
}
