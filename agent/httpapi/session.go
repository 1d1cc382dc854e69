package httpapi

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// sessionTTLMax is Consul's largest session TTL.
const sessionTTLMax = 24 * time.Hour

// sessionCreateResponse is the /v1/session/create answer.
type sessionCreateResponse struct {
	ID string
}

// sessionCreate handles PUT /v1/session/create. The body is optional; what
// it leaves out takes Consul's defaults (this agent's node, the serfHealth
// check, release, a 15s lock delay, no TTL). The session ID is generated
// here so that the Raft command carries it; the server checks that it is
// unused.
func (s *Server) sessionCreate(w http.ResponseWriter, r *http.Request) (any, error) {
	req := structs.SessionRequest{Op: structs.SessionCreate}
	s.parseWrite(r, &req.WriteRequest)
	body, err := readBody(r, maxJSONBody)
	if errors.Is(err, errBodyTooLarge) {
		return nil, tooLarge(fmt.Sprintf("Request body too large, max size: %d bytes", maxJSONBody))
	}
	if err == nil {
		req.Session, err = decodeSessionCreate(body, s.nodeName)
	}
	if err != nil {
		return nil, badRequest(fmt.Sprintf("Request decode failed: %v", err))
	}
	if err := s.validateSession(&req.Session); err != nil {
		return nil, err
	}
	id, err := newUUID()
	if err != nil {
		return nil, err
	}
	req.Session.ID = id
	var out string
	if err := structs.MethodSessionApply.Call(r.Context(), s.rpc, &req, &out); err != nil {
		return nil, err
	}
	if out == "" {
		out = id
	}
	return sessionCreateResponse{ID: out}, nil
}

// validateSession makes the checks Consul's servers make on a new session,
// with their messages and status (500). Clients match on these texts:
// Patroni, for one, lowers its TTL when it sees "Invalid Session TTL".
func (s *Server) validateSession(sess *structs.Session) error {
	if sess.Node == "" {
		return serverError("Must provide Node")
	}
	switch sess.Behavior {
	case "":
		sess.Behavior = structs.SessionKeysRelease
	case structs.SessionKeysRelease, structs.SessionKeysDelete:
	default:
		return serverError(fmt.Sprintf("Invalid Behavior setting '%s'", sess.Behavior))
	}
	if sess.TTL == "" {
		return nil
	}
	ttl, err := time.ParseDuration(sess.TTL)
	if err != nil {
		return serverError(fmt.Sprintf("Session TTL '%s' invalid: %v", sess.TTL, err))
	}
	if ttl != 0 && (ttl < s.sessionMin || ttl > sessionTTLMax) {
		// '%d' of a Duration prints nanoseconds: Consul's exact text.
		return serverError(fmt.Sprintf("Invalid Session TTL '%d', must be between [%v=%v]",
			ttl, s.sessionMin, sessionTTLMax))
	}
	return nil
}

// newUUID returns a random (version 4) UUID.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating session ID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// sessionDestroy handles PUT /v1/session/destroy/<id>. It answers true.
func (s *Server) sessionDestroy(w http.ResponseWriter, r *http.Request) (any, error) {
	req := structs.SessionRequest{Op: structs.SessionDestroy}
	s.parseWrite(r, &req.WriteRequest)
	req.Session.ID = pathSuffix(r, "/v1/session/destroy/")
	if req.Session.ID == "" {
		return nil, badRequest("Missing session")
	}
	var out string
	if err := structs.MethodSessionApply.Call(r.Context(), s.rpc, &req, &out); err != nil {
		return nil, err
	}
	return true, nil
}

// sessionRenew handles PUT /v1/session/renew/<id>: it resets the TTL timer
// and answers [session], or 404 when the session does not exist.
func (s *Server) sessionRenew(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.SessionSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.SessionID = pathSuffix(r, "/v1/session/renew/")
	if args.SessionID == "" {
		return nil, badRequest("Missing session")
	}
	var out structs.IndexedSessions
	if err := structs.MethodSessionRenew.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	sessions := cleanSessions(out.Sessions)
	if len(sessions) == 0 {
		return nil, &httpError{code: http.StatusNotFound, msg: fmt.Sprintf("Session id '%s' not found", args.SessionID)}
	}
	return sessions, nil
}

// sessionInfo handles GET /v1/session/info/<id>: [] or [session].
func (s *Server) sessionInfo(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.SessionSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.SessionID = pathSuffix(r, "/v1/session/info/")
	if args.SessionID == "" {
		return nil, badRequest("Missing session")
	}
	var out structs.IndexedSessions
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodSessionGet.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return cleanSessions(out.Sessions), nil
}

// sessionsForNode handles GET /v1/session/node/<node>.
func (s *Server) sessionsForNode(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.NodeSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.Node = pathSuffix(r, "/v1/session/node/")
	if args.Node == "" {
		return nil, badRequest("Missing node name")
	}
	var out structs.IndexedSessions
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodSessionNodeSessions.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return cleanSessions(out.Sessions), nil
}

// sessionList handles GET /v1/session/list.
func (s *Server) sessionList(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.IndexedSessions
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodSessionList.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return cleanSessions(out.Sessions), nil
}

// cleanSessions copies a session list with Consul's empty (not null)
// lists.
func cleanSessions(sessions structs.Sessions) structs.Sessions {
	out := make(structs.Sessions, 0, len(sessions))
	for _, sess := range sessions {
		if sess == nil {
			continue
		}
		c := *sess
		if c.NodeChecks == nil {
			c.NodeChecks = []string{}
		}
		out = append(out, &c)
	}
	return out
}
