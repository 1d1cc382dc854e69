package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/trellis-mesh/trellis/structs"
)

// snapshot serves /v1/snapshot: GET answers an archive of the whole
// replicated state (as Consul's, from the leader unless ?stale, with the
// read headers; X-Consul-Index is the last Raft index the snapshot
// covers), PUT restores the archive in the body and answers 200 with an
// empty body. A damaged archive is Consul's 500 with a message naming
// what is wrong; a body over structs.SnapshotMaxSize is a 413.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method == http.MethodPut {
		return nil, s.snapshotRestore(r)
	}
	var args structs.SnapshotSaveRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	// The snapshot endpoint does not block (Consul's neither).
	args.MinQueryIndex, args.MaxQueryTime = 0, 0
	var reply structs.SnapshotSaveResponse
	if err := structs.MethodSnapshotSave.Call(r.Context(), s.rpc, &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta, &args.QueryOptions)
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Header().Set("Content-Length", strconv.Itoa(len(reply.Archive)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(reply.Archive)
	return nil, nil
}

func (s *Server) snapshotRestore(r *http.Request) error {
	var args structs.SnapshotRestoreRequest
	s.parseWrite(r, &args.WriteRequest)
	body, err := readBody(r, structs.SnapshotMaxSize)
	if errors.Is(err, errBodyTooLarge) {
		return tooLarge(fmt.Sprintf("Request body too large, max size: %d bytes", structs.SnapshotMaxSize))
	}
	if err != nil {
		return err
	}
	args.Archive = body
	return structs.MethodSnapshotRestore.Call(r.Context(), s.rpc, &args, &struct{}{})
}
