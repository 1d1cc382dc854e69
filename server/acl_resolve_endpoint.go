package server

import (
	"context"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// The reads behind a client agent's ACL cache (agent/aclcache): a token
// resolves itself, then the policies and roles it links. What a client
// agent compiles from them decides only its own edges; every server RPC
// still resolves the forwarded token here (ResolveToken).

func (s *Server) aclTokenResolve(ctx context.Context, args *structs.ACLTokenResolveRequest, reply *structs.ACLTokenResolveResponse) error {
	if !s.cfg.ACLs.Enabled {
		return structs.ErrACLDisabled
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(memdb.WatchSet, *state.Store) error {
		_, tok, err := s.ResolveToken(ctx, args.Token)
		if err != nil {
			return err
		}
		reply.Index = s.fsm.State().ACLIndex()
		reply.Token = tok.Redacted()
		reply.DefaultPolicy = s.aclDefaultPolicy()
		return nil
	})
}

func (s *Server) aclPolicyResolve(ctx context.Context, args *structs.ACLPolicyBatchGetRequest, reply *structs.ACLPolicyBatchResponse) error {
	return s.aclResolveLinked(ctx, &args.QueryOptions, &reply.QueryMeta, args.PolicyIDs, true, func(ws memdb.WatchSet, st *state.Store, id string) (uint64, error) {
		idx, p, err := st.ACLPolicyGetByID(ws, id)
		if p != nil {
			reply.Policies = append(reply.Policies, p)
		}
		return idx, err
	})
}

func (s *Server) aclRoleResolve(ctx context.Context, args *structs.ACLRoleBatchGetRequest, reply *structs.ACLRoleBatchResponse) error {
	return s.aclResolveLinked(ctx, &args.QueryOptions, &reply.QueryMeta, args.RoleIDs, false, func(ws memdb.WatchSet, st *state.Store, id string) (uint64, error) {
		idx, r, err := st.ACLRoleGetByID(ws, id)
		if r != nil {
			reply.Roles = append(reply.Roles, r)
		}
		return idx, err
	})
}

// aclResolveLinked reads each of ids the caller's token may see with get:
// every one with acl:read, else those the token links (policies through
// its roles too), so that a token learns nothing it does not hold.
func (s *Server) aclResolveLinked(ctx context.Context, opts *structs.QueryOptions, meta *structs.QueryMeta, ids []string, policies bool,
	get func(memdb.WatchSet, *state.Store, string) (uint64, error)) error {
	if !s.cfg.ACLs.Enabled {
		return structs.ErrACLDisabled
	}
	authz, tok, err := s.ResolveToken(ctx, opts.Token)
	if err != nil {
		return err
	}
	all := authz.ACLRead() == acl.Allow
	return s.blockingQuery(ctx, opts, meta, func(ws memdb.WatchSet, st *state.Store) error {
		linked, err := linkedIDs(st, tok, policies)
		if err != nil {
			return err
		}
		var top uint64
		for _, id := range ids {
			if !all && !linked[id] {
				continue
			}
			idx, err := get(ws, st, id)
			if err != nil {
				return err
			}
			top = max(top, idx)
		}
		meta.Index = top
		return nil
	})
}

// linkedIDs is the set of policy IDs (or role IDs) tok links, a policy
// through its roles too.
func linkedIDs(st *state.Store, tok *structs.ACLToken, policies bool) (map[string]bool, error) {
	out := make(map[string]bool)
	if !policies {
		for _, l := range tok.Roles {
			out[l.ID] = true
		}
		return out, nil
	}
	for _, l := range tok.Policies {
		out[l.ID] = true
	}
	for _, l := range tok.Roles {
		_, r, err := st.ACLRoleGetByID(nil, l.ID)
		if err != nil {
			return nil, err
		}
		if r == nil {
			continue
		}
		for _, pl := range r.Policies {
			out[pl.ID] = true
		}
	}
	return out, nil
}
