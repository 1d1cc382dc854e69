package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Transactions: a list of KV, node, service, check and session operations
// applied all or nothing in one memdb transaction, with Consul's verbs,
// results and error texts. The catalog and session kinds are in
// txn_catalog.go.

// TxnRW applies ops in one write transaction at Raft index idx. When any
// operation fails nothing is stored and the errors of every failed
// operation are returned (with no results); otherwise the results are
// returned in operation order: set, cas, lock, unlock, check-index and
// check-session echo the entry without its Value, get returns it with its
// Value, get-tree returns one result per entry, and the deletes and
// check-not-exists return none.
func (s *Store) TxnRW(idx uint64, ops structs.TxnOps) (structs.TxnResults, structs.TxnErrors) {
	tx := &writeTxn{Txn: s.db.Txn(true), idx: idx, store: s}
	defer tx.Abort()
	results, errs := txnDispatch(tx.Txn, tx, nil, ops)
	if len(errs) > 0 {
		return nil, errs
	}
	tx.Commit()
	return results, nil
}

// TxnRO runs a transaction of read and check verbs on a consistent view,
// returning the KV tables' index and watching every key and prefix read. A
// write verb is refused with an error for its operation.
func (s *Store) TxnRO(ws memdb.WatchSet, ops structs.TxnOps) (uint64, structs.TxnResults, structs.TxnErrors) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	results, errs := txnDispatch(tx, nil, ws, ops)
	idx := maxIndex(tx, txnReadTables(ops)...)
	if len(errs) > 0 {
		return idx, nil, errs
	}
	return idx, results, nil
}

// txnReadTables lists the tables whose index a read-only transaction's
// answer carries: those its operations read.
func txnReadTables(ops structs.TxnOps) []string {
	var kv, nodes, services, checks bool
	for _, op := range ops {
		switch {
		case op.IsEmpty():
		case op.KV != nil:
			kv = true
		case op.Node != nil:
			nodes = true
		case op.Service != nil:
			services = true
		case op.Check != nil:
			checks = true
		}
	}
	var tables []string
	if kv {
		tables = append(tables, tableKVs, tableTombstones)
	}
	if nodes {
		tables = append(tables, tableNodes)
	}
	if services {
		tables = append(tables, tableServices)
	}
	if checks {
		tables = append(tables, tableChecks)
	}
	return tables
}

// txnDispatch runs every operation, collecting results and errors. wtx is
// nil for a read-only transaction.
func txnDispatch(tx *memdb.Txn, wtx *writeTxn, ws memdb.WatchSet, ops structs.TxnOps) (structs.TxnResults, structs.TxnErrors) {
	results := structs.TxnResults{}
	var errs structs.TxnErrors
	for i, op := range ops {
		var (
			ret structs.TxnResults
			err error
		)
		switch {
		case op.IsEmpty():
			err = fmt.Errorf("no operation specified")
		case op.KV != nil:
			ret, err = txnKV(tx, wtx, ws, op.KV)
		case op.Node != nil:
			ret, err = txnNode(tx, wtx, ws, op.Node)
		case op.Service != nil:
			ret, err = txnService(tx, wtx, ws, op.Service)
		case op.Check != nil:
			ret, err = txnCheck(tx, wtx, ws, op.Check)
		default:
			err = txnSession(wtx, op.Session)
		}
		if err != nil {
			errs = append(errs, &structs.TxnError{OpIndex: i, What: err.Error()})
			continue
		}
		results = append(results, ret...)
	}
	return results, errs
}

// txnKV runs one KV operation. Results are copies: the entries stored stay
// untouched.
func txnKV(tx *memdb.Txn, wtx *writeTxn, ws memdb.WatchSet, op *structs.TxnKVOp) (structs.TxnResults, error) {
	key := op.DirEnt.Key
	if op.Verb.IsWrite() && wtx == nil {
		return nil, fmt.Errorf("KV verb %q is not allowed in a read-only transaction", op.Verb)
	}

	var (
		entry *structs.DirEntry // echoed without its Value
		err   error
	)
	switch op.Verb {
	case structs.KVSet:
		entry, err = wtx.kvsSet(&op.DirEnt, false)

	case structs.KVCAS:
		var ok bool
		ok, entry, err = wtx.kvsSetCAS(&op.DirEnt)
		if !ok && err == nil {
			err = fmt.Errorf("failed to set key %q, index is stale", key)
		}

	case structs.KVLock:
		var ok bool
		ok, entry, err = wtx.kvsLock(&op.DirEnt)
		if !ok && err == nil {
			err = fmt.Errorf("failed to lock key %q, lock is already held", key)
		}

	case structs.KVUnlock:
		var ok bool
		ok, entry, err = wtx.kvsUnlock(&op.DirEnt)
		if !ok && err == nil {
			err = fmt.Errorf("failed to unlock key %q, lock isn't held, or is held by another session", key)
		}

	case structs.KVDelete:
		err = wtx.kvsDelete(key)

	case structs.KVDeleteCAS:
		var ok bool
		ok, err = wtx.kvsDeleteCAS(op.DirEnt.ModifyIndex, key)
		if !ok && err == nil {
			err = fmt.Errorf("failed to delete key %q, index is stale", key)
		}

	case structs.KVDeleteTree:
		err = wtx.kvsDeleteTree(key)

	case structs.KVGet:
		_, e, err := kvsGetTxn(tx, ws, key)
		if err != nil {
			return nil, err
		}
		if e == nil {
			return nil, fmt.Errorf("key %q doesn't exist", key)
		}
		return structs.TxnResults{{KV: e.Clone()}}, nil

	case structs.KVGetTree:
		_, entries, err := kvsListTxn(tx, ws, key)
		if err != nil {
			return nil, err
		}
		results := make(structs.TxnResults, 0, len(entries))
		for _, e := range entries {
			results = append(results, &structs.TxnResult{KV: e.Clone()})
		}
		return results, nil

	case structs.KVCheckSession:
		var e *structs.DirEntry
		_, e, err = kvsGetTxn(tx, ws, key)
		switch {
		case err != nil:
		case e == nil:
			err = fmt.Errorf("failed to check session, key %q doesn't exist", key)
		case e.Session != op.DirEnt.Session:
			err = fmt.Errorf("failed session check for key %q, current session %q != %q", key, e.Session, op.DirEnt.Session)
		default:
			entry = e
		}

	case structs.KVCheckIndex:
		var e *structs.DirEntry
		_, e, err = kvsGetTxn(tx, ws, key)
		switch {
		case err != nil:
		case e == nil:
			err = fmt.Errorf("failed to check index, key %q doesn't exist", key)
		case e.ModifyIndex != op.DirEnt.ModifyIndex:
			err = fmt.Errorf("failed index check for key %q, current modify index %d != %d", key, e.ModifyIndex, op.DirEnt.ModifyIndex)
		default:
			entry = e
		}

	case structs.KVCheckNotExists:
		var e *structs.DirEntry
		_, e, err = kvsGetTxn(tx, ws, key)
		if err == nil && e != nil {
			err = fmt.Errorf("key %q exists", key)
		}

	default:
		err = fmt.Errorf("unknown KV verb %q", op.Verb)
	}
	if err != nil {
		return nil, err
	}
	if entry == nil {
		return nil, nil
	}
	echo := *entry
	echo.Value = nil
	return structs.TxnResults{{KV: &echo}}, nil
}
