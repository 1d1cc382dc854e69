package state

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Prepared queries (Consul's agent/consul/state/prepared_query.go): one row
// per query, found by ID, by name (case-insensitive, unique across plain
// queries and templates, since an exact name answers before any prefix)
// and by session, whose invalidation deletes the queries bound to it.

const tablePreparedQueries = "prepared-queries"

// Sentinel errors of prepared query writes; their texts are Consul's.
var (
	// ErrMissingQueryID refuses a query without an ID.
	ErrMissingQueryID = errors.New("Missing query ID")
	// ErrQueryNameTaken refuses a query whose name another query has.
	ErrQueryNameTaken = errors.New("name aliases an existing query name")
	// ErrQueryNameIsID refuses a query named like another query's ID.
	ErrQueryNameIsID = errors.New("name aliases an existing query ID")
	// ErrQueryInvalidSession refuses a query bound to a session that does
	// not exist.
	ErrQueryInvalidSession = errors.New("invalid session")
)

func preparedQueriesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tablePreparedQueries,
		Indexes: map[string]*memdb.IndexSchema{
			indexID:      {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
			indexName:    {Name: indexName, Unique: true, AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "Name", Lowercase: true}},
			indexSession: {Name: indexSession, AllowMissing: true, Indexer: &memdb.StringFieldIndex{Field: "Session"}},
		},
	}
}

const indexName = "name"

// PreparedQuerySet creates or replaces a query at idx. The name must not
// be another query's name or ID, and the session, when set, must exist;
// CreateIndex is kept across updates.
func (s *Store) PreparedQuerySet(idx uint64, in *structs.PreparedQuery) error {
	return s.write(idx, func(tx *writeTxn) error {
		if in.ID == "" {
			return ErrMissingQueryID
		}
		q := in.Clone()
		existing, err := getPreparedQuery(tx.Txn, nil, q.ID)
		if err != nil {
			return err
		}
		q.CreateIndex = tx.idx
		if existing != nil {
			q.CreateIndex = existing.CreateIndex
		}
		q.ModifyIndex = tx.idx
		if q.Name != "" {
			raw, err := tx.First(tablePreparedQueries, indexName, q.Name)
			if err != nil {
				return fmt.Errorf("failed prepared query lookup: %w", err)
			}
			if other, ok := raw.(*structs.PreparedQuery); ok && other.ID != q.ID {
				return errorf(ErrQueryNameTaken, "name '%s' aliases an existing query name", q.Name)
			}
			if other, err := getPreparedQuery(tx.Txn, nil, q.Name); err != nil {
				return err
			} else if other != nil {
				return errorf(ErrQueryNameIsID, "name '%s' aliases an existing query ID", q.Name)
			}
		}
		if q.Name == "" && q.IsTemplate() {
			all, err := allPreparedQueries(tx.Txn, nil)
			if err != nil {
				return err
			}
			for _, other := range all {
				if other.ID != q.ID && other.Name == "" && other.IsTemplate() {
					return errorf(ErrQueryNameTaken, "a query template with an empty name already exists")
				}
			}
		}
		if q.Session != "" {
			sess, err := getSession(tx.Txn, nil, q.Session)
			if err != nil {
				return err
			}
			if sess == nil {
				return errorf(ErrQueryInvalidSession, "invalid session %q", q.Session)
			}
		}
		if err := tx.Insert(tablePreparedQueries, q); err != nil {
			return fmt.Errorf("failed inserting prepared query: %w", err)
		}
		return tx.bumpIndex(tablePreparedQueries)
	})
}

// PreparedQueryDelete deletes a query; a missing one is not an error.
func (s *Store) PreparedQueryDelete(idx uint64, id string) error {
	return s.write(idx, func(tx *writeTxn) error {
		n, err := tx.DeleteAll(tablePreparedQueries, indexID, id)
		if err != nil {
			return fmt.Errorf("failed deleting prepared query: %w", err)
		}
		if n == 0 {
			return nil
		}
		return tx.bumpIndex(tablePreparedQueries)
	})
}

// deleteSessionQueries deletes the queries bound to a destroyed session,
// as Consul does.
func (tx *writeTxn) deleteSessionQueries(session string) error {
	n, err := tx.DeleteAll(tablePreparedQueries, indexSession, session)
	if err != nil {
		return fmt.Errorf("failed deleting prepared queries: %w", err)
	}
	if n == 0 {
		return nil
	}
	return tx.bumpIndex(tablePreparedQueries)
}

// PreparedQueryGet returns one query by ID, or nil.
func (s *Store) PreparedQueryGet(ws memdb.WatchSet, id string) (uint64, *structs.PreparedQuery, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	q, err := getPreparedQuery(tx, ws, id)
	if err != nil {
		return 0, nil, err
	}
	return maxIndex(tx, tablePreparedQueries), q.Clone(), nil
}

// PreparedQueryList returns every query, ordered by ID.
func (s *Store) PreparedQueryList(ws memdb.WatchSet) (uint64, structs.PreparedQueries, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	all, err := allPreparedQueries(tx, ws)
	if err != nil {
		return 0, nil, err
	}
	out := make(structs.PreparedQueries, 0, len(all))
	for _, q := range all {
		out = append(out, q.Clone())
	}
	return maxIndex(tx, tablePreparedQueries), out, nil
}

// PreparedQueryResolve finds the query that answers idOrName, as Consul
// does: a query with that ID, else the query with that name, else the
// template whose name is the longest prefix of it (a template with an
// empty name answers anything). A template comes back rendered for the
// name with agentSegment as ${agent.segment}; nil when nothing answers.
func (s *Store) PreparedQueryResolve(ws memdb.WatchSet, idOrName, agentSegment string) (uint64, *structs.PreparedQuery, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	idx := maxIndex(tx, tablePreparedQueries)
	if idOrName == "" {
		return idx, nil, nil
	}
	q, err := getPreparedQuery(tx, ws, idOrName)
	if err != nil || q != nil {
		return idx, q.Clone(), err
	}
	all, err := allPreparedQueries(tx, ws)
	if err != nil {
		return idx, nil, err
	}
	lower := strings.ToLower(idOrName)
	var best *structs.PreparedQuery
	for _, c := range all {
		if strings.EqualFold(c.Name, idOrName) {
			best = c
			break
		}
		if c.IsTemplate() && strings.HasPrefix(lower, strings.ToLower(c.Name)) && (best == nil || len(c.Name) > len(best.Name)) {
			best = c
		}
	}
	if best == nil {
		return idx, nil, nil
	}
	rendered, err := best.Render(idOrName, agentSegment)
	if err != nil {
		return idx, nil, fmt.Errorf("failed rendering prepared query template: %w", err)
	}
	return idx, rendered, nil
}

func getPreparedQuery(tx *memdb.Txn, ws memdb.WatchSet, id string) (*structs.PreparedQuery, error) {
	ch, raw, err := tx.FirstWatch(tablePreparedQueries, indexID, id)
	if err != nil {
		return nil, fmt.Errorf("failed prepared query lookup: %w", err)
	}
	ws.Add(ch)
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.PreparedQuery), nil
}

func allPreparedQueries(tx *memdb.Txn, ws memdb.WatchSet) ([]*structs.PreparedQuery, error) {
	it, err := tx.Get(tablePreparedQueries, indexID)
	if err != nil {
		return nil, fmt.Errorf("failed prepared query lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	var out []*structs.PreparedQuery
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.PreparedQuery))
	}
	return out, nil
}

// PreparedQueries lists every query, for the snapshot.
func (sn *Snapshot) PreparedQueries() (structs.PreparedQueries, error) {
	all, err := allPreparedQueries(sn.tx, nil)
	if err != nil {
		return nil, fmt.Errorf("snapshot prepared queries: %w", err)
	}
	out := make(structs.PreparedQueries, 0, len(all))
	for _, q := range all {
		out = append(out, q.Clone())
	}
	return out, nil
}

// PreparedQuery restores a query.
func (r *Restore) PreparedQuery(q *structs.PreparedQuery) error {
	if q == nil || q.ID == "" {
		return nil
	}
	if err := r.tx.Insert(tablePreparedQueries, q.Clone()); err != nil {
		return fmt.Errorf("restore prepared query %q: %w", q.ID, err)
	}
	return r.raise(q.ModifyIndex, tablePreparedQueries)
}
