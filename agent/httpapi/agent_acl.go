package httpapi

import (
	"context"
	"net/http"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/structs"
)

// ACLChecker answers what a request's token may do, by asking the servers
// (agent/authz): the agent's own endpoints, which reach no server, decide
// nothing on this agent's authority.
type ACLChecker interface {
	// Require is nil when token passes every check, else Consul's denial
	// (a 403) for the first it fails.
	Require(ctx context.Context, token string, checks ...authz.Check) error
	// Allowed answers each check, in order, for filtering lists.
	Allowed(ctx context.Context, token string, checks ...authz.Check) ([]bool, error)
}

// requireACL is nil when ACLs are off or the request's token passes every
// check.
func (s *Server) requireACL(r *http.Request, checks ...authz.Check) error {
	if s.acl == nil || len(checks) == 0 {
		return nil
	}
	return s.acl.Require(r.Context(), parseToken(r), checks...)
}

// aclAllowed answers each check for the request's token (all allowed with
// ACLs off).
func (s *Server) aclAllowed(r *http.Request, checks []authz.Check) ([]bool, error) {
	if s.acl == nil || len(checks) == 0 {
		ok := make([]bool, len(checks))
		for i := range ok {
			ok[i] = true
		}
		return ok, nil
	}
	return s.acl.Allowed(r.Context(), parseToken(r), checks...)
}

// gated is fn behind the checks the request needs, as Consul's "ACL
// Required" column for the agent's own endpoints says.
func (s *Server) gated(checks func(*http.Request) []authz.Check, fn endpoint) endpoint {
	return func(w http.ResponseWriter, r *http.Request) (any, error) {
		if err := s.requireACL(r, checks(r)...); err != nil {
			return nil, err
		}
		return fn(w, r)
	}
}

// Checks of the agent endpoints whose rule depends on nothing in the
// request's body.
func (s *Server) agentReadCheck(*http.Request) []authz.Check {
	return []authz.Check{authz.Read(acl.ResourceAgent, s.nodeName)}
}

func (s *Server) agentWriteCheck(*http.Request) []authz.Check {
	return []authz.Check{authz.Write(acl.ResourceAgent, s.nodeName)}
}

func (s *Server) nodeWriteCheck(*http.Request) []authz.Check {
	return []authz.Check{authz.Write(acl.ResourceNode, s.nodeName)}
}

func operatorReadCheck(*http.Request) []authz.Check {
	return []authz.Check{authz.Read(acl.ResourceOperator, "")}
}

func operatorWriteCheck(*http.Request) []authz.Check {
	return []authz.Check{authz.Write(acl.ResourceOperator, "")}
}

// serviceRegisterChecks are what registering def needs: service:write on
// its name, and on the destination of a proxy (Consul's vetServiceRegister).
func serviceRegisterChecks(def *structs.ServiceDefinition) []authz.Check {
	checks := []authz.Check{authz.Write(acl.ResourceService, def.Name)}
	if def.Kind == structs.ServiceKindConnectProxy && def.Proxy != nil && def.Proxy.DestinationServiceName != "" {
		checks = append(checks, authz.Write(acl.ResourceService, def.Proxy.DestinationServiceName))
	}
	return checks
}

// localServiceWriteChecks is service:write on the local service id's name;
// none for an unknown service, whose own error (404) answers.
func localServiceWriteChecks(la LocalAgent, id string) []authz.Check {
	if ns := la.Service(id); ns != nil {
		return []authz.Check{authz.Write(acl.ResourceService, ns.Service)}
	}
	return nil
}

// checkWriteChecks is what changing a check needs: service:write on its
// service, node:write on this node for a node check.
func (s *Server) checkWriteChecks(serviceName string) []authz.Check {
	if serviceName != "" {
		return []authz.Check{authz.Write(acl.ResourceService, serviceName)}
	}
	return []authz.Check{authz.Write(acl.ResourceNode, s.nodeName)}
}

// localCheckWriteChecks is checkWriteChecks for the local check id; none
// for an unknown check, whose own error answers.
func (s *Server) localCheckWriteChecks(la LocalAgent, id string) []authz.Check {
	for _, c := range la.Checks() {
		if c.CheckID == id {
			return s.checkWriteChecks(c.ServiceName)
		}
	}
	return nil
}

// checkReadCheck is what reading a check needs: service:read on its
// service, node:read on this node for a node check.
func (s *Server) checkReadCheck(c *structs.HealthCheck) authz.Check {
	if c.ServiceName != "" {
		return authz.Read(acl.ResourceService, c.ServiceName)
	}
	return authz.Read(acl.ResourceNode, s.nodeName)
}

// markFiltered sets X-Consul-Results-Filtered-By-ACLs when a check was
// refused, except for a request without a token: as the servers do for
// the anonymous token, so that it learns nothing of what exists.
func markFiltered(w http.ResponseWriter, r *http.Request, allowed []bool) {
	if parseToken(r) == "" {
		return
	}
	for _, ok := range allowed {
		if !ok {
			w.Header().Set("X-Consul-Results-Filtered-By-ACLs", "true")
			return
		}
	}
}
