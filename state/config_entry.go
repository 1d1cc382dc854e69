package state

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/structs"
)

// Config entries: one table keyed by (kind, name), both compared
// case-insensitively as in Consul. Every write of a kind that shapes
// discovery chains (or whose protocol they depend on) is checked against
// the chains it affects before it is applied (config_entry_graph.go), so a
// write that would break one changes nothing and returns Consul's message.

// tableConfigEntries holds every config entry.
const tableConfigEntries = "config-entries"

// indexKind indexes entries by kind.
const indexKind = "kind"

// ErrMissingConfigEntryName refuses an entry without a name.
var ErrMissingConfigEntryName = errors.New("Name is required")

// configEntryKindIndexKey is the index key moved by every write to one
// kind, so that a list or get of that kind reports the last change to it.
func configEntryKindIndexKey(kind string) string {
	return tableConfigEntries + "." + strings.ToLower(kind)
}

// configEntriesTableSchema is the table's schema, listed in schema().
func configEntriesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableConfigEntries,
		Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: keyIndexer(func(e structs.ConfigEntry) []string {
				return []string{e.GetKind(), e.GetName()}
			})},
			indexKind: {Name: indexKind, Indexer: keyIndexer(func(e structs.ConfigEntry) []string {
				return []string{e.GetKind()}
			})},
		},
	}
}

// ConfigEntry returns one entry (nil when missing) and the index of its
// kind. The watch fires when the entry is written or deleted.
func (s *Store) ConfigEntry(ws memdb.WatchSet, kind, name string) (uint64, structs.ConfigEntry, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	e, err := configEntryTxn(tx, ws, kind, name)
	if err != nil {
		return 0, nil, err
	}
	return maxIndex(tx, configEntryKindIndexKey(kind)), structs.CloneConfigEntry(e), nil
}

// ConfigEntriesByKind lists the entries of one kind (every kind when kind
// is empty) in name order, with the index of the last change to them.
func (s *Store) ConfigEntriesByKind(ws memdb.WatchSet, kind string) (uint64, []structs.ConfigEntry, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	entries, err := configEntriesTxn(tx, ws, kind)
	if err != nil {
		return 0, nil, err
	}
	out := make([]structs.ConfigEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, structs.CloneConfigEntry(e))
	}
	if kind == "" {
		return maxIndex(tx, tableConfigEntries), out, nil
	}
	return maxIndex(tx, configEntryKindIndexKey(kind)), out, nil
}

// ConfigEntryApply applies a ConfigEntry Raft command and reports whether
// it took effect (false for a failed CAS).
func (s *Store) ConfigEntryApply(idx uint64, req *structs.ConfigEntryRequest) (bool, error) {
	if req.Entry == nil {
		return false, errors.New("config entry request without an entry")
	}
	e := req.Entry
	switch req.Op {
	case structs.ConfigEntryUpsert:
		return true, s.EnsureConfigEntry(idx, e)
	case structs.ConfigEntryUpsertCAS:
		return s.EnsureConfigEntryCAS(idx, e.GetRaftIndex().ModifyIndex, e)
	case structs.ConfigEntryDelete:
		return true, s.DeleteConfigEntry(idx, e.GetKind(), e.GetName())
	case structs.ConfigEntryDeleteCAS:
		return s.DeleteConfigEntryCAS(idx, e.GetRaftIndex().ModifyIndex, e.GetKind(), e.GetName())
	}
	return false, fmt.Errorf("invalid config entry operation %q", req.Op)
}

// EnsureConfigEntry creates or replaces an entry. The entry must be
// normalized and validated on its own already; the write fails, changing
// nothing, when it would break a discovery chain.
func (s *Store) EnsureConfigEntry(idx uint64, e structs.ConfigEntry) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.ensureConfigEntry(e) })
}

// EnsureConfigEntryCAS writes the entry only if cidx is the stored entry's
// ModifyIndex, or, with cidx 0, only if it does not exist.
func (s *Store) EnsureConfigEntryCAS(idx, cidx uint64, e structs.ConfigEntry) (bool, error) {
	var ok bool
	err := s.write(idx, func(tx *writeTxn) error {
		existing, err := configEntryTxn(tx.Txn, nil, e.GetKind(), e.GetName())
		if err != nil {
			return err
		}
		switch {
		case cidx == 0 && existing != nil,
			cidx != 0 && (existing == nil || existing.GetRaftIndex().ModifyIndex != cidx):
			return nil
		}
		ok = true
		return tx.ensureConfigEntry(e)
	})
	return ok, err
}

func (tx *writeTxn) ensureConfigEntry(in structs.ConfigEntry) error {
	if in == nil {
		return errors.New("missing config entry")
	}
	if in.GetName() == "" {
		return ErrMissingConfigEntryName
	}
	if !structs.ValidConfigEntryKind(in.GetKind()) {
		return fmt.Errorf("invalid config entry kind: %s", in.GetKind())
	}
	e := structs.CloneConfigEntry(in)
	existing, err := configEntryTxn(tx.Txn, nil, e.GetKind(), e.GetName())
	if err != nil {
		return err
	}
	ri := e.GetRaftIndex()
	if existing != nil {
		ri.CreateIndex = existing.GetRaftIndex().CreateIndex
	} else {
		ri.CreateIndex = tx.idx
	}
	ri.ModifyIndex = tx.idx
	if err := validateProposedConfigEntryInGraph(tx.Txn, structs.NewConfigEntryKindName(e), e); err != nil {
		return err
	}
	if err := tx.Insert(tableConfigEntries, e); err != nil {
		return fmt.Errorf("failed inserting config entry: %w", err)
	}
	if isGatewayEntryKind(e.GetKind()) {
		if err := tx.syncGatewayTxn(e.GetName(), ""); err != nil {
			return err
		}
	}
	if err := tx.configEntryVirtualIP(e.GetKind(), e.GetName(), true); err != nil { // virtual_ip.go
		return err
	}
	return tx.bumpIndex(tableConfigEntries, configEntryKindIndexKey(e.GetKind()))
}

// DeleteConfigEntry deletes an entry; a missing one is not an error. The
// delete fails, changing nothing, when it would break a discovery chain.
func (s *Store) DeleteConfigEntry(idx uint64, kind, name string) error {
	return s.write(idx, func(tx *writeTxn) error {
		_, err := tx.deleteConfigEntry(kind, name, 0, false)
		return err
	})
}

// DeleteConfigEntryCAS deletes an entry only if its ModifyIndex is cidx.
// Deleting an entry that does not exist succeeds, as in Consul.
func (s *Store) DeleteConfigEntryCAS(idx, cidx uint64, kind, name string) (bool, error) {
	var ok bool
	err := s.write(idx, func(tx *writeTxn) error {
		var err error
		ok, err = tx.deleteConfigEntry(kind, name, cidx, true)
		return err
	})
	return ok, err
}

func (tx *writeTxn) deleteConfigEntry(kind, name string, cidx uint64, cas bool) (bool, error) {
	existing, err := configEntryTxn(tx.Txn, nil, kind, name)
	if err != nil {
		return false, err
	}
	if existing == nil {
		return true, nil
	}
	if cas && existing.GetRaftIndex().ModifyIndex != cidx {
		return false, nil
	}
	if err := validateProposedConfigEntryInGraph(tx.Txn, structs.NewConfigEntryKindName(existing), nil); err != nil {
		return false, err
	}
	if err := tx.Delete(tableConfigEntries, existing); err != nil {
		return false, fmt.Errorf("failed removing config entry: %w", err)
	}
	if isGatewayEntryKind(kind) {
		if err := tx.syncGatewayTxn(existing.GetName(), ""); err != nil {
			return false, err
		}
	}
	if err := tx.configEntryVirtualIP(existing.GetKind(), existing.GetName(), false); err != nil { // virtual_ip.go
		return false, err
	}
	return true, tx.bumpIndex(tableConfigEntries, configEntryKindIndexKey(kind))
}

// configEntryTxn returns the stored entry (shared: do not modify) or nil,
// watching its key.
func configEntryTxn(tx *memdb.Txn, ws memdb.WatchSet, kind, name string) (structs.ConfigEntry, error) {
	ch, raw, err := tx.FirstWatch(tableConfigEntries, indexID, kind, name)
	if err != nil {
		return nil, fmt.Errorf("failed config entry lookup: %w", err)
	}
	ws.Add(ch)
	if raw == nil {
		return nil, nil
	}
	return raw.(structs.ConfigEntry), nil
}

// configEntriesTxn lists the stored entries of a kind (all when empty) in
// (kind, name) order, watching them.
func configEntriesTxn(tx *memdb.Txn, ws memdb.WatchSet, kind string) ([]structs.ConfigEntry, error) {
	var (
		it  memdb.ResultIterator
		err error
	)
	if kind == "" {
		it, err = tx.Get(tableConfigEntries, indexID)
	} else {
		it, err = tx.Get(tableConfigEntries, indexKind, kind)
	}
	if err != nil {
		return nil, fmt.Errorf("failed config entry lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []structs.ConfigEntry
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(structs.ConfigEntry))
	}
	return out, nil
}

// ConfigEntries lists every entry in the view (for snapshots).
func (sn *Snapshot) ConfigEntries() ([]structs.ConfigEntry, error) {
	entries, err := configEntriesTxn(sn.tx, nil, "")
	if err != nil {
		return nil, err
	}
	out := make([]structs.ConfigEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, structs.CloneConfigEntry(e))
	}
	return out, nil
}

// ConfigEntry restores an entry as it was stored (no validation: the
// snapshot held a valid graph).
func (r *Restore) ConfigEntry(e structs.ConfigEntry) error {
	if e == nil {
		return nil
	}
	c := structs.CloneConfigEntry(e)
	if err := r.tx.Insert(tableConfigEntries, c); err != nil {
		return fmt.Errorf("restore config entry %s/%s: %w", c.GetKind(), c.GetName(), err)
	}
	return r.raise(c.GetRaftIndex().ModifyIndex, tableConfigEntries, configEntryKindIndexKey(c.GetKind()))
}
