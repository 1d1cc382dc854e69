package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
)

// Membership is the agent's Serf LAN view, for /v1/agent/members and
// /v1/agent/join.
type Membership interface {
	Members() []MemberInfo
	// Join contacts the address ("host[:port]") and reports how many
	// members answered.
	Join(addr string) (int, error)
}

// Leaver makes the agent, or a failed member, leave the cluster.
type Leaver interface {
	// Leave leaves gracefully; the agent keeps running until it is stopped.
	Leave(ctx context.Context) error
	// ForceLeave marks a failed member as left (prune also forgets it at
	// once).
	ForceLeave(node string, prune bool) error
}

// errNotServed is answered when the agent was built without the component
// an endpoint needs.
var errNotServed = &httpError{code: http.StatusNotImplemented, msg: "not served by this agent"}

// agentMembers handles GET /v1/agent/members. ?wan asks for the WAN pool,
// which Trellis does not run: answered with no members, as a Consul agent
// without WAN federation would.
func (s *Server) agentMembers(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.members == nil {
		return nil, errNotServed
	}
	if _, wan := r.URL.Query()["wan"]; wan {
		return []MemberInfo{}, nil
	}
	members := s.members.Members()
	if members == nil {
		members = []MemberInfo{}
	}
	return members, nil
}

// agentJoin handles PUT /v1/agent/join/<address>.
func (s *Server) agentJoin(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.members == nil {
		return nil, errNotServed
	}
	addr := pathSuffix(r, "/v1/agent/join/")
	if addr == "" {
		return nil, badRequest("Missing address to join")
	}
	if _, wan := r.URL.Query()["wan"]; wan {
		return nil, serverError("WAN join is not supported: this agent has no WAN pool")
	}
	if _, err := s.members.Join(addr); err != nil {
		return nil, err
	}
	return nil, nil
}

// agentLeave handles PUT /v1/agent/leave.
func (s *Server) agentLeave(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.leaver == nil {
		return nil, errNotServed
	}
	return nil, s.leaver.Leave(r.Context())
}

// agentForceLeave handles PUT /v1/agent/force-leave/<node>[?prune].
func (s *Server) agentForceLeave(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.leaver == nil {
		return nil, errNotServed
	}
	node := strings.TrimSpace(pathSuffix(r, "/v1/agent/force-leave/"))
	if node == "" {
		return nil, badRequest("Missing node name")
	}
	_, prune := r.URL.Query()["prune"]
	if err := s.leaver.ForceLeave(node, prune); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, err
		}
		return nil, serverError(err.Error())
	}
	return nil, nil
}
