package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ACLConfig is the part of Consul's acl block the servers read.
type ACLConfig struct {
	// Enabled turns the ACL system on.
	Enabled bool
	// DefaultPolicy ("allow" or "deny", default "allow") decides what no
	// rule of a token decides.
	DefaultPolicy string
	// InitialManagement is acl.tokens.initial_management: a SecretID the
	// leader stores as a management token (bootstrapping the cluster with
	// it when it never was).
	InitialManagement string
	// TokenMinExpirationTTL and TokenMaxExpirationTTL bound a new token's
	// lifetime (zero: Consul's 1m and 24h).
	TokenMinExpirationTTL time.Duration
	TokenMaxExpirationTTL time.Duration
	// ReapInterval is how often the leader deletes expired tokens
	// (default 1m).
	ReapInterval time.Duration
}

// aclCacheMax bounds the resolved tokens kept; past it the cache starts
// over rather than tracking use.
const aclCacheMax = 1024

// aclCache keeps resolved tokens for as long as the ACL tables do not move
// and the store is the same (a snapshot restore swaps it).
type aclCache struct {
	mu sync.Mutex
	// store, index and entries are guarded by mu.
	store   *state.Store
	index   uint64
	entries map[string]resolvedToken
}

type resolvedToken struct {
	authz *acl.Authorizer
	token *structs.ACLToken
}

// get returns the entry for secret if the cache is current for st at idx,
// emptying it otherwise.
func (c *aclCache) get(st *state.Store, idx uint64, secret string) (resolvedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store != st || c.index != idx {
		c.store, c.index, c.entries = st, idx, nil
		return resolvedToken{}, false
	}
	e, ok := c.entries[secret]
	return e, ok
}

func (c *aclCache) put(st *state.Store, idx uint64, secret string, e resolvedToken) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.store != st || c.index != idx {
		return
	}
	if c.entries == nil || len(c.entries) >= aclCacheMax {
		c.entries = make(map[string]resolvedToken)
	}
	c.entries[secret] = e
}

// ResolveToken is the one place a SecretID becomes what it may do: the
// token (the anonymous token for ""), its policies, roles, identities and
// templated policies compiled over acl.default_policy. An unknown or
// expired SecretID is structs.ErrACLNotFound (403, "ACL not found"), with
// Consul's hint while the cluster was never bootstrapped. With ACLs off it
// returns acl.ManageAll() and no token. The result is cached until any
// ACL table changes; the token returned is the caller's to keep but not
// to modify. Endpoints that enforce ACLs call it with args.Token.
func (s *Server) ResolveToken(_ context.Context, secretID string) (*acl.Authorizer, *structs.ACLToken, error) {
	if !s.cfg.ACLs.Enabled {
		return acl.ManageAll(), nil, nil
	}
	st := s.fsm.State()
	idx := st.ACLIndex()
	if e, ok := s.aclCache.get(st, idx, secretID); ok && !e.token.IsExpired(time.Now()) {
		return e.authz, e.token, nil
	}
	var (
		tok *structs.ACLToken
		err error
	)
	if secretID == "" {
		_, tok, err = st.ACLTokenGetByAccessor(nil, structs.ACLTokenAnonymousID)
	} else {
		_, tok, err = st.ACLTokenGetBySecret(nil, secretID)
	}
	if err != nil {
		return nil, nil, err
	}
	if tok == nil || tok.IsExpired(time.Now()) {
		if st.ACLBootstrapIndex() == 0 {
			return nil, nil, fmt.Errorf("ACL system must be bootstrapped before making any requests that require authorization: %w", structs.ErrACLNotFound)
		}
		return nil, nil, structs.ErrACLNotFound
	}
	authz, err := s.compileToken(st, tok)
	if err != nil {
		return nil, nil, err
	}
	s.aclCache.put(st, idx, secretID, resolvedToken{authz: authz, token: tok})
	return authz, tok, nil
}

// ResolveAuthorizer is ResolveToken's authorizer alone: what an agent's
// own edges ask of a server agent (agent/authz.Resolver).
func (s *Server) ResolveAuthorizer(ctx context.Context, secretID string) (*acl.Authorizer, error) {
	a, _, err := s.ResolveToken(ctx, secretID)
	return a, err
}

// compileToken gathers what tok grants, through its roles too, and
// compiles it.
func (s *Server) compileToken(st *state.Store, tok *structs.ACLToken) (*acl.Authorizer, error) {
	def, err := acl.DefaultPolicy(s.aclDefaultPolicy())
	if err != nil {
		return nil, err
	}
	g, err := acl.TokenGrants(tok, func(id string) (*structs.ACLRole, error) {
		_, r, err := st.ACLRoleGetByID(nil, id)
		return r, err
	}, func(id string) (*structs.ACLPolicy, error) {
		_, p, err := st.ACLPolicyGetByID(nil, id)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	return acl.Compile(acl.Config{AccessorID: tok.AccessorID, Datacenter: s.cfg.Datacenter, Default: def, Grants: g})
}

func (s *Server) aclDefaultPolicy() string {
	if s.cfg.ACLs.DefaultPolicy == "" {
		return "allow"
	}
	return s.cfg.ACLs.DefaultPolicy
}

// aclAuthorize resolves the caller's token for an ACL endpoint and checks
// acl:write (write) or acl:read, with Consul's denial. It answers
// ErrACLDisabled when the cluster runs without ACLs.
func (s *Server) aclAuthorize(ctx context.Context, secretID string, write bool) (*acl.Authorizer, *structs.ACLToken, error) {
	if !s.cfg.ACLs.Enabled {
		return nil, nil, structs.ErrACLDisabled
	}
	authz, tok, err := s.ResolveToken(ctx, secretID)
	if err != nil {
		return nil, nil, err
	}
	if write && authz.ACLWrite() != acl.Allow {
		return nil, nil, authz.Denied(acl.ResourceACL, acl.AccessWrite, "")
	}
	if !write && authz.ACLRead() != acl.Allow {
		return nil, nil, authz.Denied(acl.ResourceACL, acl.AccessRead, "")
	}
	return authz, tok, nil
}
