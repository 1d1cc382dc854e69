package aclcache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/structs"
)

// resolve reads what has expired (the token, its roles, their policies)
// and compiles the token again if anything changed. Under extend-cache and
// async-cache an expired entry stands in for an answer no server gave;
// otherwise the failure is a *downError.
func (c *Cache) resolve(ctx context.Context, secret string) (*acl.Authorizer, error) {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	e, err := c.token(ctx, secret)
	if err != nil {
		return nil, err
	}
	roleIDs := make([]string, 0, len(e.token.Roles))
	for _, l := range e.token.Roles {
		roleIDs = append(roleIDs, l.ID)
	}
	roles, err := lookup(ctx, c, c.roles, c.cfg.RoleTTL, secret, roleIDs, c.fetchRoles)
	if err != nil {
		return nil, err
	}
	policyIDs := linkedPolicies(e.token, roles)
	policies, err := lookup(ctx, c, c.policies, c.cfg.PolicyTTL, secret, policyIDs, c.fetchPolicies)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if e.authz != nil && e.gen == c.gen {
		a := e.authz
		c.mu.Unlock()
		return a, nil
	}
	c.mu.Unlock()
	a, err := c.compile(e, roles, policies)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	e.authz, e.gen, e.roleIDs, e.policyIDs = a, gen, roleIDs, policyIDs
	c.mu.Unlock()
	return a, nil
}

// token is secret's entry: the cached one while it is fresh, else the
// servers' answer.
func (c *Cache) token(ctx context.Context, secret string) (*tokenEntry, error) {
	now := c.cfg.Now()
	c.mu.Lock()
	e := c.tokens[secret]
	c.mu.Unlock()
	if e != nil && e.token.IsExpired(now) {
		c.Invalidate(secret)
		return nil, structs.ErrACLNotFound
	}
	if e != nil && fresh(e.fetched, c.cfg.TokenTTL, now) {
		return e, nil
	}
	args := structs.ACLTokenResolveRequest{QueryOptions: structs.QueryOptions{Datacenter: c.cfg.Datacenter, Token: secret, AllowStale: true}}
	var reply structs.ACLTokenResolveResponse
	err := structs.MethodACLTokenResolve.Call(ctx, c.cfg.RPC, &args, &reply)
	switch {
	case err == nil && reply.Token == nil:
		return nil, errors.New("aclcache: the server answered no token")
	case err == nil:
	case e != nil && c.extends() && c.down(err):
		return e, nil
	default:
		return nil, c.failed(secret, err)
	}
	next := &tokenEntry{token: reply.Token, defaultPolicy: reply.DefaultPolicy, fetched: now}
	if c.cfg.TokenTTL > 0 {
		c.mu.Lock()
		if len(c.tokens) >= maxTokens {
			c.tokens = make(map[string]*tokenEntry)
		}
		c.tokens[secret] = next
		c.mu.Unlock()
	}
	return next, nil
}

// lookup is the cached value of each of ids (nil for one the servers do
// not have), reading the missing and expired ones with fetch in one call.
func lookup[T any](ctx context.Context, c *Cache, m map[string]item[T], ttl time.Duration, secret string, ids []string,
	fetch func(ctx context.Context, secret string, ids []string) (map[string]*T, error)) (map[string]*T, error) {
	now := c.cfg.Now()
	out := make(map[string]*T, len(ids))
	expired := make(map[string]*T)
	var missing []string
	c.mu.Lock()
	for _, id := range ids {
		it, ok := m[id]
		switch {
		case ok && fresh(it.fetched, ttl, now):
			out[id] = it.v
			continue
		case ok:
			expired[id] = it.v
		}
		missing = append(missing, id)
	}
	c.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := fetch(ctx, secret, missing)
	if err != nil {
		if !c.extends() || !c.down(err) {
			return nil, c.failed(secret, err)
		}
		// What was never cached grants nothing until a server answers.
		for id, v := range expired {
			out[id] = v
		}
		return out, nil
	}
	c.mu.Lock()
	for _, id := range missing {
		out[id] = got[id]
		if ttl > 0 {
			m[id] = item[T]{v: got[id], fetched: now}
		}
	}
	c.gen++
	c.mu.Unlock()
	return out, nil
}

func (c *Cache) fetchRoles(ctx context.Context, secret string, ids []string) (map[string]*structs.ACLRole, error) {
	args := structs.ACLRoleBatchGetRequest{RoleIDs: ids, QueryOptions: structs.QueryOptions{Datacenter: c.cfg.Datacenter, Token: secret, AllowStale: true}}
	var reply structs.ACLRoleBatchResponse
	if err := structs.MethodACLRoleResolve.Call(ctx, c.cfg.RPC, &args, &reply); err != nil {
		return nil, err
	}
	out := make(map[string]*structs.ACLRole, len(reply.Roles))
	for _, r := range reply.Roles {
		out[r.ID] = r
	}
	return out, nil
}

func (c *Cache) fetchPolicies(ctx context.Context, secret string, ids []string) (map[string]*structs.ACLPolicy, error) {
	args := structs.ACLPolicyBatchGetRequest{PolicyIDs: ids, QueryOptions: structs.QueryOptions{Datacenter: c.cfg.Datacenter, Token: secret, AllowStale: true}}
	var reply structs.ACLPolicyBatchResponse
	if err := structs.MethodACLPolicyResolve.Call(ctx, c.cfg.RPC, &args, &reply); err != nil {
		return nil, err
	}
	out := make(map[string]*structs.ACLPolicy, len(reply.Policies))
	for _, p := range reply.Policies {
		out[p.ID] = p
	}
	return out, nil
}

// linkedPolicies is every policy ID tok links, through roles too.
func linkedPolicies(tok *structs.ACLToken, roles map[string]*structs.ACLRole) []string {
	ids := make([]string, 0, len(tok.Policies))
	for _, l := range tok.Policies {
		ids = append(ids, l.ID)
	}
	for _, l := range tok.Roles {
		if r := roles[l.ID]; r != nil {
			for _, pl := range r.Policies {
				ids = append(ids, pl.ID)
			}
		}
	}
	return ids
}

func (c *Cache) compile(e *tokenEntry, roles map[string]*structs.ACLRole, policies map[string]*structs.ACLPolicy) (*acl.Authorizer, error) {
	dp := e.defaultPolicy
	if dp == "" {
		dp = "allow"
	}
	def, err := acl.DefaultPolicy(dp)
	if err != nil {
		return nil, err
	}
	g, err := acl.TokenGrants(e.token,
		func(id string) (*structs.ACLRole, error) { return roles[id], nil },
		func(id string) (*structs.ACLPolicy, error) { return policies[id], nil })
	if err != nil {
		return nil, err
	}
	return acl.Compile(acl.Config{AccessorID: e.token.AccessorID, Datacenter: c.cfg.Datacenter, Default: def, Grants: g})
}

// extends reports whether expired entries stand in while no server
// answers.
func (c *Cache) extends() bool {
	return c.cfg.DownPolicy == DownExtendCache || c.cfg.DownPolicy == DownAsyncCache
}

// down reports whether err means no server answered.
func (c *Cache) down(err error) bool {
	switch structs.CodeOf(err) {
	case structs.CodePermissionDenied, structs.CodeNotFound, structs.CodeInvalidArgument:
		return false
	case structs.CodeNoLeader, structs.CodeUnavailable, structs.CodeMaybeApplied:
		return true
	}
	return c.cfg.Down != nil && c.cfg.Down(err)
}

// failed is the error of a read of secret's data that failed: a token
// the servers do not know is forgotten, a failure to reach them is a
// *downError for the down policy.
func (c *Cache) failed(secret string, err error) error {
	if errors.Is(err, structs.ErrACLNotFound) {
		c.Invalidate(secret)
		return err
	}
	if c.down(err) {
		return &downError{err: err}
	}
	return fmt.Errorf("aclcache: resolve token: %w", err)
}
