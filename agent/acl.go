package agent

import (
	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/server"
)

// newTokenStore starts the agent's tokens from the acl.tokens block and,
// with enable_token_persistence and a data dir, from the tokens the API
// set before the last restart (agent/token).
func newTokenStore(rc *config.RuntimeConfig) (*token.Store, error) {
	t := rc.ACL.Tokens
	cfg := token.Config{Configured: token.Tokens{
		Default: t.Default, Agent: t.Agent, AgentRecovery: t.AgentRecovery,
		Replication: t.Replication, ConfigFileServiceRegistration: t.ConfigFileServiceRegistration,
	}}
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
