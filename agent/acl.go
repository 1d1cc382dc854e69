package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/aclcache"
	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// newTokenStore starts the agent's tokens from the acl.tokens block and,
// with enable_token_persistence and a data dir, from the tokens the API
// set before the last restart (agent/token).
// A client agent's ACL cache forgets the tokens the store replaces.
func newTokenStore(rc *config.RuntimeConfig, cache *aclcache.Cache) (*token.Store, error) {
	t := rc.ACL.Tokens
	cfg := token.Config{Configured: token.Tokens{
		Default: t.Default, Agent: t.Agent, AgentRecovery: t.AgentRecovery,
		Replication: t.Replication, ConfigFileServiceRegistration: t.ConfigFileServiceRegistration, DNS: t.DNS,
	}}
	if cache != nil {
		cfg.Changed = cache.Invalidate
	}
	if rc.ACL.EnableTokenPersistence && !rc.DevMode && rc.DataDir != "" {
		cfg.PersistDir = rc.DataDir
	}
	return token.New(cfg)
}

// serverACLs is the acl block as the servers read it.
func (a *Agent) serverACLs() server.ACLConfig {
	return server.ACLConfig{
		Enabled:           a.acls,
		DefaultPolicy:     a.rc.ACL.DefaultPolicy,
		InitialManagement: a.rc.ACL.Tokens.InitialManagement,
	}
}

// newACLCache is a client agent's token resolution (agent/aclcache): the
// servers' data, kept for the acl block's TTLs and used under its
// down_policy while no server answers.
func newACLCache(rc *config.RuntimeConfig, rpc structs.Caller, logger *slog.Logger) (*aclcache.Cache, error) {
	c, err := aclcache.New(aclcache.Config{
		RPC:        rpc,
		Datacenter: rc.Datacenter,
		TokenTTL:   rc.ACL.TokenTTL,
		PolicyTTL:  rc.ACL.PolicyTTL,
		RoleTTL:    rc.ACL.RoleTTL,
		DownPolicy: rc.ACL.DownPolicy,
		Down:       server.Retryable,
		Logger:     logger.With("component", "acl"),
	})
	if err != nil {
		return nil, fmt.Errorf("agent: ACL cache: %w", err)
	}
	return c, nil
}

// newACLChecker decides for the agent's own edges: from the ACL cache on
// a client agent, from the server's own resolution on a server.
func (a *Agent) newACLChecker() (*authz.Checker, error) {
	lookup := func(ctx context.Context, secret string) (*acl.Authorizer, error) {
		if a.server == nil { // before Start
			return nil, structs.ErrNoServers
		}
		return a.server.ResolveAuthorizer(ctx, secret)
	}
	resolve := lookup
	if a.aclCache != nil {
		lookup, resolve = a.aclCache.Lookup, a.aclCache.Resolve
	}
	rules, err := acl.Parse(fmt.Sprintf(`agent %q { policy = "write" }
node_prefix "" { policy = "read" }`, a.rc.NodeName))
	if err != nil {
		return nil, fmt.Errorf("agent: agent_recovery rules: %w", err)
	}
	recovery := acl.NewPolicyAuthorizer("agent-recovery-token", acl.DenyAll(), rules)
	c, err := authz.New(authz.Config{Resolver: authz.ResolverFunc(func(ctx context.Context, secret string) (*acl.Authorizer, error) {
		if secret == "" || !a.tokens.IsAgentRecoveryToken(secret) {
			return resolve(ctx, secret)
		}
		// acl.tokens.agent_recovery opens this agent's own endpoints
		// (agent:write on itself, node:read) when the servers do not
		// know the token or cannot be reached, as Consul's; a token the
		// servers know keeps what they grant it.
		if authz, err := lookup(ctx, secret); err == nil {
			return authz, nil
		}
		return recovery, nil
	})})
	if err != nil {
		return nil, fmt.Errorf("agent: ACL checker: %w", err)
	}
	return c, nil
}

// rpcToken is the caller's token an RPC's args carry.
func rpcToken(args any) string {
	switch a := args.(type) {
	case interface{ QueryOpts() *structs.QueryOptions }:
		return a.QueryOpts().Token
	case interface{ WriteOpts() *structs.WriteRequest }:
		return a.WriteOpts().Token
	}
	return ""
}
