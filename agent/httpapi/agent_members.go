package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"
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

// agentMembers handles GET /v1/agent/members: the Serf LAN members, or
// with ?wan the WAN pool's (a client agent has none), narrowed by
// ?filter over each member as shown (Name, Addr, Port, Tags, Status...).
func (s *Server) agentMembers(w http.ResponseWriter, r *http.Request) (any, error) {
	pool := s.members
	if _, wan := r.URL.Query()["wan"]; wan {
		if s.wan == nil {
			return []MemberInfo{}, nil
		}
		pool = s.wan
	}
	if pool == nil {
		return nil, errNotServed
	}
	filter, err := parseLocalFilter(r, (*MemberInfo)(nil))
	if err != nil {
		return nil, err
	}
	all := pool.Members()
	checks := make([]authz.Check, len(all))
	for i, m := range all {
		checks[i] = authz.Read(acl.ResourceNode, m.Name)
	}
	allowed, err := s.aclAllowed(r, checks)
	if err != nil {
		return nil, err
	}
	markFiltered(w, r, allowed)
	members := []MemberInfo{}
	for i, m := range all {
		if !allowed[i] {
			continue
		}
		if filter == nil || filter.Evaluate(&m) {
			members = append(members, m)
		}
	}
	return members, nil
}

// agentJoin handles PUT /v1/agent/join/<address>; ?wan joins a server's
// WAN pool, which a client agent refuses with Consul's 500.
func (s *Server) agentJoin(_ http.ResponseWriter, r *http.Request) (any, error) {
	pool := s.members
	if _, wan := r.URL.Query()["wan"]; wan {
		if s.wan == nil {
			return nil, serverError("Must be a server to join WAN cluster")
		}
		pool = s.wan
	}
	if pool == nil {
		return nil, errNotServed
	}
	addr := pathSuffix(r, "/v1/agent/join/")
	if addr == "" {
		return nil, badRequest("Missing address to join")
	}
	if _, err := pool.Join(addr); err != nil {
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
