package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Sentinel errors of ACL writes; their texts are Consul's.
var (
	// ErrACLMissingID refuses a token, policy or role without its ID.
	ErrACLMissingID = errors.New("missing ACL ID")
	// ErrACLSecretTaken refuses a token whose SecretID another token has.
	ErrACLSecretTaken = errors.New("token with secret ID already exists")
	// ErrACLNameTaken refuses a policy or role whose name another has.
	ErrACLNameTaken = errors.New("name already in use")
	// ErrACLUnknownLink refuses a token or role linking a policy or role
	// that does not exist.
	ErrACLUnknownLink = errors.New("link to a policy or role that does not exist")
)

// ACLIndex is the highest index of the three ACL tables: anything that
// resolves tokens is current while it has not moved.
func (s *Store) ACLIndex() uint64 {
	tx := s.db.Txn(false)
	defer tx.Abort()
	var out uint64
	for _, t := range []string{tableACLTokens, tableACLPolicies, tableACLRoles} {
		if v, _ := indexValue(tx, nil, t); v > out {
			out = v
		}
	}
	return out
}

// ACLBootstrapIndex returns the reset index: 0 while the cluster has never
// bootstrapped, else the index of the last bootstrap, which an operator
// writes to the acl-bootstrap-reset file to allow another.
func (s *Store) ACLBootstrapIndex() uint64 {
	tx := s.db.Txn(false)
	defer tx.Abort()
	v, _ := indexValue(tx, nil, aclBootstrapIndexKey)
	return v
}

// ACLBootstrap stores the first management token at idx, once: it fails
// with structs.ErrACLBootstrapInvalidResetIndex unless resetIndex is the
// current reset index (0 before any bootstrap).
func (s *Store) ACLBootstrap(idx, resetIndex uint64, token *structs.ACLToken) error {
	return s.write(idx, func(tx *writeTxn) error {
		cur, _ := indexValue(tx.Txn, nil, aclBootstrapIndexKey)
		if cur != resetIndex {
			return fmt.Errorf("%w (specified %d, reset index: %d)", structs.ErrACLBootstrapInvalidResetIndex, resetIndex, cur)
		}
		if err := tx.aclTokenSet(token); err != nil {
			return err
		}
		if err := tx.Insert(tableIndex, &IndexEntry{Key: aclBootstrapIndexKey, Value: idx}); err != nil {
			return fmt.Errorf("failed updating the bootstrap index: %w", err)
		}
		return tx.bumpIndex(tableACLTokens)
	})
}

// ACLTokenBatchSet creates or replaces tokens at idx. Links must name
// existing policies and roles (by ID); the SecretID must be no other
// token's; CreateIndex and CreateTime are kept across updates.
func (s *Store) ACLTokenBatchSet(idx uint64, tokens []*structs.ACLToken) error {
	return s.write(idx, func(tx *writeTxn) error {
		for _, t := range tokens {
			if err := tx.aclTokenSet(t); err != nil {
				return err
			}
		}
		return tx.bumpIndex(tableACLTokens)
	})
}

func (tx *writeTxn) aclTokenSet(in *structs.ACLToken) error {
	if in == nil || in.AccessorID == "" || in.SecretID == "" {
		return fmt.Errorf("%w: a token needs an AccessorID and a SecretID", ErrACLMissingID)
	}
	t := in.Clone()
	t.ExpirationTTL = 0
	raw, err := tx.First(tableACLTokens, indexSecret, t.SecretID)
	if err != nil {
		return fmt.Errorf("failed token lookup: %w", err)
	}
	if other, ok := raw.(*structs.ACLToken); ok && other.AccessorID != t.AccessorID {
		return ErrACLSecretTaken
	}
	for _, l := range t.Policies {
		if p, err := firstPolicy(tx.Txn, nil, indexID, l.ID); err != nil {
			return err
		} else if p == nil {
			return fmt.Errorf("%w: policy %q", ErrACLUnknownLink, l.ID)
		}
	}
	for _, l := range t.Roles {
		if r, err := firstRole(tx.Txn, nil, indexID, l.ID); err != nil {
			return err
		} else if r == nil {
			return fmt.Errorf("%w: role %q", ErrACLUnknownLink, l.ID)
		}
	}
	existing, err := firstToken(tx.Txn, nil, indexID, t.AccessorID)
	if err != nil {
		return err
	}
	t.CreateIndex = tx.idx
	if existing != nil {
		t.CreateIndex = existing.CreateIndex
		t.CreateTime = existing.CreateTime
	}
	t.ModifyIndex = tx.idx
	if err := tx.Insert(tableACLTokens, t); err != nil {
		return fmt.Errorf("failed inserting token: %w", err)
	}
	return nil
}

// ACLTokenBatchDelete deletes tokens by AccessorID; missing ones are not
// an error.
func (s *Store) ACLTokenBatchDelete(idx uint64, accessorIDs []string) error {
	return s.write(idx, func(tx *writeTxn) error {
		n := 0
		for _, id := range accessorIDs {
			d, err := tx.DeleteAll(tableACLTokens, indexID, id)
			if err != nil {
				return fmt.Errorf("failed deleting token: %w", err)
			}
			n += d
		}
		if n == 0 {
			return nil
		}
		return tx.bumpIndex(tableACLTokens)
	})
}

// ACLTokenGetByAccessor returns a token by AccessorID, or nil.
func (s *Store) ACLTokenGetByAccessor(ws memdb.WatchSet, id string) (uint64, *structs.ACLToken, error) {
	return s.aclTokenGet(ws, indexID, id)
}

// ACLTokenGetBySecret returns a token by SecretID, or nil.
func (s *Store) ACLTokenGetBySecret(ws memdb.WatchSet, secret string) (uint64, *structs.ACLToken, error) {
	return s.aclTokenGet(ws, indexSecret, secret)
}

func (s *Store) aclTokenGet(ws memdb.WatchSet, index, id string) (uint64, *structs.ACLToken, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	idx := maxIndex(tx, tableACLTokens, tableACLPolicies, tableACLRoles)
	if id == "" {
		return idx, nil, nil
	}
	t, err := firstToken(tx, ws, index, id)
	if err != nil || t == nil {
		return idx, nil, err
	}
	out, err := fixTokenLinks(tx, t)
	return idx, out, err
}

// ACLTokenList lists tokens by AccessorID, those linking policy or role
// (by ID), created by authMethod, or granting service through a service
// identity, when set.
func (s *Store) ACLTokenList(ws memdb.WatchSet, policy, role, authMethod, service string) (uint64, []*structs.ACLToken, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	idx := maxIndex(tx, tableACLTokens, tableACLPolicies, tableACLRoles)
	var it memdb.ResultIterator
	var err error
	switch {
	case policy != "":
		it, err = tx.Get(tableACLTokens, indexPolicies, policy)
	case role != "":
		it, err = tx.Get(tableACLTokens, indexRoles, role)
	default:
		it, err = tx.Get(tableACLTokens, indexID)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("failed token lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.ACLToken
	for raw := it.Next(); raw != nil; raw = it.Next() {
		t := raw.(*structs.ACLToken)
		if authMethod != "" && t.AuthMethod != authMethod {
			continue
		}
		if service != "" && !grantsService(t, service) {
			continue
		}
		c, err := fixTokenLinks(tx, t)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, c)
	}
	return idx, out, nil
}

func grantsService(t *structs.ACLToken, service string) bool {
	for _, id := range t.ServiceIdentities {
		if id.ServiceName == service {
			return true
		}
	}
	return false
}

// ACLTokensExpired returns up to limit tokens that expired at now, soonest
// first, for the leader to delete.
func (s *Store) ACLTokensExpired(now time.Time, limit int) ([]*structs.ACLToken, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	it, err := tx.Get(tableACLTokens, indexExpires)
	if err != nil {
		return nil, fmt.Errorf("failed token lookup: %w", err)
	}
	var out []*structs.ACLToken
	for raw := it.Next(); raw != nil && len(out) < limit; raw = it.Next() {
		t := raw.(*structs.ACLToken)
		if !t.IsExpired(now) {
			break
		}
		out = append(out, t.Clone())
	}
	return out, nil
}

func firstToken(tx *memdb.Txn, ws memdb.WatchSet, index, id string) (*structs.ACLToken, error) {
	ch, raw, err := tx.FirstWatch(tableACLTokens, index, id)
	if err != nil {
		return nil, fmt.Errorf("failed token lookup: %w", err)
	}
	ws.Add(ch)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.ACLToken), nil
}

// fixTokenLinks copies t with its links as they read now, as Consul shows
// them: each policy and role by its current name, and those deleted since
// left out.
func fixTokenLinks(tx *memdb.Txn, t *structs.ACLToken) (*structs.ACLToken, error) {
	c := t.Clone()
	var err error
	if c.Policies, err = fixLinks(tx, tableACLPolicies, c.Policies); err != nil {
		return nil, err
	}
	if c.Roles, err = fixLinks(tx, tableACLRoles, c.Roles); err != nil {
		return nil, err
	}
	return c, nil
}

func fixLinks(tx *memdb.Txn, table string, links []structs.ACLLink) ([]structs.ACLLink, error) {
	if links == nil {
		return nil, nil
	}
	out := make([]structs.ACLLink, 0, len(links))
	for _, l := range links {
		raw, err := tx.First(table, indexID, l.ID)
		if err != nil {
			return nil, fmt.Errorf("failed %s lookup: %w", table, err)
		}
		switch v := raw.(type) {
		case *structs.ACLPolicy:
			out = append(out, structs.ACLLink{ID: v.ID, Name: v.Name})
		case *structs.ACLRole:
			out = append(out, structs.ACLLink{ID: v.ID, Name: v.Name})
		}
	}
	return out, nil
}
