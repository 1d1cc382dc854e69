package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// sessionTTLMax is Consul's upper bound on a session TTL.
const sessionTTLMax = 24 * time.Hour

func (s *Server) sessionApply(ctx context.Context, args *structs.SessionRequest, reply *string) error {
	switch args.Op {
	case structs.SessionCreate:
		if err := s.validateSession(&args.Session); err != nil {
			return err
		}
		id, err := s.newSessionID(requestIDFrom(ctx))
		if err != nil {
			return err
		}
		args.Session.ID = id
	case structs.SessionDestroy:
		if args.Session.ID == "" {
			return fmt.Errorf("Must provide ID")
		}
	default:
		return fmt.Errorf("Invalid session operation %q", args.Op)
	}
	resp, err := s.raftApplyWrite(ctx, structs.SessionRequestType, args)
	if err != nil {
		return err
	}
	if id, ok := resp.(string); ok {
		// A retried create answered from the first attempt's record.
		args.Session.ID = id
	}
	switch args.Op {
	case structs.SessionCreate:
		ttl, _ := time.ParseDuration(args.Session.TTL)
		s.sessionTimers.reset(args.Session.ID, ttl, s.expireSession)
	case structs.SessionDestroy:
		s.sessionTimers.stop(args.Session.ID)
	}
	*reply = args.Session.ID
	return nil
}

func (s *Server) validateSession(sess *structs.Session) error {
	if sess.Node == "" {
		return fmt.Errorf("Must provide Node")
	}
	switch sess.Behavior {
	case "":
		sess.Behavior = structs.SessionKeysRelease
	case structs.SessionKeysRelease, structs.SessionKeysDelete:
	default:
		return fmt.Errorf("Invalid Behavior setting '%s'", sess.Behavior)
	}
	if sess.TTL != "" {
		ttl, err := time.ParseDuration(sess.TTL)
		if err != nil {
			return fmt.Errorf("Session TTL '%s' invalid: %w", sess.TTL, err)
		}
		if ttl != 0 && (ttl < s.cfg.SessionTTLMin || ttl > sessionTTLMax) {
			return fmt.Errorf("Invalid Session TTL '%d', must be between [%v=%v]", ttl, s.cfg.SessionTTLMin, sessionTTLMax)
		}
	}
	return nil
}

// newSessionID returns a random UUID not used by any live session. For a
// client write with a request ID it is derived from that ID instead, so
// that every retry of one create proposes the same session (the FSM
// applies it once); 128 random bits make a collision as unlikely as with
// a random UUID.
func (s *Server) newSessionID(requestID string) (string, error) {
	if requestID != "" {
		sum := sha256.Sum256([]byte("session:" + requestID))
		return formatUUID(sum[:16]), nil
	}
	for range 10 {
		id, err := newUUID()
		if err != nil {
			return "", err
		}
		if _, existing, err := s.fsm.State().SessionGet(nil, id); err == nil && existing == nil {
			return id, nil
		}
	}
	return "", fmt.Errorf("could not generate a unique session ID")
}

// newUUID returns a random (version 4) UUID string.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return formatUUID(b[:]), nil
}

// formatUUID formats 16 bytes as a version 4 UUID.
func formatUUID(b []byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// expireSession destroys a session whose TTL lapsed without a renewal.
func (s *Server) expireSession(id string) {
	if s.ctx.Err() != nil || !s.IsLeader() {
		return
	}
	req := &structs.SessionRequest{Op: structs.SessionDestroy, Session: structs.Session{ID: id}}
	if _, err := s.raftApply(structs.SessionRequestType, req); err != nil {
		s.logger.Error("failed to expire session", "session", id, "error", err)
		// Try again later rather than leaving a dead session holding locks.
		s.sessionTimers.reset(id, time.Second, s.expireSession)
		return
	}
	s.logger.Debug("session expired", "session", id)
}

func (s *Server) sessionRenew(_ context.Context, args *structs.SessionSpecificRequest, reply *structs.IndexedSessions) error {
	idx, sess, err := s.fsm.State().SessionGet(nil, args.SessionID)
	if err != nil {
		return err
	}
	reply.Index = idx
	s.setQueryMeta(&reply.QueryMeta)
	if sess == nil {
		return nil
	}
	reply.Sessions = structs.Sessions{sess}
	ttl, _ := time.ParseDuration(sess.TTL)
	s.sessionTimers.reset(sess.ID, ttl, s.expireSession)
	return nil
}

func (s *Server) sessionGet(ctx context.Context, args *structs.SessionSpecificRequest, reply *structs.IndexedSessions) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, sess, err := st.SessionGet(ws, args.SessionID)
		reply.Index, reply.Sessions = idx, nil
		if sess != nil {
			reply.Sessions = structs.Sessions{sess}
		}
		return err
	})
}

func (s *Server) sessionList(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.IndexedSessions) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, sessions, err := st.SessionList(ws)
		reply.Index, reply.Sessions = idx, sessions
		return err
	})
}

func (s *Server) sessionNodeSessions(ctx context.Context, args *structs.NodeSpecificRequest, reply *structs.IndexedSessions) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, sessions, err := st.NodeSessions(ws, args.Node)
		reply.Index, reply.Sessions = idx, sessions
		return err
	})
}
