package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/structs"
)

// applyTimeout bounds how long a write waits to be enqueued on the leader.
// Once enqueued, it waits for the commit: Raft answers every enqueued
// entry (committed, or leadership lost).
const applyTimeout = 30 * time.Second

// raftApply commits one command the server proposes on its own behalf
// (reconciling members, expiring sessions, reaping tombstones, CA
// housekeeping) and returns the FSM's response; an error the FSM returned
// comes back as the error. Client writes go through raftApplyWrite.
func (s *Server) raftApply(t structs.MessageType, msg any) (any, error) {
	buf, err := s.encodeCommand(t, msg)
	if err != nil {
		return nil, err
	}
	return s.applyEncoded(buf)
}

// raftApplyWrite commits one command on behalf of a client write. When
// the call carries a request ID (see withRequestID), the command travels
// inside a DedupRequest, so that the FSM applies it at most once however
// many times the write is retried; the n-th command a handler proposes
// for one request is keyed "<id>.<n>" (n > 1), so a retried handler that
// proposes the same commands in the same order is deduplicated command by
// command.
func (s *Server) raftApplyWrite(ctx context.Context, t structs.MessageType, msg any) (any, error) {
	rc, _ := ctx.Value(requestKey{}).(*requestCommands)
	if rc == nil {
		return s.raftApply(t, msg)
	}
	inner, err := s.encodeCommand(t, msg)
	if err != nil {
		return nil, err
	}
	id := rc.id
	if n := rc.proposed.Add(1); n > 1 {
		id += "." + strconv.FormatInt(n, 10)
	}
	buf, err := s.codec.EncodeCommand(structs.DedupRequestType, &structs.DedupRequest{
		ID: id, ProposedAt: time.Now().UnixNano(), Command: inner,
	})
	if err != nil {
		return nil, err
	}
	return s.applyEncoded(buf)
}

// encodeCommand encodes a Raft command without its caller's token. The
// codec leaves tagged tokens out by itself, but a type that encodes itself
// (structs.ConfigEntryRequest) carries its token for the internal RPC, so
// the token is cleared for the log, where no secret may stay.
func (s *Server) encodeCommand(t structs.MessageType, msg any) ([]byte, error) {
	if w, ok := msg.(interface{ WriteOpts() *structs.WriteRequest }); ok && w.WriteOpts().Token != "" {
		wr := w.WriteOpts()
		tok := wr.Token
		wr.Token = ""
		defer func() { wr.Token = tok }()
	}
	return s.codec.EncodeCommand(t, msg)
}

func (s *Server) applyEncoded(buf []byte) (any, error) {
	f := s.raft.Apply(buf, applyTimeout)
	if err := f.Error(); err != nil {
		return nil, applyError(err)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}

// applyError tells the client what a failed raft.Apply means for its
// write. "No cluster leader" only for a command Raft rejected before
// enqueuing it: nothing changed, and a retry is safe. Anything after the
// enqueue may have committed, and says so.
func applyError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %v", structs.ErrNoLeader, err) //nolint:errorlint // the sentinel alone decides whether a write may be retried: the cause must not match another
	case errors.Is(err, raft.ErrLeadershipLost):
		return structs.ErrLeadershipLost
	}
	// Shut down or aborted with the command possibly in the log.
	return fmt.Errorf("%w: %v", structs.ErrOutcomeUnknown, err) //nolint:errorlint // the sentinel alone decides whether a write may be retried: the cause must not match another
}

// requestKey is the context key of a client write's requestCommands.
type requestKey struct{}

// requestCommands numbers the commands one handler run proposes for one
// client write.
type requestCommands struct {
	id       string
	proposed atomic.Int64
}

// withRequestID marks ctx as serving the client write id, for one run of
// its handler: each run numbers its commands from the start, so a retry
// proposes the same keys as the first attempt.
func withRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, requestKey{}, &requestCommands{id: id})
}

// requestIDFrom returns the client write's request ID ("" for none).
func requestIDFrom(ctx context.Context) string {
	if rc, _ := ctx.Value(requestKey{}).(*requestCommands); rc != nil {
		return rc.id
	}
	return ""
}
