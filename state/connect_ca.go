package state

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// The Connect CA: its configuration (one row), the roots list, each root's
// private key (its own table, so that no read of roots can ever return a
// key), and the replicated counter leaf serial numbers are taken from.

// CA table names.
const (
	tableCAConfig = "connect-ca-config"
	tableCARoots  = "connect-ca-roots"
	tableCAKeys   = "connect-ca-keys"
	tableCASerial = "connect-ca-serial"
)

// CA errors.
var (
	// ErrCARootsActive refuses a roots list without exactly one active
	// root.
	ErrCARootsActive = errors.New("exactly one CA root must be active")
	// ErrCAMissingKey refuses a new root without its private key.
	ErrCAMissingKey = errors.New("CA root has no signing key")
	// ErrCAMissingConfig refuses a CA write before any configuration.
	ErrCAMissingConfig = errors.New("CA configuration is not initialized")
)

// caSerial is the single row of the serial table: the next serial number
// to hand out.
type caSerial struct {
	Next uint64
}

// singletonIndex indexes the one row of a single-row table.
func singletonIndex() *memdb.IndexSchema {
	return &memdb.IndexSchema{Name: indexID, Unique: true, Indexer: &memdb.ConditionalIndex{
		Conditional: func(interface{}) (bool, error) { return true, nil },
	}}
}

// CA table schemas, listed in schema().
func caConfigTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableCAConfig, Indexes: map[string]*memdb.IndexSchema{indexID: singletonIndex()}}
}

func caRootsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableCARoots, Indexes: map[string]*memdb.IndexSchema{
		indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
	}}
}

func caKeysTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableCAKeys, Indexes: map[string]*memdb.IndexSchema{
		indexID: {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "RootID"}},
	}}
}

func caSerialTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableCASerial, Indexes: map[string]*memdb.IndexSchema{indexID: singletonIndex()}}
}

// CAConfig returns the CA configuration, or nil before the leader has
// bootstrapped the CA.
func (s *Store) CAConfig(ws memdb.WatchSet) (uint64, *structs.CAConfiguration, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	ch, raw, err := tx.FirstWatch(tableCAConfig, indexID)
	if err != nil {
		return 0, nil, fmt.Errorf("failed CA config lookup: %w", err)
	}
	ws.Add(ch)
	idx := maxIndex(tx, tableCAConfig)
	if raw == nil {
		return idx, nil, nil
	}
	return idx, cloneCAConfig(raw.(*structs.CAConfiguration)), nil
}

// CARoots returns every trusted root (without keys), oldest first, and
// the index of the roots table: the index a set-roots-config CAS compares.
func (s *Store) CARoots(ws memdb.WatchSet) (uint64, structs.CARoots, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	roots, err := caRoots(tx, ws)
	if err != nil {
		return 0, nil, err
	}
	out := make(structs.CARoots, 0, len(roots))
	for _, r := range roots {
		out = append(out, cloneCARoot(r))
	}
	return maxIndex(tx, tableCARoots), out, nil
}

// CARootActive returns the active root, or nil.
func (s *Store) CARootActive(ws memdb.WatchSet) (uint64, *structs.CARoot, error) {
	idx, roots, err := s.CARoots(ws)
	if err != nil {
		return 0, nil, err
	}
	return idx, roots.Active(), nil
}

// CASigningKey returns a root's private key, or nil. Only the leader's
// signer calls it; no RPC or HTTP read may.
func (s *Store) CASigningKey(rootID string) (*structs.CASigningKey, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	raw, err := tx.First(tableCAKeys, indexID, rootID)
	if err != nil {
		return nil, fmt.Errorf("failed CA key lookup: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	k := *raw.(*structs.CASigningKey)
	return &k, nil
}

// CANextSerial is the next certificate serial number the counter will
// hand out.
func (s *Store) CANextSerial() uint64 {
	tx := s.db.Txn(false)
	defer tx.Abort()
	return caNextSerial(tx)
}

// CASetConfig replaces the CA configuration, keeping the stored cluster ID
// once one is set (it is fixed for the cluster's lifetime).
func (s *Store) CASetConfig(idx uint64, cfg *structs.CAConfiguration) error {
	return s.write(idx, func(tx *writeTxn) error { return tx.caSetConfig(cfg) })
}

func (tx *writeTxn) caSetConfig(in *structs.CAConfiguration) error {
	if in == nil {
		return ErrCAMissingConfig
	}
	c := cloneCAConfig(in)
	raw, err := tx.First(tableCAConfig, indexID)
	if err != nil {
		return fmt.Errorf("failed CA config lookup: %w", err)
	}
	if raw != nil {
		prev := raw.(*structs.CAConfiguration)
		c.CreateIndex = prev.CreateIndex
		if prev.ClusterID != "" {
			c.ClusterID = prev.ClusterID
		}
	} else {
		c.CreateIndex = tx.idx
	}
	c.ModifyIndex = tx.idx
	if err := tx.Insert(tableCAConfig, c); err != nil {
		return fmt.Errorf("failed updating CA config: %w", err)
	}
	return tx.bumpIndex(tableCAConfig)
}

// CASetRootsAndConfig replaces the whole roots list (and the configuration
// when req.Config is set) in one write, as bootstrap and rotation need. It
// is a check-and-set on the roots table: it reports false, changing
// nothing, when req.Index is not the table's current index (0 matches a
// table never written). Exactly one root must be active and every root
// must have a key, stored already or in req.SigningKeys. Keys of roots no
// longer listed are deleted with them. Roots keep their CreateIndex.
func (s *Store) CASetRootsAndConfig(idx uint64, req *structs.CARequest) (bool, error) {
	var ok bool
	err := s.write(idx, func(tx *writeTxn) error {
		var err error
		ok, err = tx.caSetRootsAndConfig(req)
		return err
	})
	return ok, err
}

func (tx *writeTxn) caSetRootsAndConfig(req *structs.CARequest) (bool, error) {
	current, _ := indexValue(tx.Txn, nil, tableCARoots)
	if req.Index != current {
		return false, nil
	}
	if req.Config == nil {
		if raw, err := tx.First(tableCAConfig, indexID); err != nil {
			return false, fmt.Errorf("failed CA config lookup: %w", err)
		} else if raw == nil {
			return false, ErrCAMissingConfig
		}
	}
	active := 0
	for _, r := range req.Roots {
		if r == nil || r.ID == "" {
			return false, errors.New("CA root without an ID")
		}
		if r.Active {
			active++
		}
	}
	if active != 1 {
		return false, ErrCARootsActive
	}
	newKeys := make(map[string]*structs.CASigningKey, len(req.SigningKeys))
	for _, k := range req.SigningKeys {
		if k != nil && k.PrivateKey != "" {
			newKeys[k.RootID] = k
		}
	}
	old, err := caRoots(tx.Txn, nil)
	if err != nil {
		return false, err
	}
	oldByID := make(map[string]*structs.CARoot, len(old))
	for _, r := range old {
		oldByID[r.ID] = r
	}
	listed := make(map[string]bool, len(req.Roots))
	for _, in := range req.Roots {
		listed[in.ID] = true
		r := cloneCARoot(in)
		r.CreateIndex, r.ModifyIndex = tx.idx, tx.idx
		if prev, ok := oldByID[r.ID]; ok {
			r.CreateIndex = prev.CreateIndex
			if caRootSame(prev, r) {
				r.ModifyIndex = prev.ModifyIndex
			}
		}
		if k, ok := newKeys[r.ID]; ok {
			if err := tx.Insert(tableCAKeys, &structs.CASigningKey{RootID: r.ID, PrivateKey: k.PrivateKey,
				RaftIndex: structs.RaftIndex{CreateIndex: tx.idx, ModifyIndex: tx.idx}}); err != nil {
				return false, fmt.Errorf("failed inserting CA key: %w", err)
			}
		} else if raw, err := tx.First(tableCAKeys, indexID, r.ID); err != nil {
			return false, fmt.Errorf("failed CA key lookup: %w", err)
		} else if raw == nil {
			return false, fmt.Errorf("%w: %s", ErrCAMissingKey, r.ID)
		}
		if err := tx.Insert(tableCARoots, r); err != nil {
			return false, fmt.Errorf("failed inserting CA root: %w", err)
		}
	}
	for _, r := range old {
		if !listed[r.ID] {
			if err := tx.caDeleteRoot(r); err != nil {
				return false, err
			}
		}
	}
	if req.Config != nil {
		if err := tx.caSetConfig(req.Config); err != nil {
			return false, err
		}
	}
	return true, tx.bumpIndex(tableCARoots, tableCAKeys)
}

// CAPruneRoots removes the listed roots (and their keys); the active root
// is never removed.
func (s *Store) CAPruneRoots(idx uint64, ids []string) error {
	return s.write(idx, func(tx *writeTxn) error {
		changed := false
		for _, id := range ids {
			raw, err := tx.First(tableCARoots, indexID, id)
			if err != nil {
				return fmt.Errorf("failed CA root lookup: %w", err)
			}
			if raw == nil || raw.(*structs.CARoot).Active {
				continue
			}
			if err := tx.caDeleteRoot(raw.(*structs.CARoot)); err != nil {
				return err
			}
			changed = true
		}
		if !changed {
			return nil
		}
		return tx.bumpIndex(tableCARoots, tableCAKeys)
	})
}

func (tx *writeTxn) caDeleteRoot(r *structs.CARoot) error {
	if err := tx.Delete(tableCARoots, r); err != nil {
		return fmt.Errorf("failed deleting CA root: %w", err)
	}
	if _, err := tx.DeleteAll(tableCAKeys, indexID, r.ID); err != nil {
		return fmt.Errorf("failed deleting CA key: %w", err)
	}
	return nil
}

// CAReserveSerials advances the serial counter by count and returns the
// first serial of the block; serials start at 1.
func (s *Store) CAReserveSerials(idx, count uint64) (uint64, error) {
	if count == 0 {
		return 0, errors.New("cannot reserve zero serial numbers")
	}
	var first uint64
	err := s.write(idx, func(tx *writeTxn) error {
		first = caNextSerial(tx.Txn)
		if err := tx.Insert(tableCASerial, &caSerial{Next: first + count}); err != nil {
			return fmt.Errorf("failed updating CA serial: %w", err)
		}
		return tx.bumpIndex(tableCASerial)
	})
	return first, err
}

func caNextSerial(tx *memdb.Txn) uint64 {
	raw, err := tx.First(tableCASerial, indexID)
	if err != nil || raw == nil {
		return 1
	}
	return raw.(*caSerial).Next
}

func caRoots(tx *memdb.Txn, ws memdb.WatchSet) ([]*structs.CARoot, error) {
	it, err := tx.Get(tableCARoots, indexID)
	if err != nil {
		return nil, fmt.Errorf("failed CA root lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.CARoot
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.CARoot))
	}
	// Oldest first, as Consul lists them: by CreateIndex, then ID.
	sortCARoots(out)
	return out, nil
}

func sortCARoots(rs []*structs.CARoot) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && caRootLess(rs[j], rs[j-1]); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

func caRootLess(a, b *structs.CARoot) bool {
	if a.CreateIndex != b.CreateIndex {
		return a.CreateIndex < b.CreateIndex
	}
	return a.ID < b.ID
}

// caRootSame compares what a roots write can change.
func caRootSame(a, b *structs.CARoot) bool {
	if a.Active != b.Active || !a.RotatedOutAt.Equal(b.RotatedOutAt) || a.RootCert != b.RootCert ||
		a.Name != b.Name || len(a.IntermediateCerts) != len(b.IntermediateCerts) {
		return false
	}
	for i := range a.IntermediateCerts {
		if a.IntermediateCerts[i] != b.IntermediateCerts[i] {
			return false
		}
	}
	return true
}

func cloneCARoot(r *structs.CARoot) *structs.CARoot {
	if r == nil {
		return nil
	}
	c := *r
	c.IntermediateCerts = slices.Clone(r.IntermediateCerts)
	return &c
}

func cloneCAConfig(c *structs.CAConfiguration) *structs.CAConfiguration {
	if c == nil {
		return nil
	}
	out := *c
	out.Config = structs.CloneOpaqueMap(c.Config)
	out.State = maps.Clone(c.State)
	return &out
}

// CAConfig returns the CA configuration in the view, or nil.
func (sn *Snapshot) CAConfig() (*structs.CAConfiguration, error) {
	raw, err := sn.tx.First(tableCAConfig, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot CA config: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	return cloneCAConfig(raw.(*structs.CAConfiguration)), nil
}

// CARoots lists every root in the view, each with its signing key (nil
// when it has none): the snapshot must carry the keys so that a restored
// server can sign.
func (sn *Snapshot) CARoots() (structs.CARoots, []*structs.CASigningKey, error) {
	roots, err := caRoots(sn.tx, nil)
	if err != nil {
		return nil, nil, err
	}
	out := make(structs.CARoots, 0, len(roots))
	keys := make([]*structs.CASigningKey, 0, len(roots))
	for _, r := range roots {
		out = append(out, cloneCARoot(r))
		raw, err := sn.tx.First(tableCAKeys, indexID, r.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("snapshot CA key: %w", err)
		}
		var k *structs.CASigningKey
		if raw != nil {
			c := *raw.(*structs.CASigningKey)
			k = &c
		}
		keys = append(keys, k)
	}
	return out, keys, nil
}

// CANextSerial is the serial counter in the view.
func (sn *Snapshot) CANextSerial() uint64 { return caNextSerial(sn.tx) }

// CAConfig restores the CA configuration.
func (r *Restore) CAConfig(c *structs.CAConfiguration) error {
	if c == nil {
		return nil
	}
	if err := r.tx.Insert(tableCAConfig, cloneCAConfig(c)); err != nil {
		return fmt.Errorf("restore CA config: %w", err)
	}
	return r.raise(c.ModifyIndex, tableCAConfig)
}

// CARoot restores a root and, when given, its key.
func (r *Restore) CARoot(root *structs.CARoot, key *structs.CASigningKey) error {
	if root == nil {
		return nil
	}
	if err := r.tx.Insert(tableCARoots, cloneCARoot(root)); err != nil {
		return fmt.Errorf("restore CA root %q: %w", root.ID, err)
	}
	if key != nil {
		k := *key
		k.RootID = root.ID
		if err := r.tx.Insert(tableCAKeys, &k); err != nil {
			return fmt.Errorf("restore CA key %q: %w", root.ID, err)
		}
	}
	return r.raise(root.ModifyIndex, tableCARoots, tableCAKeys)
}

// CASerial restores the serial counter.
func (r *Restore) CASerial(next uint64) error {
	if next == 0 {
		return nil
	}
	if err := r.tx.Insert(tableCASerial, &caSerial{Next: next}); err != nil {
		return fmt.Errorf("restore CA serial: %w", err)
	}
	return nil
}
