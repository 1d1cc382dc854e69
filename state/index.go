package state

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"
)

// IndexEntry is one row of the index table: the Raft index at which the
// table or finer key named Key last changed. Snapshots carry them so that a
// restored store answers blocking queries with the same indexes.
type IndexEntry struct {
	Key   string
	Value uint64
}

// Finer index keys. A service's key moves whenever anything its health
// results depend on changes: its instances, their checks, and the node
// records and node-level checks of the nodes hosting them. The connect key
// does the same for the service's Connect endpoints (sidecar proxies and
// Connect-native instances). A node's key moves with its record, services
// and checks. Names are lowercased, as their lookups are case-insensitive.
func nodeIndexKey(node string) string    { return "node." + strings.ToLower(node) }
func serviceIndexKey(name string) string { return "service." + strings.ToLower(name) }
func connectIndexKey(name string) string { return "connect." + strings.ToLower(name) }

// indexValue returns the value recorded for key, 0 when there is none, and
// adds the entry's watch channel to ws.
func indexValue(tx *memdb.Txn, ws memdb.WatchSet, key string) (uint64, bool) {
	ch, raw, err := tx.FirstWatch(tableIndex, indexID, key)
	if err != nil || raw == nil {
		return 0, false
	}
	ws.Add(ch)
	return raw.(*IndexEntry).Value, true
}

// maxIndex returns the highest value recorded for any of keys. A read must
// never answer 0 once anything was written (clients treat 0 as "no index"),
// so when none of the keys has been written yet it answers the store's last
// index instead: every later write to those keys has a higher index, so a
// blocking query on it still wakes when they change.
func maxIndex(tx *memdb.Txn, keys ...string) uint64 {
	var max uint64
	for _, k := range keys {
		if v, _ := indexValue(tx, nil, k); v > max {
			max = v
		}
	}
	if max == 0 {
		return lastIndexTxn(tx)
	}
	return max
}

// lastIndexTxn is the highest value in the index table.
func lastIndexTxn(tx *memdb.Txn) uint64 {
	it, err := tx.Get(tableIndex, indexID)
	if err != nil {
		return 0
	}
	var max uint64
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if v := raw.(*IndexEntry).Value; v > max {
			max = v
		}
	}
	return max
}

// bumpIndex records the transaction's index for each key. An index never
// moves backwards.
func (tx *writeTxn) bumpIndex(keys ...string) error {
	for _, k := range keys {
		if err := setIndexMax(tx.Txn, k, tx.idx); err != nil {
			return err
		}
	}
	return nil
}

// setIndexMax raises key's value to idx unless it is higher already.
func setIndexMax(tx *memdb.Txn, key string, idx uint64) error {
	raw, err := tx.First(tableIndex, indexID, key)
	if err != nil {
		return fmt.Errorf("index lookup %q: %w", key, err)
	}
	if raw != nil && raw.(*IndexEntry).Value >= idx {
		return nil
	}
	if err := tx.Insert(tableIndex, &IndexEntry{Key: key, Value: idx}); err != nil {
		return fmt.Errorf("index update %q: %w", key, err)
	}
	return nil
}

// deleteIndexKey drops a finer key whose subject is gone (a deleted node, a
// service without instances), so the table does not grow with every name
// ever used. Reads fall back to the table-level index, which the same write
// moved.
func (tx *writeTxn) deleteIndexKey(key string) error {
	raw, err := tx.First(tableIndex, indexID, key)
	if err != nil {
		return fmt.Errorf("index lookup %q: %w", key, err)
	}
	if raw == nil {
		return nil
	}
	if err := tx.Delete(tableIndex, raw); err != nil {
		return fmt.Errorf("index delete %q: %w", key, err)
	}
	return nil
}
