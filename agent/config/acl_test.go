package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestLoadACL covers every key of the acl block, Consul's deprecated forms
// and their precedence, and the values refused with the key named.
func TestLoadACL(t *testing.T) {
	def := ACL{DefaultPolicy: "allow", DownPolicy: "extend-cache",
		TokenTTL: 30 * time.Second, PolicyTTL: 30 * time.Second, RoleTTL: 30 * time.Second}
	with := func(edit func(a *ACL)) ACL {
		a := def
		edit(&a)
		return a
	}
	for _, tc := range []struct {
		name       string
		file       string // c.json, or c.hcl when it starts with "hcl:"
		want       ACL
		deprecated []string // named in a deprecation warning
		errKeys    []string // the load fails naming each
		refused    bool     // ErrProtectionNotProvided
	}{
		{name: "defaults", file: `{}`, want: def},
		{name: "every key", file: `{"acl": {"enabled": false, "default_policy": "Deny", "down_policy": "async-cache",
			"enable_token_persistence": true, "enable_token_replication": true, "enable_key_list_policy": true,
			"token_ttl": "1m", "policy_ttl": "2m", "role_ttl": "0s",
			"tokens": {"initial_management": "im", "agent": "ag", "agent_recovery": "ar", "default": "df",
				"replication": "rp", "config_file_service_registration": "cf"}}}`,
			want: ACL{DefaultPolicy: "deny", DownPolicy: "async-cache", EnableTokenPersistence: true,
				EnableTokenReplication: true, EnableKeyListPolicy: true,
				TokenTTL: time.Minute, PolicyTTL: 2 * time.Minute,
				Tokens: ACLTokens{InitialManagement: "im", Agent: "ag", AgentRecovery: "ar", Default: "df",
					Replication: "rp", ConfigFileServiceRegistration: "cf"}}},
		{name: "hcl", file: "hcl:acl {\n default_policy = \"deny\"\n down_policy = \"deny\"\n tokens {\n agent = \"ag\"\n }\n}",
			want: with(func(a *ACL) { a.DefaultPolicy, a.DownPolicy, a.Tokens.Agent = "deny", "deny", "ag" })},
		{name: "down policies", file: `{"acl": {"down_policy": "allow"}}`, want: with(func(a *ACL) { a.DownPolicy = "allow" })},
		{name: "extend-cache", file: `{"acl": {"down_policy": "EXTEND-CACHE"}}`, want: def},
		{name: "deprecated tokens block keys", file: `{"acl": {"tokens": {"master": "m", "agent_master": "am"}}}`,
			want:       with(func(a *ACL) { a.Tokens.InitialManagement, a.Tokens.AgentRecovery = "m", "am" }),
			deprecated: []string{"acl.tokens.master", "acl.tokens.agent_master"}},
		{name: "the new key wins over the deprecated one", file: `{"acl": {"tokens": {"master": "old", "initial_management": "new"}}}`,
			want: with(func(a *ACL) { a.Tokens.InitialManagement = "new" }), deprecated: []string{"acl.tokens.master"}},
		{name: "deprecated top-level keys", file: `{"acl_master_token": "m", "acl_agent_master_token": "am",
			"acl_agent_token": "ag", "acl_token": "df", "acl_replication_token": "rp",
			"acl_default_policy": "deny", "acl_down_policy": "allow", "acl_ttl": "45s", "acl_enable_key_list_policy": true}`,
			want: ACL{DefaultPolicy: "deny", DownPolicy: "allow", TokenTTL: 45 * time.Second,
				PolicyTTL: 30 * time.Second, RoleTTL: 30 * time.Second, EnableKeyListPolicy: true, EnableTokenReplication: true,
				Tokens: ACLTokens{InitialManagement: "m", AgentRecovery: "am", Agent: "ag", Default: "df", Replication: "rp"}},
			deprecated: []string{"acl_master_token", "acl_agent_master_token", "acl_agent_token", "acl_token",
				"acl_replication_token", "acl_default_policy", "acl_down_policy", "acl_ttl", "acl_enable_key_list_policy"}},
		{name: "enable_acl_replication", file: `{"enable_acl_replication": true}`,
			want: with(func(a *ACL) { a.EnableTokenReplication = true }), deprecated: []string{"enable_acl_replication"}},
		{name: "the acl block wins over the top-level key", file: `{"acl_default_policy": "deny", "acl": {"default_policy": "allow"}}`,
			want: def, deprecated: []string{"acl_default_policy"}},
		{name: "bad default_policy", file: `{"acl": {"default_policy": "maybe"}}`, errKeys: []string{"acl.default_policy"}},
		{name: "bad down_policy", file: `{"acl": {"down_policy": "retry"}}`, errKeys: []string{"acl.down_policy"}},
		{name: "bad deprecated down policy", file: `{"acl_down_policy": "retry"}`, errKeys: []string{"acl.down_policy"}},
		{name: "bad ttls", file: `{"acl": {"token_ttl": "soon", "policy_ttl": "-1s", "role_ttl": "3"}}`,
			errKeys: []string{"acl.token_ttl", "acl.policy_ttl", "acl.role_ttl"}},
		{name: "bad acl_ttl", file: `{"acl_ttl": "x"}`, errKeys: []string{"acl.token_ttl"}},
		{name: "wrong type", file: `{"acl": {"enable_token_persistence": "yes"}}`, errKeys: []string{"enable_token_persistence"}},
		{name: "unknown key", file: `{"acl": {"tokens": {"agnt": "x"}}}`, errKeys: []string{"acl.tokens.agnt"}},
		{name: "enabled", file: `{"acl": {"enabled": true, "default_policy": "deny"}}`,
			want: with(func(a *ACL) { a.Enabled, a.DefaultPolicy = true, "deny" })},
		{name: "hcl enabled", file: "hcl:acl { enabled = true }", want: with(func(a *ACL) { a.Enabled = true })},
		{name: "legacy acl_datacenter switches ACLs on", file: `{"acl_datacenter": "dc1"}`,
			want: with(func(a *ACL) { a.Enabled = true }), deprecated: []string{"acl_datacenter"}},
		{name: "acl.enabled wins over acl_datacenter", file: `{"acl_datacenter": "dc1", "acl": {"enabled": false}}`,
			want: def, deprecated: []string{"acl_datacenter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, content := "c.json", tc.file
			if rest, ok := strings.CutPrefix(tc.file, "hcl:"); ok {
				name, content = "c.hcl", rest
			}
			rc, warnings, err := load(t, []string{"-dev", "-config-file", "$DIR/" + name}, map[string]string{name: content})
			if tc.errKeys != nil {
				if err == nil {
					t.Fatalf("Load succeeded, want an error naming %v", tc.errKeys)
				}
				if tc.refused != errors.Is(err, ErrProtectionNotProvided) {
					t.Errorf("err = %v, refused = %v", err, tc.refused)
				}
				for _, k := range tc.errKeys {
					if !strings.Contains(err.Error(), k) {
						t.Errorf("error does not name %q: %v", k, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if rc.ACL != tc.want {
				t.Errorf("ACL =\n %+v\nwant\n %+v", rc.ACL, tc.want)
			}
			if rc.IntentionDefaultPolicy != tc.want.DefaultPolicy {
				t.Errorf("IntentionDefaultPolicy = %q, want %q", rc.IntentionDefaultPolicy, tc.want.DefaultPolicy)
			}
			for _, k := range tc.deprecated {
				found := false
				for _, w := range warnings {
					found = found || strings.Contains(w, "the "+k+" key is deprecated")
				}
				if !found {
					t.Errorf("no deprecation warning for %s: %q", k, warnings)
				}
			}
			for _, w := range warnings {
				if strings.Contains(w, "not implemented") && strings.Contains(w, "acl") {
					t.Errorf("an acl key is reported as not implemented: %s", w)
				}
			}
		})
	}
}
