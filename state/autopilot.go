package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// The autopilot configuration: one row, written by the leader when it
// finds none (from the agent config's defaults) and by operators through
// /v1/operator/autopilot/configuration.

const tableAutopilotConfig = "autopilot-config"

func autopilotConfigTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableAutopilotConfig, Indexes: map[string]*memdb.IndexSchema{indexID: singletonIndex()}}
}

// AutopilotConfig returns the autopilot configuration, or nil before the
// leader stored one, with the index of its table.
func (s *Store) AutopilotConfig(ws memdb.WatchSet) (uint64, *structs.AutopilotConfig, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	ch, raw, err := tx.FirstWatch(tableAutopilotConfig, indexID)
	if err != nil {
		return 0, nil, fmt.Errorf("failed autopilot config lookup: %w", err)
	}
	ws.Add(ch)
	idx := maxIndex(tx, tableAutopilotConfig)
	if raw == nil {
		return idx, nil, nil
	}
	c := *raw.(*structs.AutopilotConfig)
	return idx, &c, nil
}

// AutopilotSetConfig replaces the configuration at idx, keeping the
// stored CreateIndex.
func (s *Store) AutopilotSetConfig(idx uint64, cfg *structs.AutopilotConfig) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.autopilotSetConfig(cfg) })
}

// AutopilotCASConfig replaces the configuration at idx only while the
// stored one's ModifyIndex is cidx, or, with cidx 0, while none is stored
// (Consul's check-and-set). It reports whether it wrote.
func (s *Store) AutopilotCASConfig(idx, cidx uint64, cfg *structs.AutopilotConfig) (bool, error) {
	ok := false
	err := s.write(idx, func(tx *writeTxn) error {
		raw, err := tx.First(tableAutopilotConfig, indexID)
		if err != nil {
			return fmt.Errorf("failed autopilot config lookup: %w", err)
		}
		existing, found := raw.(*structs.AutopilotConfig)
		if (found && existing.ModifyIndex != cidx) || (!found && cidx != 0) {
			return nil
		}
		ok = true
		return tx.autopilotSetConfig(cfg)
	})
	return ok, err
}

func (tx *writeTxn) autopilotSetConfig(in *structs.AutopilotConfig) error {
	if in == nil {
		return fmt.Errorf("missing autopilot configuration")
	}
	c := *in
	raw, err := tx.First(tableAutopilotConfig, indexID)
	if err != nil {
		return fmt.Errorf("failed autopilot config lookup: %w", err)
	}
	c.CreateIndex = tx.idx
	if existing, ok := raw.(*structs.AutopilotConfig); ok {
		c.CreateIndex = existing.CreateIndex
	}
	c.ModifyIndex = tx.idx
	if err := tx.Insert(tableAutopilotConfig, &c); err != nil {
		return fmt.Errorf("failed inserting autopilot config: %w", err)
	}
	return tx.bumpIndex(tableAutopilotConfig)
}

// AutopilotConfig returns the snapshot's autopilot configuration, or nil.
func (sn *Snapshot) AutopilotConfig() (*structs.AutopilotConfig, error) {
	raw, err := sn.tx.First(tableAutopilotConfig, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot autopilot config: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	c := *raw.(*structs.AutopilotConfig)
	return &c, nil
}

// AutopilotConfig restores the autopilot configuration.
func (r *Restore) AutopilotConfig(c *structs.AutopilotConfig) error {
	if c == nil {
		return nil
	}
	cp := *c
	if err := r.tx.Insert(tableAutopilotConfig, &cp); err != nil {
		return fmt.Errorf("restore autopilot config: %w", err)
	}
	return r.raise(c.ModifyIndex, tableAutopilotConfig)
}
