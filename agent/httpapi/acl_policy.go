package httpapi

import (
	"net/http"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Consul's /v1/acl/policy, /v1/acl/role and /v1/acl/templated-policy
// endpoints.

func (s *Server) aclPolicyCreate(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.aclPolicyWrite(r, "")
}

func (s *Server) aclPolicyWrite(r *http.Request, id string) (any, error) {
	var args structs.ACLPolicySetRequest
	if err := decodeRequest(r, &args.Policy); err != nil {
		return nil, err
	}
	if id != "" {
		if args.Policy.ID != "" && args.Policy.ID != id {
			return nil, badRequest("Policy ID in URL and payload do not match")
		}
		args.Policy.ID = id
	}
	s.parseWrite(r, &args.WriteRequest)
	var out structs.ACLPolicy
	if err := structs.MethodACLPolicySet.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// aclPolicySpecific serves /v1/acl/policy/<id> and /v1/acl/policy/name/<n>.
func (s *Server) aclPolicySpecific(w http.ResponseWriter, r *http.Request) (any, error) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/acl/policy/")
	args := structs.ACLPolicyGetRequest{PolicyID: rest}
	if strings.HasPrefix(rest, "name/") {
		if r.Method != http.MethodGet {
			return nil, &methodNotAllowedError{method: r.Method, allow: []string{http.MethodOptions, http.MethodGet}}
		}
		name, err := pathName(r, "/v1/acl/policy/name/")
		if err != nil {
			return nil, err
		}
		args = structs.ACLPolicyGetRequest{PolicyName: name}
	}
	if rest == "" {
		return nil, badRequest("Missing policy ID")
	}
	switch r.Method {
	case http.MethodPut:
		return s.aclPolicyWrite(r, rest)
	case http.MethodDelete:
		del := structs.ACLPolicyDeleteRequest{PolicyID: rest}
		s.parseWrite(r, &del.WriteRequest)
		if err := structs.MethodACLPolicyDelete.Call(r.Context(), s.rpc, &del, &struct{}{}); err != nil {
			return nil, err
		}
		return true, nil
	}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.ACLPolicyResponse
	if err := structs.MethodACLPolicyRead.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if out.Policy == nil {
		return nil, &StatusError{Code: http.StatusNotFound, Msg: "ACL policy not found"}
	}
	return out.Policy, nil
}

func (s *Server) aclPolicyList(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.ACLPolicyListResponse
	if err := structs.MethodACLPolicyList.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	// Consul's list entries leave the rules out.
	list := make([]*structs.ACLPolicy, 0, len(out.Policies))
	for _, p := range out.Policies {
		c := *p
		c.Rules = ""
		list = append(list, &c)
	}
	return list, nil
}

func (s *Server) aclRoleCreate(_ http.ResponseWriter, r *http.Request) (any, error) {
	return s.aclRoleWrite(r, "")
}

func (s *Server) aclRoleWrite(r *http.Request, id string) (any, error) {
	var args structs.ACLRoleSetRequest
	if err := decodeRequest(r, &args.Role); err != nil {
		return nil, err
	}
	if id != "" {
		if args.Role.ID != "" && args.Role.ID != id {
			return nil, badRequest("Role ID in URL and payload do not match")
		}
		args.Role.ID = id
	}
	s.parseWrite(r, &args.WriteRequest)
	var out structs.ACLRole
	if err := structs.MethodACLRoleSet.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// aclRoleSpecific serves /v1/acl/role/<id> and /v1/acl/role/name/<n>; a
// missing role is Consul's 404 with an empty body.
func (s *Server) aclRoleSpecific(w http.ResponseWriter, r *http.Request) (any, error) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/acl/role/")
	args := structs.ACLRoleGetRequest{RoleID: rest}
	if strings.HasPrefix(rest, "name/") {
		if r.Method != http.MethodGet {
			return nil, &methodNotAllowedError{method: r.Method, allow: []string{http.MethodOptions, http.MethodGet}}
		}
		name, err := pathName(r, "/v1/acl/role/name/")
		if err != nil {
			return nil, err
		}
		args = structs.ACLRoleGetRequest{RoleName: name}
	}
	if rest == "" {
		return nil, badRequest("Missing role ID")
	}
	switch r.Method {
	case http.MethodPut:
		return s.aclRoleWrite(r, rest)
	case http.MethodDelete:
		del := structs.ACLRoleDeleteRequest{RoleID: rest}
		s.parseWrite(r, &del.WriteRequest)
		if err := structs.MethodACLRoleDelete.Call(r.Context(), s.rpc, &del, &struct{}{}); err != nil {
			return nil, err
		}
		return true, nil
	}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.ACLRoleResponse
	if err := structs.MethodACLRoleRead.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if out.Role == nil {
		w.WriteHeader(http.StatusNotFound)
		return nil, nil
	}
	return out.Role, nil
}

func (s *Server) aclRoleList(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.ACLRoleListRequest{Policy: r.URL.Query().Get("policy")}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.ACLRoleListResponse
	if err := structs.MethodACLRoleList.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if out.Roles == nil {
		out.Roles = []*structs.ACLRole{}
	}
	return out.Roles, nil
}

// templatedPolicyJSON is one templated policy as Consul lists it.
type templatedPolicyJSON struct {
	TemplateName string
	Schema       string
	Template     string
	Description  string
}

func templatedPolicyOut(d structs.ACLTemplatedPolicyDefinition) templatedPolicyJSON {
	return templatedPolicyJSON{TemplateName: d.TemplateName, Schema: d.Schema, Template: d.Template, Description: d.Description}
}

func (s *Server) aclTemplatedPolicyList(_ http.ResponseWriter, _ *http.Request) (any, error) {
	out := make(map[string]templatedPolicyJSON)
	for _, d := range structs.ACLTemplatedPolicies() {
		out[d.TemplateName] = templatedPolicyOut(d)
	}
	return out, nil
}

func (s *Server) aclTemplatedPolicyRead(_ http.ResponseWriter, r *http.Request) (any, error) {
	name, err := pathName(r, "/v1/acl/templated-policy/name/")
	if err != nil {
		return nil, err
	}
	d, ok := structs.LookupACLTemplatedPolicy(name)
	if !ok {
		return nil, &StatusError{Code: http.StatusNotFound, Msg: "Invalid templated policy Name: " + name}
	}
	return templatedPolicyOut(d), nil
}

// aclTemplatedPolicyPreview renders a template with the body's variables
// into the policy it stands for.
func (s *Server) aclTemplatedPolicyPreview(_ http.ResponseWriter, r *http.Request) (any, error) {
	name, err := pathName(r, "/v1/acl/templated-policy/preview/")
	if err != nil {
		return nil, err
	}
	if _, ok := structs.LookupACLTemplatedPolicy(name); !ok {
		return nil, &StatusError{Code: http.StatusNotFound, Msg: "Invalid templated policy Name: " + name}
	}
	var vars structs.ACLTemplatedPolicyVariables
	if err := decodeOptional(r, &vars); err != nil {
		return nil, err
	}
	tp := structs.ACLTemplatedPolicy{TemplateName: name, TemplateVariables: &vars}
	rules, err := tp.Rules()
	if err != nil {
		return nil, badRequest(err.Error())
	}
	return &structs.ACLPolicy{Name: "synthetic-policy", Description: "synthetic policy generated from templated policy: " + name, Rules: rules}, nil
}
