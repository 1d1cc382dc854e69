package httpapi

import (
	"net/http"
	"strconv"

	"github.com/trellis-mesh/trellis/structs"
)

// snapshot serves /v1/snapshot: GET answers an archive of the whole
// replicated state (as Consul's, from the leader unless ?stale, with the
// read headers; X-Consul-Index is the last Raft index the snapshot
// covers), PUT restores the archive in the body and answers 200 with an
// empty body. Both stream: the archive goes from the server to the
// response, and from the request body to the server, in chunks of the
// internal RPC (structs.Stream), with no size limit and never whole in
// this agent's memory. A damaged archive is Consul's 500 with a message
// naming what is wrong.
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
	out := &snapshotResponse{w: w, header: func(size int) {
		setMeta(w, &reply.QueryMeta, &args.QueryOptions)
		w.Header().Set("Content-Type", "application/x-gzip")
		if size >= 0 {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		w.WriteHeader(http.StatusOK)
	}}
	ctx := structs.WithStream(r.Context(), &structs.Stream{Download: out})
	if err := structs.MethodSnapshotSave.Call(ctx, s.rpc, &args, &reply); err != nil {
		if out.started {
			// The status line is gone: cut the body short, so that the
			// client sees a truncated archive rather than a whole one.
			panic(http.ErrAbortHandler)
		}
		return nil, err
	}
	if !out.started {
		// Nothing streamed: the archive came whole in the reply (a
		// server answering without a stream).
		out.header(len(reply.Archive))
		out.started = true
		_, _ = w.Write(reply.Archive)
	}
	return nil, nil
}

// snapshotResponse writes the response headers on the first archive
// bytes, when the reply they come from is complete (structs.Stream).
type snapshotResponse struct {
	w       http.ResponseWriter
	header  func(size int)
	started bool
}

func (o *snapshotResponse) Write(p []byte) (int, error) {
	if !o.started {
		o.started = true
		o.header(-1)
	}
	return o.w.Write(p)
}

func (s *Server) snapshotRestore(r *http.Request) error {
	var args structs.SnapshotRestoreRequest
	s.parseWrite(r, &args.WriteRequest)
	ctx := structs.WithStream(r.Context(), &structs.Stream{Upload: r.Body})
	return structs.MethodSnapshotRestore.Call(ctx, s.rpc, &args, &struct{}{})
}
