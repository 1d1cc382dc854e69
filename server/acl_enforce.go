package server

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// aclRule is how an endpoint enforces ACLs: every endpoint declares one
// (TestEveryMethodHasAnACLRule), so that none can be added without
// deciding what it asks of the caller's token. serve applies it on the
// server that runs the handler (the leader, or the server answering a
// stale read), after a forward too, so that an agent never decides for a
// server.
type aclRule struct {
	// kind says which of the fields below apply.
	kind aclRuleKind
	// authorize runs before the handler with the caller's authorizer and
	// the current store (to look up what a write would change); its
	// error is the call's answer.
	authorize func(st *state.Store, a *acl.Authorizer, args any) error
	// filter runs on the handler's reply, removing what the token may not
	// read; it reports whether it removed anything.
	filter func(a *acl.Authorizer, args, reply any) bool
}

type aclRuleKind int

const (
	aclUndeclared aclRuleKind = iota
	// aclNone: Consul asks nothing of the token (Status.Leader, the CA
	// roots, the datacenter list).
	aclNone
	// aclInHandler: the handler resolves the token itself (the ACL
	// endpoints, which answer differently with ACLs off).
	aclInHandler
	// aclChecked: authorize and/or filter apply.
	aclChecked
)

// authorizeWith declares the check method m's callers must pass before
// its handler runs.
func authorizeWith[A, R any](t map[string]endpoint, m structs.Method[A, R], fn func(st *state.Store, a *acl.Authorizer, args *A) error) {
	ep := t[m.Name()]
	ep.acl.kind = aclChecked
	ep.acl.authorize = func(st *state.Store, a *acl.Authorizer, args any) error { return fn(st, a, args.(*A)) }
	t[m.Name()] = ep
}

// filterWith declares how method m's reply is filtered to what the token
// may read; fn reports whether it removed anything, which the reply's
// QueryMeta tells the caller (X-Consul-Results-Filtered-By-ACLs).
func filterWith[A, R any](t map[string]endpoint, m structs.Method[A, R], fn func(a *acl.Authorizer, args *A, reply *R) bool) {
	ep := t[m.Name()]
	ep.acl.kind = aclChecked
	ep.acl.filter = func(a *acl.Authorizer, args, reply any) bool { return fn(a, args.(*A), reply.(*R)) }
	t[m.Name()] = ep
}

// noACL declares methods that Consul serves to any caller.
func noACL(t map[string]endpoint, methods ...structs.MethodInfo) {
	for _, m := range methods {
		ep := t[m.Name()]
		ep.acl.kind = aclNone
		t[m.Name()] = ep
	}
}

// aclInHandlers declares methods whose handlers resolve the token
// themselves.
func aclInHandlers(t map[string]endpoint, methods ...structs.MethodInfo) {
	for _, m := range methods {
		ep := t[m.Name()]
		ep.acl.kind = aclInHandler
		t[m.Name()] = ep
	}
}

// tokenOf is the caller's SecretID carried by args.
func tokenOf(args any) string {
	switch a := args.(type) {
	case queryOpts:
		return a.QueryOpts().Token
	case writeOpts:
		return a.WriteOpts().Token
	}
	return ""
}

// metaOf is the QueryMeta of a read's reply, if it has one.
func metaOf(reply any) *structs.QueryMeta {
	if m, ok := reply.(interface{ Meta() *structs.QueryMeta }); ok {
		return m.Meta()
	}
	return nil
}

// enforcer is what serve needs of the server to apply an endpoint's rule.
type enforcer struct {
	s *Server
}

// before resolves the caller's token and runs the endpoint's check. It
// returns nil (nothing to filter) when ACLs are off or the rule filters
// nothing.
func (e enforcer) before(ctx context.Context, rule aclRule, args any) (*acl.Authorizer, *structs.ACLToken, error) {
	if e.s == nil || !e.s.cfg.ACLs.Enabled || rule.kind != aclChecked {
		return nil, nil, nil
	}
	authz, tok, err := e.s.ResolveToken(ctx, tokenOf(args))
	if err != nil {
		return nil, nil, err
	}
	if rule.authorize != nil {
		if err := rule.authorize(e.s.fsm.State(), authz, args); err != nil {
			return nil, nil, err
		}
	}
	return authz, tok, nil
}

// after filters the reply and tells the caller that it did, except an
// anonymous caller: as Consul, the header is withheld from it so that it
// learns nothing of what exists.
func (e enforcer) after(rule aclRule, authz *acl.Authorizer, tok *structs.ACLToken, args, reply any) {
	if authz == nil || rule.filter == nil {
		return
	}
	if !rule.filter(authz, args, reply) {
		return
	}
	if m := metaOf(reply); m != nil && tok != nil && tok.AccessorID != structs.ACLTokenAnonymousID {
		m.ResultsFilteredByACLs = true
	}
}

// require is nil when a allows access on res (segment seg), else
// Consul's denial.
func require(a *acl.Authorizer, res acl.Resource, access acl.Access, seg string) error {
	d, err := decide(a, structs.ACLAuthorizationRequest{Resource: string(res), Segment: seg, Access: access.String()})
	if err != nil {
		return err
	}
	if d != acl.Allow {
		return a.Denied(res, access, seg)
	}
	return nil
}

// keep returns the elements of in that ok accepts, and whether any was
// dropped. It never modifies in, which may be shared with the store.
func keep[T any](in []T, ok func(T) bool) ([]T, bool) {
	var out []T
	for i, v := range in {
		if ok(v) {
			if out != nil {
				out = append(out, v)
			}
			continue
		}
		if out == nil {
			out = make([]T, i, len(in))
			copy(out, in[:i])
		}
	}
	if out == nil {
		return in, false
	}
	return out, true
}

// aclRecheckKey carries, in a call's context, the ACL check its blocking
// query repeats on every wake.
type aclRecheckKey struct{}

// withACLRecheck is ctx carrying check, for blockingQuery.
func withACLRecheck(ctx context.Context, check func(context.Context) error) context.Context {
	return context.WithValue(ctx, aclRecheckKey{}, check)
}

// recheckACL repeats the call's ACL check (nil without one): a blocking
// query answers what its token may read when it wakes, not when it began,
// so a token deleted mid-query gets Consul's 403 rather than data.
func recheckACL(ctx context.Context) error {
	if check, ok := ctx.Value(aclRecheckKey{}).(func(context.Context) error); ok {
		return check(ctx)
	}
	return nil
}

// watchToken adds the row of the token a query runs with to ws, so that
// deleting or changing it wakes the query to be re-checked.
func (s *Server) watchToken(ws memdb.WatchSet, st *state.Store, secret string) {
	if !s.cfg.ACLs.Enabled {
		return
	}
	if secret == "" {
		_, _, _ = st.ACLTokenGetByAccessor(ws, structs.ACLTokenAnonymousID)
		return
	}
	// An error leaves the query to wake on its own data only.
	_, _, _ = st.ACLTokenGetBySecret(ws, secret)
}

// EnforceRead applies method's ACL rule to a read made outside the RPC
// path: the server-local proxy configuration sources
// (proxycfg/datasources/serverstate) read the store directly, and must
// give a proxy's token what the RPC would. args' token is checked as serve
// checks it (the error is Consul's denial), reply (method's reply type) is
// filtered in place, and the token's row and those of its policies and
// roles are added to ws, so that a deleted or changed token, or a changed
// grant, re-runs the read: a proxy whose token is given read on an
// upstream gets the upstream's endpoints at once. With ACLs off it does
// nothing.
func (s *Server) EnforceRead(ws memdb.WatchSet, method string, args, reply any) error {
	if !s.cfg.ACLs.Enabled {
		return nil
	}
	ep, ok := s.endpoints[method]
	if !ok {
		return fmt.Errorf("%w: %s", structs.ErrUnknownMethod, method)
	}
	st := s.fsm.State()
	s.watchToken(ws, st, tokenOf(args))
	e := enforcer{s: s}
	authz, tok, err := e.before(context.Background(), ep.acl, args)
	if err != nil {
		return err
	}
	watchGrants(ws, st, tok)
	e.after(ep.acl, authz, tok, args, reply)
	return nil
}

// watchGrants adds to ws the policies and roles tok links (nil: none).
// Errors leave the read to wake on its data and its token only.
func watchGrants(ws memdb.WatchSet, st *state.Store, tok *structs.ACLToken) {
	if tok == nil {
		return
	}
	for _, l := range tok.Policies {
		_, _, _ = st.ACLPolicyGetByID(ws, l.ID)
	}
	for _, l := range tok.Roles {
		_, r, _ := st.ACLRoleGetByID(ws, l.ID)
		if r == nil {
			continue
		}
		for _, pl := range r.Policies {
			_, _, _ = st.ACLPolicyGetByID(ws, pl.ID)
		}
	}
}
