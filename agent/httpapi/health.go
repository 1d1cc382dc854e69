package httpapi

import (
	"net/http"

	"github.com/trellis-mesh/trellis/structs"
)

// healthServiceNodes handles GET /v1/health/service/<name>.
func (s *Server) healthServiceNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.checkServiceNodes(w, r, "/v1/health/service/", structs.ServiceSpecificRequest{})
}

// healthConnectNodes handles GET /v1/health/connect/<name>: the service's
// Connect endpoints with their health.
func (s *Server) healthConnectNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.checkServiceNodes(w, r, "/v1/health/connect/", structs.ServiceSpecificRequest{Connect: true})
}

// healthIngressNodes handles GET /v1/health/ingress/<name>: the instances
// of the ingress gateways that expose the service, with their health.
func (s *Server) healthIngressNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	return s.checkServiceNodes(w, r, "/v1/health/ingress/", structs.ServiceSpecificRequest{Ingress: true})
}

// checkServiceNodes serves the three health reads of a service; args says
// which (Connect, Ingress).
func (s *Server) checkServiceNodes(w http.ResponseWriter, r *http.Request, prefix string, args structs.ServiceSpecificRequest) (any, error) {
	args.NodeMetaFilters = parseMetaFilter(r)
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.ServiceTags, args.TagFilter = parseTags(r)
	args.Source = s.parseSource(r)
	args.ServiceName = pathSuffix(r, prefix)
	if args.ServiceName == "" {
		return nil, badRequest("Missing service name")
	}
	passing, ok := parseBoolFlag(r, structs.HealthPassing)
	if !ok {
		return nil, badRequest("Invalid value for ?passing")
	}
	args.PassingOnly = passing
	var out structs.IndexedCheckServiceNodes
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := cachedCall(s, w, r, structs.MethodHealthServiceNodes, &args, &out); err != nil {
		return nil, err
	}
	nodes := make(structs.CheckServiceNodes, 0, len(out.Nodes))
	for _, csn := range out.Nodes {
		// The server filters too; filtering again here keeps ?passing
		// correct whatever backend answers.
		if passing && !csn.Passing() {
			continue
		}
		c := structs.CheckServiceNode{Checks: cleanChecks(csn.Checks)}
		if csn.Node != nil {
			c.Node = cleanNode(csn.Node)
		}
		if csn.Service != nil {
			c.Service = cleanService(csn.Service)
		}
		nodes = append(nodes, c)
	}
	return nodes, nil
}

// healthServiceChecks handles GET /v1/health/checks/<service>.
func (s *Server) healthServiceChecks(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.ServiceSpecificRequest{NodeMetaFilters: parseMetaFilter(r)}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.ServiceName = pathSuffix(r, "/v1/health/checks/")
	if args.ServiceName == "" {
		return nil, badRequest("Missing service name")
	}
	var out structs.IndexedHealthChecks
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodHealthServiceChecks.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return cleanChecks(out.HealthChecks), nil
}

// healthNodeChecks handles GET /v1/health/node/<node>.
func (s *Server) healthNodeChecks(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.NodeSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.Node = pathSuffix(r, "/v1/health/node/")
	if args.Node == "" {
		return nil, badRequest("Missing node name")
	}
	var out structs.IndexedHealthChecks
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodHealthNodeChecks.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return cleanChecks(out.HealthChecks), nil
}

// healthChecksInState handles GET /v1/health/state/<state>. An unknown state
// is not an error: it matches nothing and answers [] (as in Consul).
func (s *Server) healthChecksInState(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.ChecksInStateRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.State = pathSuffix(r, "/v1/health/state/")
	if args.State == "" {
		return nil, badRequest("Missing check state")
	}
	var out structs.IndexedHealthChecks
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodHealthChecksInState.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return cleanChecks(out.HealthChecks), nil
}

// cleanChecks copies a check list with Consul's empty (not null) lists.
func cleanChecks(checks structs.HealthChecks) structs.HealthChecks {
	out := make(structs.HealthChecks, 0, len(checks))
	for _, chk := range checks {
		if chk == nil {
			continue
		}
		c := *chk
		c.ServiceTags = orEmpty(c.ServiceTags)
		out = append(out, &c)
	}
	return out
}
