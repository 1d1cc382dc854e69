package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
)

// Tombstone records that a KV key was deleted at Index. Without it, a list
// under a prefix would have no entry left to report the delete's index and
// a blocking query on the prefix would never see its result change.
// Tombstones are reaped (ReapTombstones) once no blocking query can still
// need them.
type Tombstone struct {
	Key   string
	Index uint64
}

// insertTombstone buries key at the transaction's index, replacing an
// older tombstone of the same key.
func (tx *writeTxn) insertTombstone(key string) error {
	if err := tx.Insert(tableTombstones, &Tombstone{Key: key, Index: tx.idx}); err != nil {
		return fmt.Errorf("failed adding to graveyard: %w", err)
	}
	return tx.bumpIndex(tableTombstones)
}

// ReapTombstones removes every tombstone with an Index at or below
// reapIndex. Like Consul it does not move the tombstones index: reaping
// changes no result a client could see.
func (s *Store) ReapTombstones(idx, reapIndex uint64) error {
	return s.write(idx, func(tx *writeTxn) error {
		stones, err := tombstonesUnder(tx.Txn, "")
		if err != nil {
			return err
		}
		for _, t := range stones {
			if t.Index > reapIndex {
				continue
			}
			if err := tx.Delete(tableTombstones, t); err != nil {
				return fmt.Errorf("failed to reap kvs tombstones: %w", err)
			}
		}
		return nil
	})
}

// tombstonesUnder lists the tombstones under prefix.
func tombstonesUnder(tx *memdb.Txn, prefix string) ([]*Tombstone, error) {
	it, err := tx.Get(tableTombstones, indexIDPrefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("failed graveyard lookup: %w", err)
	}
	var out []*Tombstone
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*Tombstone))
	}
	return out, nil
}
