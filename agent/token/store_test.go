package token

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseKind(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Kind
	}{
		{"default", KindDefault}, {"acl_token", KindDefault},
		{"agent", KindAgent}, {"acl_agent_token", KindAgent},
		{"agent_recovery", KindAgentRecovery}, {"agent_master", KindAgentRecovery}, {"acl_agent_master_token", KindAgentRecovery},
		{"replication", KindReplication}, {"acl_replication_token", KindReplication},
		{"config_file_service_registration", KindConfigFileServiceRegistration}, {"dns", KindDNS},
		{"user", ""}, {"", ""}, {"Default", ""},
	} {
		got, err := ParseKind(tc.name)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrUnknownKind) {
			t.Errorf("ParseKind(%q) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestFallbacks: the agent, config-file registration and DNS tokens fall
// back to the default token, as Consul's; the others do not.
func TestFallbacks(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		cfg                         Tokens
		user, agent, recovery, repl string
		configFile, dns             string
	}{
		{name: "none"},
		{name: "default only", cfg: Tokens{Default: "d"}, user: "d", agent: "d", configFile: "d", dns: "d"},
		{name: "each its own", cfg: Tokens{Default: "d", Agent: "a", AgentRecovery: "r", Replication: "p", ConfigFileServiceRegistration: "c", DNS: "n"},
			user: "d", agent: "a", recovery: "r", repl: "p", configFile: "c", dns: "n"},
		{name: "agent without default", cfg: Tokens{Agent: "a"}, agent: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Configured: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			got := [6]string{s.UserToken(), s.AgentToken(), s.AgentRecoveryToken(), s.ReplicationToken(), s.ConfigFileRegistrationToken(), s.DNSToken()}
			want := [6]string{tc.user, tc.agent, tc.recovery, tc.repl, tc.configFile, tc.dns}
			if got != want {
				t.Errorf("user, agent, recovery, replication, config file, dns = %q, want %q", got, want)
			}
			if s.IsAgentRecoveryToken("") || (tc.recovery != "" && !s.IsAgentRecoveryToken(tc.recovery)) {
				t.Errorf("IsAgentRecoveryToken is wrong for %q", tc.recovery)
			}
		})
	}
}

// TestPersistence: tokens set through the API are written with mode 0600,
// and at the next start win over the config, which still fills the kinds
// the API never set. Without persistence nothing is written.
func TestPersistence(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Configured: Tokens{Default: "cfg-default", Agent: "cfg-agent"}, PersistDir: dir}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file before any Set: %v", err)
	}
	if err := s.Set(KindAgent, "api-agent"); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(KindAgentRecovery, "api-recovery"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v; want 0600", fi.Mode(), err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, FileName))
	var onDisk map[string]string
	if err := json.Unmarshal(b, &onDisk); err != nil {
		t.Fatal(err)
	}
	// Only what the API set: the configured default is not copied.
	if len(onDisk) != 2 || onDisk["agent"] != "api-agent" || onDisk["agent_recovery"] != "api-recovery" {
		t.Fatalf("file = %s", b)
	}

	// Restart with a changed config: the persisted tokens win.
	cfg.Configured = Tokens{Default: "cfg-default-2", Agent: "cfg-agent-2", AgentRecovery: "cfg-recovery"}
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s2.AgentToken() != "api-agent" || s2.AgentRecoveryToken() != "api-recovery" || s2.UserToken() != "cfg-default-2" {
		t.Fatalf("after restart: agent %q recovery %q default %q", s2.AgentToken(), s2.AgentRecoveryToken(), s2.UserToken())
	}
	// A reload of the config leaves the API's tokens alone.
	s2.SetConfigured(Tokens{Default: "cfg-default-3", Agent: "cfg-agent-3"})
	if s2.AgentToken() != "api-agent" || s2.UserToken() != "cfg-default-3" {
		t.Fatalf("after reload: agent %q default %q", s2.AgentToken(), s2.UserToken())
	}

	// Consul before 1.11 wrote agent_master.
	legacy := t.TempDir()
	if err := os.WriteFile(filepath.Join(legacy, FileName), []byte(`{"agent_master": "old", "default": "d"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s3, err := New(Config{PersistDir: legacy})
	if err != nil || s3.AgentRecoveryToken() != "old" || s3.UserToken() != "d" {
		t.Fatalf("legacy file: %v recovery %q default %q", err, s3.AgentRecoveryToken(), s3.UserToken())
	}

	// A malformed file stops the start, naming it.
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, FileName), []byte(`{`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{PersistDir: bad}); err == nil {
		t.Fatal("malformed file accepted")
	}

	// In memory only: Set writes nothing.
	mem := t.TempDir()
	s4, _ := New(Config{})
	if err := s4.Set(KindDefault, "x"); err != nil || s4.UserToken() != "x" {
		t.Fatalf("in-memory Set: %v", err)
	}
	if entries, _ := os.ReadDir(mem); len(entries) != 0 {
		t.Fatalf("files written: %v", entries)
	}
}

// TestPersistFailureChangesNothing: a file that cannot be written leaves
// the token in use as it was.
func TestPersistFailureChangesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{Configured: Tokens{Agent: "before"}, PersistDir: filepath.Join(dir, "missing")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(KindAgent, "after"); !errors.Is(err, ErrPersist) {
		t.Fatalf("Set = %v, want ErrPersist", err)
	}
	if s.AgentToken() != "before" {
		t.Fatalf("agent token %q after a failed persist", s.AgentToken())
	}
	if err := s.Set("user", "x"); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("Set(user) = %v", err)
	}
}

// TestChangedTellsReplacedTokens: Set and SetConfigured tell Changed the
// old and new value of each token they replace, and nothing when a value
// stays, so that what was decided about the old token is forgotten.
func TestChangedTellsReplacedTokens(t *testing.T) {
	var told [][]string
	s, err := New(Config{Configured: Tokens{Default: "d1", Agent: "a1"}, Changed: func(secrets ...string) { told = append(told, secrets) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		act  func() error
		want []string
	}{
		{"set replaces", func() error { return s.Set(KindDefault, "d2") }, []string{"d1", "d2"}},
		{"set the same value", func() error { return s.Set(KindDefault, "d2") }, nil},
		{"unknown kind", func() error { _ = s.Set("user", "x"); return nil }, nil},
		{"configured replaces a config token", func() error { s.SetConfigured(Tokens{Default: "d9", Agent: "a2"}); return nil }, []string{"a1", "a2"}},
		{"configured the same", func() error { s.SetConfigured(Tokens{Default: "d9", Agent: "a2"}); return nil }, nil},
	} {
		told = nil
		if err := tc.act(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, c := range told {
			got = append(got, c...)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: told %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestChangedAnnouncesEveryChange: the channel Changed returns is closed
// by the next Set and by a reload's SetConfigured, and only then.
func TestChangedAnnouncesEveryChange(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func() error
	}{
		{"Set", func() error { return s.Set(KindDefault, "d1") }},
		{"SetConfigured", func() error { s.SetConfigured(Tokens{Agent: "a1"}); return nil }},
	} {
		ch := s.Changed()
		select {
		case <-ch:
			t.Fatalf("%s: closed before the change", tc.name)
		default:
		}
		if err := tc.change(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		default:
			t.Fatalf("%s: not announced", tc.name)
		}
	}
}
