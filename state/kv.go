package state

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// The KV store, following Consul's semantics (agent/consul/state/kvs.go).
// Every delete leaves a tombstone (tombstones.go) so that a list under a
// prefix reports a higher index after a key below it disappears.

// KVSSet stores a key. The lock session of an existing key is kept (only
// KVSLock and KVSUnlock change it); LockIndex and Flags are taken from e,
// as Consul does. Writing a key exactly as it is stored changes nothing and
// moves no index.
func (s *Store) KVSSet(idx uint64, e *structs.DirEntry) error {
	return s.write(idx, func(tx *writeTxn) error {
		_, err := tx.kvsSet(e, false)
		return err
	})
}

// kvsSet stores a copy of in and returns the stored entry. With
// updateSession false the stored session is kept; with it true the session
// of in is stored (the caller validated it).
func (tx *writeTxn) kvsSet(in *structs.DirEntry, updateSession bool) (*structs.DirEntry, error) {
	if in.Key == "" {
		return nil, ErrMissingKey
	}
	e := in.Clone()
	existing, err := getKV(tx.Txn, e.Key)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		e.CreateIndex = existing.CreateIndex
	} else {
		e.CreateIndex = tx.idx
	}
	if !updateSession {
		if existing != nil {
			e.Session = existing.Session
		} else {
			e.Session = ""
		}
	}
	if existing != nil && kvSame(existing, e) {
		return existing, nil
	}
	e.ModifyIndex = tx.idx
	if err := tx.insertKV(e); err != nil {
		return nil, err
	}
	return e, nil
}

func (tx *writeTxn) insertKV(e *structs.DirEntry) error {
	if err := tx.Insert(tableKVs, e); err != nil {
		return fmt.Errorf("failed inserting kvs entry: %w", err)
	}
	return tx.bumpIndex(tableKVs)
}

// kvSame compares what a write can change.
func kvSame(a, b *structs.DirEntry) bool {
	return a.Key == b.Key && a.Flags == b.Flags && a.LockIndex == b.LockIndex &&
		a.Session == b.Session && bytes.Equal(a.Value, b.Value)
}

// KVSSetCAS stores a key only if e.ModifyIndex matches: 0 means "only if
// the key does not exist", anything else must equal the stored entry's
// ModifyIndex. It reports whether the write happened.
func (s *Store) KVSSetCAS(idx uint64, e *structs.DirEntry) (bool, error) {
	var ok bool
	err := s.write(idx, func(tx *writeTxn) error {
		var err error
		ok, _, err = tx.kvsSetCAS(e)
		return err
	})
	return ok, err
}

func (tx *writeTxn) kvsSetCAS(e *structs.DirEntry) (bool, *structs.DirEntry, error) {
	existing, err := getKV(tx.Txn, e.Key)
	if err != nil {
		return false, nil, err
	}
	switch {
	case e.ModifyIndex == 0 && existing != nil:
		return false, nil, nil
	case e.ModifyIndex != 0 && (existing == nil || existing.ModifyIndex != e.ModifyIndex):
		return false, nil, nil
	}
	stored, err := tx.kvsSet(e, false)
	if err != nil {
		return false, nil, err
	}
	return true, stored, nil
}

// KVSLock acquires the lock on a key for e.Session (which must exist) and
// stores e's value and flags. It fails (false) when another session holds
// the lock. Re-acquiring by the holder updates the value and keeps
// LockIndex; a new acquisition increments LockIndex. Lock delays are the
// caller's business (see KVSLockDelay).
func (s *Store) KVSLock(idx uint64, e *structs.DirEntry) (bool, error) {
	var ok bool
	err := s.write(idx, func(tx *writeTxn) error {
		var err error
		ok, _, err = tx.kvsLock(e)
		return err
	})
	return ok, err
}

func (tx *writeTxn) kvsLock(in *structs.DirEntry) (bool, *structs.DirEntry, error) {
	if in.Session == "" {
		return false, nil, ErrMissingLockSession
	}
	sess, err := getSession(tx.Txn, nil, in.Session)
	if err != nil {
		return false, nil, err
	}
	if sess == nil {
		return false, nil, errorf(ErrInvalidSession, "invalid session %q", in.Session)
	}
	existing, err := getKV(tx.Txn, in.Key)
	if err != nil {
		return false, nil, err
	}
	e := in.Clone()
	switch {
	case existing == nil:
		e.LockIndex = 1
	case existing.Session == e.Session:
		e.LockIndex = existing.LockIndex
	case existing.Session != "":
		return false, nil, nil
	default:
		e.LockIndex = existing.LockIndex + 1
	}
	stored, err := tx.kvsSet(e, true)
	if err != nil {
		return false, nil, err
	}
	return true, stored, nil
}

// KVSUnlock releases the lock e.Session holds on a key and stores e's value
// and flags; LockIndex is kept. It fails (false) when the key does not exist
// or the session does not hold it.
func (s *Store) KVSUnlock(idx uint64, e *structs.DirEntry) (bool, error) {
	var ok bool
	err := s.write(idx, func(tx *writeTxn) error {
		var err error
		ok, _, err = tx.kvsUnlock(e)
		return err
	})
	return ok, err
}

func (tx *writeTxn) kvsUnlock(in *structs.DirEntry) (bool, *structs.DirEntry, error) {
	if in.Session == "" {
		return false, nil, ErrMissingLockSession
	}
	existing, err := getKV(tx.Txn, in.Key)
	if err != nil {
		return false, nil, err
	}
	if existing == nil || existing.Session != in.Session {
		return false, nil, nil
	}
	e := in.Clone()
	e.Session = ""
	e.LockIndex = existing.LockIndex
	stored, err := tx.kvsSet(e, true)
	if err != nil {
		return false, nil, err
	}
	return true, stored, nil
}

// KVSDelete deletes a key, leaving a tombstone. A missing key is not an
// error.
func (s *Store) KVSDelete(idx uint64, key string) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.kvsDelete(key) })
}

func (tx *writeTxn) kvsDelete(key string) error {
	e, err := getKV(tx.Txn, key)
	if err != nil || e == nil {
		return err
	}
	return tx.deleteKVEntry(e)
}

// deleteKVEntry removes a stored entry and buries its tombstone.
func (tx *writeTxn) deleteKVEntry(e *structs.DirEntry) error {
	if err := tx.Delete(tableKVs, e); err != nil {
		return fmt.Errorf("failed deleting kvs entry: %w", err)
	}
	if err := tx.bumpIndex(tableKVs); err != nil {
		return err
	}
	return tx.insertTombstone(e.Key)
}

// KVSDeleteCAS deletes a key only if its ModifyIndex is cidx. Deleting a
// key that does not exist succeeds, as in Consul.
func (s *Store) KVSDeleteCAS(idx, cidx uint64, key string) (bool, error) {
	var ok bool
	err := s.write(idx, func(tx *writeTxn) error {
		var err error
		ok, err = tx.kvsDeleteCAS(cidx, key)
		return err
	})
	return ok, err
}

func (tx *writeTxn) kvsDeleteCAS(cidx uint64, key string) (bool, error) {
	e, err := getKV(tx.Txn, key)
	if err != nil {
		return false, err
	}
	if e == nil {
		return true, nil
	}
	if e.ModifyIndex != cidx {
		return false, nil
	}
	return true, tx.deleteKVEntry(e)
}

// KVSDeleteTree deletes every key starting with prefix, each leaving a
// tombstone.
func (s *Store) KVSDeleteTree(idx uint64, prefix string) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.kvsDeleteTree(prefix) })
}

func (tx *writeTxn) kvsDeleteTree(prefix string) error {
	entries, err := listKVs(tx.Txn, nil, prefix)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := tx.deleteKVEntry(e); err != nil {
			return err
		}
	}
	return nil
}

// KVSGet returns one entry (nil when missing) and the KV tables' index; the
// caller answers with the entry's ModifyIndex when it exists. The watch
// fires when the key is written or deleted.
func (s *Store) KVSGet(ws memdb.WatchSet, key string) (uint64, *structs.DirEntry, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	idx, e, err := kvsGetTxn(tx, ws, key)
	return idx, e.Clone(), err
}

func kvsGetTxn(tx *memdb.Txn, ws memdb.WatchSet, key string) (uint64, *structs.DirEntry, error) {
	ch, raw, err := tx.FirstWatch(tableKVs, indexID, key)
	if err != nil {
		return 0, nil, fmt.Errorf("failed kvs lookup: %w", err)
	}
	ws.Add(ch)
	idx := maxIndex(tx, tableKVs, tableTombstones)
	if raw == nil {
		return idx, nil, nil
	}
	return idx, raw.(*structs.DirEntry), nil
}

// KVSList returns the entries under prefix (all with an empty prefix) in key
// order. The index is the highest ModifyIndex among them and the tombstones
// under the prefix, so deleting a key below the prefix moves it; with an
// empty prefix, or when there is neither, it is the KV tables' index.
func (s *Store) KVSList(ws memdb.WatchSet, prefix string) (uint64, structs.DirEntries, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	idx, entries, err := kvsListTxn(tx, ws, prefix)
	if err != nil {
		return 0, nil, err
	}
	out := make(structs.DirEntries, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Clone())
	}
	return idx, out, nil
}

func kvsListTxn(tx *memdb.Txn, ws memdb.WatchSet, prefix string) (uint64, []*structs.DirEntry, error) {
	entries, err := listKVs(tx, ws, prefix)
	if err != nil {
		return 0, nil, err
	}
	var max uint64
	for _, e := range entries {
		if e.ModifyIndex > max {
			max = e.ModifyIndex
		}
	}
	idx, err := prefixIndex(tx, prefix, max)
	return idx, entries, err
}

// prefixIndex combines the highest entry index seen under prefix with the
// tombstones under it, as described on KVSList.
func prefixIndex(tx *memdb.Txn, prefix string, entriesMax uint64) (uint64, error) {
	if prefix == "" {
		// Everything is listed: the table indexes cover it exactly.
		return maxIndex(tx, tableKVs, tableTombstones), nil
	}
	// The tombstones are read without a watch: a tombstone is only ever
	// buried by deleting a key, and the key prefix's own watch (listKVs)
	// fires for that. Watching the graveyard too would wake every list
	// query whenever any key anywhere is deleted, because a prefix with no
	// tombstones yet watches the root of the graveyard.
	stones, err := tombstonesUnder(tx, prefix)
	if err != nil {
		return 0, err
	}
	max := entriesMax
	for _, t := range stones {
		if t.Index > max {
			max = t.Index
		}
	}
	if max == 0 {
		return maxIndex(tx, tableKVs, tableTombstones), nil
	}
	return max, nil
}

// KVSListKeys lists the keys under prefix. With a separator, keys are cut
// just after the first separator following the prefix and deduplicated, so
// that "a/b/c" lists as "a/b/" under prefix "a/" (like a directory). The
// index is computed as in KVSList, over every entry under the prefix.
func (s *Store) KVSListKeys(ws memdb.WatchSet, prefix, separator string) (uint64, []string, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	entries, err := listKVs(tx, ws, prefix)
	if err != nil {
		return 0, nil, err
	}
	keys := []string{}
	var max uint64
	prev := ""
	for _, e := range entries {
		if e.ModifyIndex > max {
			max = e.ModifyIndex
		}
		if separator == "" {
			keys = append(keys, e.Key)
			continue
		}
		after := e.Key[len(prefix):]
		if i := strings.Index(after, separator); i >= 0 {
			k := e.Key[:len(prefix)+i+len(separator)]
			if k != prev {
				keys = append(keys, k)
				prev = k
			}
			continue
		}
		keys = append(keys, e.Key)
	}
	idx, err := prefixIndex(tx, prefix, max)
	if err != nil {
		return 0, nil, err
	}
	return idx, keys, nil
}

// KVSLockDelay returns until when a new lock on key must wait because the
// session that held it was invalidated or destroyed (zero time: no delay).
// Lock delays are kept in memory on each server, not replicated.
func (s *Store) KVSLockDelay(key string) time.Time {
	return s.lockDelay.get(key, time.Now())
}

func getKV(tx *memdb.Txn, key string) (*structs.DirEntry, error) {
	raw, err := tx.First(tableKVs, indexID, key)
	if err != nil {
		return nil, fmt.Errorf("failed kvs lookup: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.DirEntry), nil
}

// listKVs returns the stored entries under prefix in key order and watches
// the prefix: the channel fires when any key below it is written or
// deleted.
func listKVs(tx *memdb.Txn, ws memdb.WatchSet, prefix string) ([]*structs.DirEntry, error) {
	it, err := tx.Get(tableKVs, indexIDPrefix, prefix)
	if err != nil {
		return nil, fmt.Errorf("failed kvs lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.DirEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.DirEntry))
	}
	return out, nil
}
