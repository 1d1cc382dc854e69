// Package token keeps the ACL tokens an agent uses for itself and for the
// requests it serves without one: Consul's default, agent, agent_recovery,
// replication and config_file_service_registration tokens. They start from
// the agent config, may be replaced through PUT /v1/agent/token/<kind>, and
// with acl.enable_token_persistence those replacements are kept in
// <data-dir>/acl-tokens.json and win over the config at the next start,
// as Consul documents. Tokens are secrets: nothing here logs one.
package token

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// Kind names one of the agent's tokens.
type Kind string

// The kinds, by their names in PUT /v1/agent/token/<kind>.
const (
	// KindDefault is used for the HTTP and DNS requests that carry no
	// token (Consul's "user" token).
	KindDefault Kind = "default"
	// KindAgent is the agent's own token: anti-entropy of the node,
	// coordinates. Unset, the agent falls back to KindDefault.
	KindAgent Kind = "agent"
	// KindAgentRecovery may use the agent endpoints of this agent even
	// when the servers cannot be reached.
	KindAgentRecovery Kind = "agent_recovery"
	// KindReplication is the token of ACL replication.
	KindReplication Kind = "replication"
	// KindConfigFileServiceRegistration registers the services and checks
	// of config files. Unset, they use KindDefault.
	KindConfigFileServiceRegistration Kind = "config_file_service_registration"
	// KindDNS is the token of the agent's DNS lookups (acl.tokens.dns).
	// Unset, they use KindDefault.
	KindDNS Kind = "dns"
)

// FileName is the persistence file under the data dir (Consul's name).
const FileName = "acl-tokens.json"

// Sentinel errors of the package.
var (
	// ErrUnknownKind: a name that is no token kind, current or legacy.
	ErrUnknownKind = errors.New("unknown token kind")
	// ErrPersist: the tokens file could not be written; nothing changed.
	ErrPersist = errors.New("failed to persist tokens")
)

// PersistError is a failure to write the tokens file; it matches
// ErrPersist and carries the cause.
type PersistError struct{ Err error }

func (e *PersistError) Error() string { return ErrPersist.Error() + " - " + e.Err.Error() }

// Is makes a PersistError match ErrPersist.
func (e *PersistError) Is(target error) bool { return target == ErrPersist }

// Unwrap returns the cause.
func (e *PersistError) Unwrap() error { return e.Err }

// ParseKind maps a path name of /v1/agent/token/<name> to its kind,
// accepting Consul's legacy names (acl_token, acl_agent_token,
// acl_agent_master_token, agent_master, acl_replication_token).
func ParseKind(name string) (Kind, error) {
	switch name {
	case "default", "acl_token":
		return KindDefault, nil
	case "agent", "acl_agent_token":
		return KindAgent, nil
	case "agent_recovery", "agent_master", "acl_agent_master_token":
		return KindAgentRecovery, nil
	case "replication", "acl_replication_token":
		return KindReplication, nil
	case "config_file_service_registration":
		return KindConfigFileServiceRegistration, nil
	case "dns":
		return KindDNS, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownKind, name)
}

// Tokens are the configured value of every kind ("" for unset).
type Tokens struct {
	Default                       string
	Agent                         string
	AgentRecovery                 string
	Replication                   string
	ConfigFileServiceRegistration string
	DNS                           string
}

// Config holds the store's dependencies.
type Config struct {
	// Configured are the acl.tokens of the agent config.
	Configured Tokens
	// PersistDir, when set, is the data dir: tokens set through Set are
	// written to PersistDir/acl-tokens.json (mode 0600) and read back by
	// New over Configured. Empty keeps them in memory only
	// (enable_token_persistence off, or -dev without a data dir).
	PersistDir string
	// Changed, when set, is told the old and new values of every token
	// that Set or SetConfigured replaced (after the change, without the
	// store's lock), so that what was decided about them is forgotten.
	Changed func(secrets ...string)
	Logger  *slog.Logger
}

// entry is one kind's token and whether the API set it (only those are
// persisted, and a config reload does not replace them).
type entry struct {
	value string
	api   bool
}

// Store holds the tokens. It is safe for concurrent use.
type Store struct {
	path    string
	logger  *slog.Logger
	changed func(secrets ...string)

	mu sync.Mutex
	// tokens and announce are guarded by mu. announce is closed and
	// replaced at every change of a token (Changed).
	tokens   map[Kind]entry
	announce chan struct{}
}

// persisted is the tokens file, in Consul's format.
type persisted struct {
	Default       string `json:"default,omitempty"`
	Agent         string `json:"agent,omitempty"`
	AgentRecovery string `json:"agent_recovery,omitempty"`
	// AgentMaster is the name Consul before 1.11 wrote agent_recovery as.
	AgentMaster            string `json:"agent_master,omitempty"`
	Replication            string `json:"replication,omitempty"`
	ConfigFileRegistration string `json:"config_file_service_registration,omitempty"`
	DNS                    string `json:"dns,omitempty"`
}

// New builds the store from the configured tokens and, when persisting,
// the tokens file, whose values win. A missing file is no error; an
// unreadable or malformed one is, naming the file.
func New(cfg Config) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{logger: cfg.Logger, changed: cfg.Changed, tokens: make(map[Kind]entry), announce: make(chan struct{})}
	s.SetConfigured(cfg.Configured)
	if cfg.PersistDir == "" {
		return s, nil
	}
	s.path = filepath.Join(cfg.PersistDir, FileName)
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("token: read %s: %w", s.path, err)
	}
	var p persisted
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("token: decode %s: %w", s.path, err)
	}
	if p.AgentRecovery == "" {
		p.AgentRecovery = p.AgentMaster
	}
	for k, v := range map[Kind]string{
		KindDefault: p.Default, KindAgent: p.Agent, KindAgentRecovery: p.AgentRecovery,
		KindReplication: p.Replication, KindConfigFileServiceRegistration: p.ConfigFileRegistration, KindDNS: p.DNS,
	} {
		if v != "" {
			s.tokens[k] = entry{value: v, api: true}
		}
	}
	s.logger.Debug("loaded persisted ACL tokens", "file", s.path)
	return s, nil
}

// Changed returns a channel closed at the next change of any token (a
// Set, or a reload's SetConfigured): what a user of a token it keeps
// (the local proxies' default token) waits on to read it again.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.announce
}

// announceLocked wakes the waiters of Changed.
func (s *Store) announceLocked() {
	close(s.announce)
	s.announce = make(chan struct{})
}

// SetConfigured replaces the tokens that came from the config (at start
// and on reload); tokens set through the API stay.
func (s *Store) SetConfigured(t Tokens) {
	var replaced []string
	s.mu.Lock()
	for k, v := range map[Kind]string{
		KindDefault: t.Default, KindAgent: t.Agent, KindAgentRecovery: t.AgentRecovery,
		KindReplication: t.Replication, KindConfigFileServiceRegistration: t.ConfigFileServiceRegistration, KindDNS: t.DNS,
	} {
		if old := s.tokens[k]; !old.api {
			if old.value != v {
				replaced = append(replaced, old.value, v)
			}
			s.tokens[k] = entry{value: v}
		}
	}
	s.announceLocked()
	s.mu.Unlock()
	s.notify(replaced)
}

// notify tells Changed about replaced tokens.
func (s *Store) notify(replaced []string) {
	if s.changed != nil && len(replaced) > 0 {
		s.changed(replaced...)
	}
}

// Set replaces a kind's token, as PUT /v1/agent/token/<kind> does. When
// persisting, the file is written first: if that fails the error wraps
// ErrPersist (a *PersistError) and the token in use does not change.
func (s *Store) Set(kind Kind, value string) error {
	old, err := s.set(kind, value)
	if err != nil {
		return err
	}
	if old != value {
		s.notify([]string{old, value})
	}
	return nil
}

// set is Set under the lock; it returns the value replaced.
func (s *Store) set(kind Kind, value string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := ParseKind(string(kind)); err != nil {
		return "", err
	}
	old := s.tokens[kind].value
	next := make(map[Kind]entry, len(s.tokens))
	for k, e := range s.tokens {
		next[k] = e
	}
	next[kind] = entry{value: value, api: true}
	if s.path != "" {
		// The file is local disk, not the network: writing under the lock
		// keeps the file's order the same as the changes'.
		if err := writeFile(s.path, next); err != nil {
			return "", &PersistError{Err: err}
		}
	}
	s.tokens = next
	s.announceLocked()
	return old, nil
}

func writeFile(path string, tokens map[Kind]entry) error {
	var p persisted
	for k, field := range map[Kind]*string{
		KindDefault: &p.Default, KindAgent: &p.Agent, KindAgentRecovery: &p.AgentRecovery,
		KindReplication: &p.Replication, KindConfigFileServiceRegistration: &p.ConfigFileRegistration, KindDNS: &p.DNS,
	} {
		if e := tokens[k]; e.api {
			*field = e.value
		}
	}
	b, err := json.Marshal(&p)
	if err != nil {
		return err
	}
	// Written aside and renamed, so that a crash leaves the old file or
	// the new one, never half of either.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func (s *Store) get(k Kind) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[k].value
}

// UserToken is the default token: what a request without one uses.
func (s *Store) UserToken() string { return s.get(KindDefault) }

// AgentToken is the token of the agent's own requests, the default token
// when no agent token is set (Consul's fallback).
func (s *Store) AgentToken() string {
	if t := s.get(KindAgent); t != "" {
		return t
	}
	return s.UserToken()
}

// AgentRecoveryToken is the agent_recovery token ("" when unset).
func (s *Store) AgentRecoveryToken() string { return s.get(KindAgentRecovery) }

// ReplicationToken is the replication token ("" when unset).
func (s *Store) ReplicationToken() string { return s.get(KindReplication) }

// ConfigFileRegistrationToken registers config-file services and checks,
// the default token when unset.
func (s *Store) ConfigFileRegistrationToken() string {
	if t := s.get(KindConfigFileServiceRegistration); t != "" {
		return t
	}
	return s.UserToken()
}

// IsAgentRecoveryToken reports whether secret is the agent_recovery
// token, in constant time.
func (s *Store) IsAgentRecoveryToken(secret string) bool {
	rec := s.AgentRecoveryToken()
	return rec != "" && subtle.ConstantTimeCompare([]byte(rec), []byte(secret)) == 1
}

// DNSToken is the token of DNS lookups, the default token when unset.
func (s *Store) DNSToken() string {
	if t := s.get(KindDNS); t != "" {
		return t
	}
	return s.UserToken()
}
