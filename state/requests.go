package state

import (
	"fmt"
	"math"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/structs"
)

// tableRequests remembers the client writes applied within
// structs.DedupWindow, by request ID, with what each returned: the FSM's
// at-most-once guard. It is replicated state (built from the log, kept in
// snapshots) but not data any read serves, so writing it moves no index
// and wakes no blocking query.
const tableRequests = "requests"

const indexProposed = "proposed"

// AppliedRequest is one remembered client write.
type AppliedRequest struct {
	ID         string
	ProposedAt int64 // the proposing leader's clock, Unix nanoseconds
	Result     structs.AppliedResult
}

func requestsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableRequests,
		Indexes: map[string]*memdb.IndexSchema{
			indexID:       {Name: indexID, Unique: true, Indexer: &memdb.StringFieldIndex{Field: "ID"}},
			indexProposed: {Name: indexProposed, Indexer: &memdb.IntFieldIndex{Field: "ProposedAt"}},
		},
	}
}

// AppliedRequestResult returns the recorded result of the write with this
// request ID, if one proposed within structs.DedupWindow before proposedAt
// was applied.
func (s *Store) AppliedRequestResult(id string, proposedAt int64) (structs.AppliedResult, bool, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	raw, err := tx.First(tableRequests, indexID, id)
	if err != nil {
		return structs.AppliedResult{}, false, fmt.Errorf("applied request lookup: %w", err)
	}
	if raw == nil || raw.(*AppliedRequest).ProposedAt < proposedAt-int64(structs.DedupWindow) {
		return structs.AppliedResult{}, false, nil
	}
	return raw.(*AppliedRequest).Result, true, nil
}

// RecordAppliedRequest remembers that the write r.ID was applied, and
// forgets every write proposed more than structs.DedupWindow before it.
// The FSM calls it right after applying the write, on the same goroutine,
// so no snapshot can fall between the two.
func (s *Store) RecordAppliedRequest(r AppliedRequest) error {
	tx := s.db.Txn(true)
	defer tx.Abort()
	cutoff := r.ProposedAt - int64(structs.DedupWindow)
	it, err := tx.LowerBound(tableRequests, indexProposed, int64(math.MinInt64))
	if err != nil {
		return fmt.Errorf("applied requests prune: %w", err)
	}
	var expired []any
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if raw.(*AppliedRequest).ProposedAt >= cutoff {
			break
		}
		expired = append(expired, raw)
	}
	for _, raw := range expired {
		if err := tx.Delete(tableRequests, raw); err != nil {
			return fmt.Errorf("applied requests prune: %w", err)
		}
	}
	// Replaces a forgotten-but-not-yet-pruned record of the same ID.
	if err := tx.Insert(tableRequests, &r); err != nil {
		return fmt.Errorf("applied request record: %w", err)
	}
	tx.Commit()
	return nil
}

// AppliedRequests lists the remembered writes, oldest first.
func (sn *Snapshot) AppliedRequests() ([]AppliedRequest, error) {
	it, err := sn.tx.LowerBound(tableRequests, indexProposed, int64(math.MinInt64))
	if err != nil {
		return nil, fmt.Errorf("snapshot applied requests: %w", err)
	}
	var out []AppliedRequest
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, *raw.(*AppliedRequest))
	}
	return out, nil
}

// AppliedRequest restores one remembered write.
func (r *Restore) AppliedRequest(a AppliedRequest) error {
	if a.ID == "" {
		return fmt.Errorf("applied request record without an ID")
	}
	if err := r.tx.Insert(tableRequests, &a); err != nil {
		return fmt.Errorf("restore applied request: %w", err)
	}
	return nil
}
