package config

import (
	"fmt"
	"strings"
	"time"
)

// Consul's acl block and the deprecated keys it replaced. The servers and
// the agent read the result (RuntimeConfig.ACL).

// Consul's ACL defaults.
const (
	DefaultACLPolicy     = "allow"
	DefaultACLDownPolicy = "extend-cache"
	DefaultACLTTL        = "30s"
)

// ACL is the acl block, resolved: deprecated keys folded in, policies in
// lower case, durations parsed.
type ACL struct {
	// Enabled turns the ACL system on (acl.enabled).
	Enabled bool
	// DefaultPolicy is "allow" or "deny": what no rule of a token decides.
	DefaultPolicy string
	// DownPolicy is what a client agent does when no server can resolve a
	// token: "allow", "deny", "extend-cache" (the default) or
	// "async-cache".
	DownPolicy string
	// EnableTokenPersistence keeps the tokens set with
	// PUT /v1/agent/token/<kind> in <data-dir>/acl-tokens.json, read back
	// at start over the config's tokens.
	EnableTokenPersistence bool
	// EnableTokenReplication replicates tokens from the primary
	// datacenter (acl.enable_token_replication, or the deprecated
	// enable_acl_replication / acl_replication_token).
	EnableTokenReplication bool
	// EnableKeyListPolicy makes a recursive KV read need the list access
	// on the prefix (acl.enable_key_list_policy).
	EnableKeyListPolicy bool
	// TokenTTL, PolicyTTL and RoleTTL are how long a client agent keeps a
	// resolved token, policy or role (default 30s each).
	TokenTTL  time.Duration
	PolicyTTL time.Duration
	RoleTTL   time.Duration
	// Tokens are the acl.tokens the agent starts with.
	Tokens ACLTokens
}

// ACLTokens are the acl.tokens block. Never log them.
type ACLTokens struct {
	// InitialManagement is a management token the leader creates
	// (initial_management; deprecated master, acl_master_token).
	InitialManagement string
	// Agent is the token of the agent's own requests: anti-entropy,
	// coordinates (agent; deprecated acl_agent_token).
	Agent string
	// AgentRecovery may call the agent endpoints of this agent when the
	// servers cannot be reached (agent_recovery; deprecated agent_master,
	// acl_agent_master_token).
	AgentRecovery string
	// Default is used for HTTP and DNS requests that carry no token
	// (default; deprecated acl_token).
	Default string
	// Replication is the token of ACL replication (replication;
	// deprecated acl_replication_token).
	Replication string
	// ConfigFileServiceRegistration registers the services of config
	// files (config_file_service_registration).
	ConfigFileServiceRegistration string
}

// aclSource is the acl block of one layer.
type aclSource struct {
	Enabled                *bool           `json:"enabled"`
	DefaultPolicy          *string         `json:"default_policy"`
	DownPolicy             *string         `json:"down_policy"`
	EnableTokenPersistence *bool           `json:"enable_token_persistence"`
	EnableTokenReplication *bool           `json:"enable_token_replication"`
	EnableKeyListPolicy    *bool           `json:"enable_key_list_policy"`
	TokenTTL               *string         `json:"token_ttl"`
	PolicyTTL              *string         `json:"policy_ttl"`
	RoleTTL                *string         `json:"role_ttl"`
	Tokens                 aclTokensSource `json:"tokens"`
}

type aclTokensSource struct {
	InitialManagement             *string `json:"initial_management"`
	Agent                         *string `json:"agent"`
	AgentRecovery                 *string `json:"agent_recovery"`
	Default                       *string `json:"default"`
	Replication                   *string `json:"replication"`
	ConfigFileServiceRegistration *string `json:"config_file_service_registration"`
	// Deprecated forms of initial_management and agent_recovery.
	Master      *string `json:"master"`
	AgentMaster *string `json:"agent_master"`
}

// deprecatedACLSource holds the top-level ACL keys of Consul before 1.4,
// which Consul still reads into the acl block.
type deprecatedACLSource struct {
	ACLMasterToken         *string `json:"acl_master_token"`
	ACLAgentMasterToken    *string `json:"acl_agent_master_token"`
	ACLAgentToken          *string `json:"acl_agent_token"`
	ACLToken               *string `json:"acl_token"`
	ACLReplicationToken    *string `json:"acl_replication_token"`
	EnableACLReplication   *bool   `json:"enable_acl_replication"`
	ACLDefaultPolicy       *string `json:"acl_default_policy"`
	ACLDownPolicy          *string `json:"acl_down_policy"`
	ACLTTL                 *string `json:"acl_ttl"`
	ACLEnableKeyListPolicy *bool   `json:"acl_enable_key_list_policy"`
	// ACLDatacenter named the datacenter holding the ACLs before 1.4;
	// Consul still takes it to switch ACLs on.
	ACLDatacenter *string `json:"acl_datacenter"`
}

func defaultACLSource() aclSource {
	return aclSource{
		DefaultPolicy:          ptr(DefaultACLPolicy),
		DownPolicy:             ptr(DefaultACLDownPolicy),
		Enabled:                ptr(false),
		EnableTokenPersistence: ptr(false),
		EnableTokenReplication: ptr(false),
		EnableKeyListPolicy:    ptr(false),
		TokenTTL:               ptr(DefaultACLTTL),
		PolicyTTL:              ptr(DefaultACLTTL),
		RoleTTL:                ptr(DefaultACLTTL),
	}
}

// foldDeprecatedACL moves one layer's deprecated ACL keys into its acl
// block, as Consul does: within a layer the new key wins over the old one.
// It returns a warning per deprecated key used, naming the replacement.
func foldDeprecatedACL(where string, s *source) []string {
	var warnings []string
	fold := func(old string, from *string, to **string, replacement string) {
		if from == nil {
			return
		}
		if *to == nil {
			*to = from
		}
		warnings = append(warnings, fmt.Sprintf("%s: the %s key is deprecated: use %s instead", where, old, replacement))
	}
	foldBool := func(old string, from *bool, to **bool, replacement string) {
		if from == nil {
			return
		}
		if *to == nil {
			*to = from
		}
		warnings = append(warnings, fmt.Sprintf("%s: the %s key is deprecated: use %s instead", where, old, replacement))
	}
	a, d := &s.ACL, &s.deprecatedACLSource
	t := &a.Tokens
	fold("acl.tokens.master", t.Master, &t.InitialManagement, "acl.tokens.initial_management")
	fold("acl.tokens.agent_master", t.AgentMaster, &t.AgentRecovery, "acl.tokens.agent_recovery")
	fold("acl_master_token", d.ACLMasterToken, &t.InitialManagement, "acl.tokens.initial_management")
	fold("acl_agent_master_token", d.ACLAgentMasterToken, &t.AgentRecovery, "acl.tokens.agent_recovery")
	fold("acl_agent_token", d.ACLAgentToken, &t.Agent, "acl.tokens.agent")
	fold("acl_token", d.ACLToken, &t.Default, "acl.tokens.default")
	fold("acl_replication_token", d.ACLReplicationToken, &t.Replication, "acl.tokens.replication")
	if d.ACLReplicationToken != nil && *d.ACLReplicationToken != "" && a.EnableTokenReplication == nil {
		// Consul: a legacy replication token switched replication on.
		a.EnableTokenReplication = ptr(true)
	}
	foldBool("enable_acl_replication", d.EnableACLReplication, &a.EnableTokenReplication, "acl.enable_token_replication")
	fold("acl_default_policy", d.ACLDefaultPolicy, &a.DefaultPolicy, "acl.default_policy")
	fold("acl_down_policy", d.ACLDownPolicy, &a.DownPolicy, "acl.down_policy")
	fold("acl_ttl", d.ACLTTL, &a.TokenTTL, "acl.token_ttl")
	foldBool("acl_enable_key_list_policy", d.ACLEnableKeyListPolicy, &a.EnableKeyListPolicy, "acl.enable_key_list_policy")
	if d.ACLDatacenter != nil && *d.ACLDatacenter != "" {
		// Trellis has one datacenter, so only the switch is kept.
		foldBool("acl_datacenter", ptr(true), &a.Enabled, "primary_datacenter and acl.enabled")
	}
	return warnings
}

// buildACL checks the merged acl block.
func buildACL(s aclSource, p *problems) ACL {
	out := ACL{
		Enabled:                *s.Enabled,
		EnableTokenPersistence: *s.EnableTokenPersistence,
		EnableTokenReplication: *s.EnableTokenReplication,
		EnableKeyListPolicy:    *s.EnableKeyListPolicy,
		TokenTTL:               duration("acl.token_ttl", s.TokenTTL, false, p),
		PolicyTTL:              duration("acl.policy_ttl", s.PolicyTTL, false, p),
		RoleTTL:                duration("acl.role_ttl", s.RoleTTL, false, p),
		Tokens: ACLTokens{
			InitialManagement:             deref(s.Tokens.InitialManagement),
			Agent:                         deref(s.Tokens.Agent),
			AgentRecovery:                 deref(s.Tokens.AgentRecovery),
			Default:                       deref(s.Tokens.Default),
			Replication:                   deref(s.Tokens.Replication),
			ConfigFileServiceRegistration: deref(s.Tokens.ConfigFileServiceRegistration),
		},
	}
	out.DefaultPolicy = oneOf("acl.default_policy", *s.DefaultPolicy, p, "allow", "deny")
	out.DownPolicy = oneOf("acl.down_policy", *s.DownPolicy, p, "allow", "deny", "extend-cache", "async-cache")
	return out
}

// oneOf lower-cases v and checks it is one of allowed.
func oneOf(key, v string, p *problems, allowed ...string) string {
	v = strings.ToLower(strings.TrimSpace(v))
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.add("%s must be one of %q, not %q", key, allowed, v)
	return ""
}
