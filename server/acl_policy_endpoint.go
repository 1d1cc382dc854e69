package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ACL policy and role endpoints, and ACL.Authorize.

func (s *Server) aclPolicySet(ctx context.Context, args *structs.ACLPolicySetRequest, reply *structs.ACLPolicy) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, true); err != nil {
		return err
	}
	p := args.Policy.Clone()
	if err := p.Validate(); err != nil {
		return err
	}
	if _, err := acl.Parse(p.Rules); err != nil {
		return fmt.Errorf("Invalid Policy: %w", err)
	}
	st := s.fsm.State()
	if _, other, err := st.ACLPolicyGetByName(nil, p.Name); err != nil {
		return err
	} else if other != nil && other.ID != p.ID {
		return fmt.Errorf("Invalid Policy: A Policy with Name %q already exists", p.Name)
	}
	if p.ID == "" {
		id, err := s.newACLObjectID(func(id string) (bool, error) {
			_, other, err := st.ACLPolicyGetByID(nil, id)
			return other == nil, err
		})
		if err != nil {
			return err
		}
		p.ID = id
	} else {
		_, existing, err := st.ACLPolicyGetByID(nil, p.ID)
		if err != nil {
			return err
		}
		if existing == nil {
			return fmt.Errorf("cannot find policy %s", p.ID)
		}
		if err := p.ValidateGlobalManagementChange(existing); err != nil {
			return err
		}
	}
	if _, err := s.raftApplyWrite(ctx, structs.ACLPolicySetRequestType, &structs.ACLPolicyBatchSetRequest{Policies: []*structs.ACLPolicy{p}}); err != nil {
		return err
	}
	_, stored, err := st.ACLPolicyGetByID(nil, p.ID)
	if err != nil || stored == nil {
		return fmt.Errorf("policy %q missing after its write: %w", p.ID, err)
	}
	*reply = *stored
	return nil
}

// newACLObjectID returns a random UUID outside the reserved range that
// free accepts. A retried create may choose another ID than its first
// attempt: the name index refuses the duplicate.
func (s *Server) newACLObjectID(free func(string) (bool, error)) (string, error) {
	for range 10 {
		id, err := newUUID()
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(id, structs.ACLReservedIDPrefix) {
			continue
		}
		if ok, err := free(id); err != nil || ok {
			return id, err
		}
	}
	return "", fmt.Errorf("could not generate a unique ACL ID")
}

func (s *Server) aclPolicyDelete(ctx context.Context, args *structs.ACLPolicyDeleteRequest, _ *struct{}) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, true); err != nil {
		return err
	}
	switch args.PolicyID {
	case structs.ACLPolicyGlobalManagementID:
		return fmt.Errorf("Delete operation not permitted on the builtin global-management policy")
	case structs.ACLPolicyGlobalReadOnlyID:
		return fmt.Errorf("Delete operation not permitted on the builtin global-read-only policy")
	}
	_, existing, err := s.fsm.State().ACLPolicyGetByID(nil, args.PolicyID)
	if err != nil {
		return err
	}
	if existing == nil {
		return nil
	}
	_, err = s.raftApplyWrite(ctx, structs.ACLPolicyDeleteRequestType, &structs.ACLPolicyBatchDeleteRequest{PolicyIDs: []string{args.PolicyID}})
	return err
}

func (s *Server) aclPolicyRead(ctx context.Context, args *structs.ACLPolicyGetRequest, reply *structs.ACLPolicyResponse) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, false); err != nil {
		return err
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var err error
		if args.PolicyName != "" {
			reply.Index, reply.Policy, err = st.ACLPolicyGetByName(ws, args.PolicyName)
		} else {
			reply.Index, reply.Policy, err = st.ACLPolicyGetByID(ws, args.PolicyID)
		}
		return err
	})
}

func (s *Server) aclPolicyList(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.ACLPolicyListResponse) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, false); err != nil {
		return err
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var err error
		reply.Index, reply.Policies, err = st.ACLPolicyList(ws)
		return err
	})
}

func (s *Server) aclRoleSet(ctx context.Context, args *structs.ACLRoleSetRequest, reply *structs.ACLRole) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, true); err != nil {
		return err
	}
	r := args.Role.Clone()
	if err := r.Validate(); err != nil {
		return err
	}
	st := s.fsm.State()
	if _, other, err := st.ACLRoleGetByName(nil, r.Name); err != nil {
		return err
	} else if other != nil && other.ID != r.ID {
		return fmt.Errorf("Invalid Role: A Role with Name %q already exists", r.Name)
	}
	if r.ID == "" {
		id, err := s.newACLObjectID(func(id string) (bool, error) {
			_, other, err := st.ACLRoleGetByID(nil, id)
			return other == nil, err
		})
		if err != nil {
			return err
		}
		r.ID = id
	} else if _, existing, err := st.ACLRoleGetByID(nil, r.ID); err != nil {
		return err
	} else if existing == nil {
		return fmt.Errorf("cannot find role %s", r.ID)
	}
	var err error
	if r.Policies, err = s.resolvePolicyLinks(r.Policies); err != nil {
		return err
	}
	if _, err := s.raftApplyWrite(ctx, structs.ACLRoleSetRequestType, &structs.ACLRoleBatchSetRequest{Roles: []*structs.ACLRole{r}}); err != nil {
		return err
	}
	_, stored, err := st.ACLRoleGetByID(nil, r.ID)
	if err != nil || stored == nil {
		return fmt.Errorf("role %q missing after its write: %w", r.ID, err)
	}
	*reply = *stored
	return nil
}

func (s *Server) aclRoleDelete(ctx context.Context, args *structs.ACLRoleDeleteRequest, _ *struct{}) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, true); err != nil {
		return err
	}
	_, existing, err := s.fsm.State().ACLRoleGetByID(nil, args.RoleID)
	if err != nil || existing == nil {
		return err
	}
	_, err = s.raftApplyWrite(ctx, structs.ACLRoleDeleteRequestType, &structs.ACLRoleBatchDeleteRequest{RoleIDs: []string{args.RoleID}})
	return err
}

func (s *Server) aclRoleRead(ctx context.Context, args *structs.ACLRoleGetRequest, reply *structs.ACLRoleResponse) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, false); err != nil {
		return err
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var err error
		if args.RoleName != "" {
			reply.Index, reply.Role, err = st.ACLRoleGetByName(ws, args.RoleName)
		} else {
			reply.Index, reply.Role, err = st.ACLRoleGetByID(ws, args.RoleID)
		}
		return err
	})
}

func (s *Server) aclRoleList(ctx context.Context, args *structs.ACLRoleListRequest, reply *structs.ACLRoleListResponse) error {
	if _, _, err := s.aclAuthorize(ctx, args.Token, false); err != nil {
		return err
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var err error
		reply.Index, reply.Roles, err = st.ACLRoleList(ws, args.Policy)
		return err
	})
}

// aclAuthorizeRequests answers access questions about the caller's
// token. Resources without a decision here are refused as bad input.
func (s *Server) aclAuthorizeRequests(ctx context.Context, args *structs.ACLAuthorizeRequest, reply *structs.ACLAuthorizeResponse) error {
	authz, tok, err := s.ResolveToken(ctx, args.Token)
	if err != nil {
		return err
	}
	if tok != nil {
		reply.AccessorID = tok.AccessorID
	}
	for _, q := range args.Requests {
		d, err := decide(authz, q)
		if err != nil {
			return err
		}
		reply.Responses = append(reply.Responses, structs.ACLAuthorizationResponse{ACLAuthorizationRequest: q, Allow: d == acl.Allow})
	}
	return nil
}

func decide(a *acl.Authorizer, q structs.ACLAuthorizationRequest) (acl.Decision, error) {
	access := map[string]acl.Access{"read": acl.AccessRead, "write": acl.AccessWrite}[q.Access]
	d, err := a.Decide(acl.Resource(q.Resource), access, q.Segment)
	if err != nil {
		return acl.Deny, fmt.Errorf("Invalid access level %q for resource %q", q.Access, q.Resource)
	}
	return d, nil
}
