package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// ACLPolicyBatchSet creates or replaces policies at idx; a name must be
// no other policy's (case-insensitively).
func (s *Store) ACLPolicyBatchSet(idx uint64, policies []*structs.ACLPolicy) error {
	return s.write(idx, func(tx *writeTxn) error {
		for _, in := range policies {
			if in == nil || in.ID == "" {
				return fmt.Errorf("%w: a policy needs an ID", ErrACLMissingID)
			}
			p := in.Clone()
			if other, err := firstPolicy(tx.Txn, nil, indexName, p.Name); err != nil {
				return err
			} else if other != nil && other.ID != p.ID {
				return errorf(ErrACLNameTaken, "Invalid Policy: A Policy with Name %q already exists", p.Name)
			}
			existing, err := firstPolicy(tx.Txn, nil, indexID, p.ID)
			if err != nil {
				return err
			}
			p.CreateIndex = tx.idx
			if existing != nil {
				p.CreateIndex = existing.CreateIndex
			}
			p.ModifyIndex = tx.idx
			if err := tx.Insert(tableACLPolicies, p); err != nil {
				return fmt.Errorf("failed inserting policy: %w", err)
			}
		}
		return tx.bumpIndex(tableACLPolicies)
	})
}

// ACLPolicyBatchDelete deletes policies by ID. Tokens and roles keep their
// links, which reads leave out from then on, as Consul does.
func (s *Store) ACLPolicyBatchDelete(idx uint64, ids []string) error {
	return s.write(idx, func(tx *writeTxn) error {
		return tx.deleteByID(tableACLPolicies, ids)
	})
}

func (tx *writeTxn) deleteByID(table string, ids []string) error {
	n := 0
	for _, id := range ids {
		d, err := tx.DeleteAll(table, indexID, id)
		if err != nil {
			return fmt.Errorf("failed deleting from %s: %w", table, err)
		}
		n += d
	}
	if n == 0 {
		return nil
	}
	return tx.bumpIndex(table)
}

// ACLPolicyGetByID returns a policy by ID, or nil.
func (s *Store) ACLPolicyGetByID(ws memdb.WatchSet, id string) (uint64, *structs.ACLPolicy, error) {
	return s.aclPolicyGet(ws, indexID, id)
}

// ACLPolicyGetByName returns a policy by name (case-insensitive), or nil.
func (s *Store) ACLPolicyGetByName(ws memdb.WatchSet, name string) (uint64, *structs.ACLPolicy, error) {
	return s.aclPolicyGet(ws, indexName, name)
}

func (s *Store) aclPolicyGet(ws memdb.WatchSet, index, v string) (uint64, *structs.ACLPolicy, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	p, err := firstPolicy(tx, ws, index, v)
	return maxIndex(tx, tableACLPolicies), p.Clone(), err
}

// ACLPolicyList lists every policy by ID.
func (s *Store) ACLPolicyList(ws memdb.WatchSet) (uint64, []*structs.ACLPolicy, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	all, err := allPolicies(tx, ws)
	return maxIndex(tx, tableACLPolicies), all, err
}

func allPolicies(tx *memdb.Txn, ws memdb.WatchSet) ([]*structs.ACLPolicy, error) {
	it, err := tx.Get(tableACLPolicies, indexID)
	if err != nil {
		return nil, fmt.Errorf("failed policy lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.ACLPolicy
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.ACLPolicy).Clone())
	}
	return out, nil
}

func firstPolicy(tx *memdb.Txn, ws memdb.WatchSet, index, v string) (*structs.ACLPolicy, error) {
	if v == "" {
		return nil, nil
	}
	ch, raw, err := tx.FirstWatch(tableACLPolicies, index, v)
	if err != nil {
		return nil, fmt.Errorf("failed policy lookup: %w", err)
	}
	ws.Add(ch)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.ACLPolicy), nil
}
