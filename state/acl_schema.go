package state

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// ACL tables: tokens (by AccessorID, SecretID, linked policy and role,
// expiration time), policies and roles (by ID and case-insensitive name).
// The bootstrap reset index is an entry of the index table, as in Consul,
// so that snapshots carry it with the other indexes.

const (
	tableACLTokens   = "acl-tokens"
	tableACLPolicies = "acl-policies"
	tableACLRoles    = "acl-roles"

	indexSecret   = "secret"
	indexPolicies = "policies"
	indexRoles    = "roles"
	indexExpires  = "expires"

	// aclBootstrapIndexKey holds the index of the last bootstrap: 0 (no
	// entry) means the cluster can still bootstrap.
	aclBootstrapIndexKey = "acl-token-bootstrap"
)

func aclTokensTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableACLTokens,
		Indexes: map[string]*memdb.IndexSchema{
			indexID:     {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "AccessorID"}},
			indexSecret: {Name: indexSecret, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "SecretID"}},
			indexPolicies: {Name: indexPolicies, AllowMissing: true, Indexer: linkIndexer(func(t *structs.ACLToken) []structs.ACLLink {
				return t.Policies
			})},
			indexRoles: {Name: indexRoles, AllowMissing: true, Indexer: linkIndexer(func(t *structs.ACLToken) []structs.ACLLink {
				return t.Roles
			})},
			indexExpires: {Name: indexExpires, AllowMissing: true, Indexer: expiresIndexer{}},
		},
	}
}

func aclPoliciesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableACLPolicies,
		Indexes: map[string]*memdb.IndexSchema{
			indexID:   {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
			indexName: {Name: indexName, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name", Lowercase: true}},
		},
	}
}

func aclRolesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableACLRoles,
		Indexes: map[string]*memdb.IndexSchema{
			indexID:   {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
			indexName: {Name: indexName, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Name", Lowercase: true}},
			indexPolicies: {Name: indexPolicies, AllowMissing: true, Indexer: linkIndexer(func(r *structs.ACLRole) []structs.ACLLink {
				return r.Policies
			})},
		},
	}
}

// linkIndexerT indexes tokens or roles by the IDs of the policies or roles
// they link, so that a listing by policy and the name fix-up on read do
// not scan the table.
type linkIndexerT[T any] struct {
	links func(T) []structs.ACLLink
}

func linkIndexer[T any](links func(T) []structs.ACLLink) *linkIndexerT[T] {
	return &linkIndexerT[T]{links: links}
}

// FromObject implements memdb.MultiIndexer.
func (l *linkIndexerT[T]) FromObject(raw any) (bool, [][]byte, error) {
	obj, ok := raw.(T)
	if !ok {
		return false, nil, fmt.Errorf("unexpected object type %T", raw)
	}
	var out [][]byte
	for _, link := range l.links(obj) {
		if link.ID != "" {
			out = append(out, []byte(strings.ToLower(link.ID)+"\x00"))
		}
	}
	return len(out) > 0, out, nil
}

// FromArgs implements memdb.Indexer.
func (l *linkIndexerT[T]) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("want one ID argument, got %d", len(args))
	}
	id, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("argument must be a string: %#v", args[0])
	}
	return []byte(strings.ToLower(id) + "\x00"), nil
}

// expiresIndexer orders tokens that expire by their expiration time, so
// the leader's reaper reads only those due.
type expiresIndexer struct{}

// FromObject implements memdb.SingleIndexer.
func (expiresIndexer) FromObject(raw any) (bool, []byte, error) {
	t, ok := raw.(*structs.ACLToken)
	if !ok {
		return false, nil, fmt.Errorf("unexpected object type %T", raw)
	}
	if !t.HasExpirationTime() {
		return false, nil, nil
	}
	return true, encodeTime(*t.ExpirationTime), nil
}

// FromArgs implements memdb.Indexer.
func (expiresIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("want one time argument, got %d", len(args))
	}
	at, ok := args[0].(time.Time)
	if !ok {
		return nil, fmt.Errorf("argument must be a time.Time: %#v", args[0])
	}
	return encodeTime(at), nil
}

// encodeTime sorts as the times do (the reaper's times are after 1970).
func encodeTime(t time.Time) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(max(t.UnixNano(), 0)))
	return b
}
