package fsm

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Prepared queries: the PreparedQuery command and the snapshot record.

// recordPreparedQuery carries one prepared query (snapshot version 4 on).
// Never reused.
const recordPreparedQuery recordType = 14

// applyPreparedQuery returns the query's ID on create and update.
func applyPreparedQuery(f *FSM, idx uint64, body []byte) any {
	var req structs.PreparedQueryRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	if req.Query == nil {
		return fmt.Errorf("prepared query operation %q without a query", req.Op)
	}
	s := f.State()
	switch req.Op {
	case structs.PreparedQueryCreate, structs.PreparedQueryUpdate:
		if err := s.PreparedQuerySet(idx, req.Query); err != nil {
			return err
		}
		return req.Query.ID
	case structs.PreparedQueryDelete:
		return errOrNil(s.PreparedQueryDelete(idx, req.Query.ID))
	default:
		return fmt.Errorf("invalid prepared query operation %q", req.Op)
	}
}

// writePreparedQueries streams every query, after the sessions they may
// be bound to.
func writePreparedQueries(sn *state.Snapshot, put func(recordType, any) error) error {
	all, err := sn.PreparedQueries()
	if err != nil {
		return err
	}
	for _, q := range all {
		if err := put(recordPreparedQuery, q); err != nil {
			return err
		}
	}
	return nil
}

// restorePreparedQuery reads one query record.
func restorePreparedQuery(r *state.Restore, dec *codec.Decoder) error {
	var q structs.PreparedQuery
	if err := decodeSafe(dec, &q); err != nil {
		return err
	}
	return r.PreparedQuery(&q)
}
