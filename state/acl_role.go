package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// ACLRoleBatchSet creates or replaces roles at idx: a name must be no
// other role's, and every policy link must name an existing policy.
func (s *Store) ACLRoleBatchSet(idx uint64, roles []*structs.ACLRole) error {
	return s.write(idx, func(tx *writeTxn) error {
		for _, in := range roles {
			if in == nil || in.ID == "" {
				return fmt.Errorf("%w: a role needs an ID", ErrACLMissingID)
			}
			r := in.Clone()
			if other, err := firstRole(tx.Txn, nil, indexName, r.Name); err != nil {
				return err
			} else if other != nil && other.ID != r.ID {
				return errorf(ErrACLNameTaken, "Invalid Role: A Role with Name %q already exists", r.Name)
			}
			for _, l := range r.Policies {
				if p, err := firstPolicy(tx.Txn, nil, indexID, l.ID); err != nil {
					return err
				} else if p == nil {
					return fmt.Errorf("%w: policy %q", ErrACLUnknownLink, l.ID)
				}
			}
			existing, err := firstRole(tx.Txn, nil, indexID, r.ID)
			if err != nil {
				return err
			}
			r.CreateIndex = tx.idx
			if existing != nil {
				r.CreateIndex = existing.CreateIndex
			}
			r.ModifyIndex = tx.idx
			if err := tx.Insert(tableACLRoles, r); err != nil {
				return fmt.Errorf("failed inserting role: %w", err)
			}
		}
		return tx.bumpIndex(tableACLRoles)
	})
}

// ACLRoleBatchDelete deletes roles by ID; tokens keep their links, which
// reads leave out.
func (s *Store) ACLRoleBatchDelete(idx uint64, ids []string) error {
	return s.write(idx, func(tx *writeTxn) error {
		return tx.deleteByID(tableACLRoles, ids)
	})
}

// ACLRoleGetByID returns a role by ID, or nil.
func (s *Store) ACLRoleGetByID(ws memdb.WatchSet, id string) (uint64, *structs.ACLRole, error) {
	return s.aclRoleGet(ws, indexID, id)
}

// ACLRoleGetByName returns a role by name (case-insensitive), or nil.
func (s *Store) ACLRoleGetByName(ws memdb.WatchSet, name string) (uint64, *structs.ACLRole, error) {
	return s.aclRoleGet(ws, indexName, name)
}

func (s *Store) aclRoleGet(ws memdb.WatchSet, index, v string) (uint64, *structs.ACLRole, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	idx := maxIndex(tx, tableACLRoles, tableACLPolicies)
	r, err := firstRole(tx, ws, index, v)
	if err != nil || r == nil {
		return idx, nil, err
	}
	c := r.Clone()
	c.Policies, err = fixLinks(tx, tableACLPolicies, c.Policies)
	return idx, c, err
}

// ACLRoleList lists roles by ID, those linking policy when set.
func (s *Store) ACLRoleList(ws memdb.WatchSet, policy string) (uint64, []*structs.ACLRole, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	idx := maxIndex(tx, tableACLRoles, tableACLPolicies)
	var it memdb.ResultIterator
	var err error
	if policy != "" {
		it, err = tx.Get(tableACLRoles, indexPolicies, policy)
	} else {
		it, err = tx.Get(tableACLRoles, indexID)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("failed role lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.ACLRole
	for raw := it.Next(); raw != nil; raw = it.Next() {
		c := raw.(*structs.ACLRole).Clone()
		if c.Policies, err = fixLinks(tx, tableACLPolicies, c.Policies); err != nil {
			return 0, nil, err
		}
		out = append(out, c)
	}
	return idx, out, nil
}

func firstRole(tx *memdb.Txn, ws memdb.WatchSet, index, v string) (*structs.ACLRole, error) {
	if v == "" {
		return nil, nil
	}
	ch, raw, err := tx.FirstWatch(tableACLRoles, index, v)
	if err != nil {
		return nil, fmt.Errorf("failed role lookup: %w", err)
	}
	ws.Add(ch)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.ACLRole), nil
}

// ACLTokens lists every token as stored, for the snapshot.
func (sn *Snapshot) ACLTokens() ([]*structs.ACLToken, error) {
	it, err := sn.tx.Get(tableACLTokens, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot tokens: %w", err)
	}
	var out []*structs.ACLToken
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.ACLToken).Clone())
	}
	return out, nil
}

// ACLPolicies lists every policy, for the snapshot.
func (sn *Snapshot) ACLPolicies() ([]*structs.ACLPolicy, error) {
	return allPolicies(sn.tx, nil)
}

// ACLRoles lists every role as stored, for the snapshot.
func (sn *Snapshot) ACLRoles() ([]*structs.ACLRole, error) {
	it, err := sn.tx.Get(tableACLRoles, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot roles: %w", err)
	}
	var out []*structs.ACLRole
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.ACLRole).Clone())
	}
	return out, nil
}

// ACLToken restores a token.
func (r *Restore) ACLToken(t *structs.ACLToken) error {
	if t == nil || t.AccessorID == "" {
		return nil
	}
	if err := r.tx.Insert(tableACLTokens, t.Clone()); err != nil {
		return fmt.Errorf("restore token %q: %w", t.AccessorID, err)
	}
	return r.raise(t.ModifyIndex, tableACLTokens)
}

// ACLPolicy restores a policy.
func (r *Restore) ACLPolicy(p *structs.ACLPolicy) error {
	if p == nil || p.ID == "" {
		return nil
	}
	if err := r.tx.Insert(tableACLPolicies, p.Clone()); err != nil {
		return fmt.Errorf("restore policy %q: %w", p.ID, err)
	}
	return r.raise(p.ModifyIndex, tableACLPolicies)
}

// ACLRole restores a role.
func (r *Restore) ACLRole(role *structs.ACLRole) error {
	if role == nil || role.ID == "" {
		return nil
	}
	if err := r.tx.Insert(tableACLRoles, role.Clone()); err != nil {
		return fmt.Errorf("restore role %q: %w", role.ID, err)
	}
	return r.raise(role.ModifyIndex, tableACLRoles)
}
