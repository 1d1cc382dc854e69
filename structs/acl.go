package structs

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"
)

// The reserved ACL identifiers. Consul reserves every UUID that starts
// with ACLReservedIDPrefix for its built-in objects; a client may not give
// a token or a policy such an ID.
const (
	ACLReservedIDPrefix = "00000000-0000-0000-0000-0000000000"

	// ACLPolicyGlobalManagementID is the built-in policy that grants
	// everything (Consul's "global-management"). Its rules never change.
	ACLPolicyGlobalManagementID   = "00000000-0000-0000-0000-000000000001"
	ACLPolicyGlobalManagementName = "global-management"
	// ACLPolicyGlobalReadOnlyID is the built-in policy that grants read
	// on every resource (Consul's "builtin/global-read-only").
	ACLPolicyGlobalReadOnlyID   = "00000000-0000-0000-0000-000000000002"
	ACLPolicyGlobalReadOnlyName = "builtin/global-read-only"

	// ACLTokenAnonymousID is the accessor of the anonymous token, the one
	// a request without a token is served as.
	ACLTokenAnonymousID = "00000000-0000-0000-0000-000000000002"

	// ACLBuiltinPrefix starts the names of the templated policies; no
	// user policy may be named so.
	ACLBuiltinPrefix = "builtin/"
)

// ACLPolicyGlobalReadOnlyRules are the rules of the global-read-only
// policy: read on every resource.
const ACLPolicyGlobalReadOnlyRules = `acl = "read"
agent_prefix "" {
  policy = "read"
}
event_prefix "" {
  policy = "read"
}
key_prefix "" {
  policy = "read"
}
keyring = "read"
node_prefix "" {
  policy = "read"
}
operator = "read"
mesh = "read"
peering = "read"
query_prefix "" {
  policy = "read"
}
service_prefix "" {
  policy = "read"
  intentions = "read"
}
session_prefix "" {
  policy = "read"
}`

// ACLPolicyGlobalManagementRules are the rules of the global-management
// policy, as Consul shows them: write on every resource, intentions
// included.
const ACLPolicyGlobalManagementRules = `acl = "write"
agent_prefix "" {
  policy = "write"
}
event_prefix "" {
  policy = "write"
}
identity_prefix "" {
  policy = "write"
  intentions = "write"
}
key_prefix "" {
  policy = "write"
}
keyring = "write"
node_prefix "" {
  policy = "write"
}
operator = "write"
mesh = "write"
peering = "write"
query_prefix "" {
  policy = "write"
}
service_prefix "" {
  policy = "write"
  intentions = "write"
}
session_prefix "" {
  policy = "write"
}
`

// The bounds Consul puts on a token's ExpirationTTL, or on how far its
// ExpirationTime lies past its CreateTime (acl.token_min_expiration_ttl
// and acl.token_max_expiration_ttl default to these).
const (
	DefaultACLTokenMinExpirationTTL = time.Minute
	DefaultACLTokenMaxExpirationTTL = 24 * time.Hour
)

// Length limits of Consul's ACL names.
const (
	ACLPolicyNameMaxLength   = 128
	ACLRoleNameMaxLength     = 256
	ACLIdentityNameMaxLength = 256
)

// Consul's name rules: policy and role names are letters, digits, '-' and
// '_'; service and node identity names are lowercase and neither start nor
// end with '-' or '_', because they become catalog names.
var (
	validACLPolicyName   = regexp.MustCompile(`^[A-Za-z0-9\-_]{1,128}$`)
	validACLRoleName     = regexp.MustCompile(`^[A-Za-z0-9\-_]{1,256}$`)
	validACLIdentityName = regexp.MustCompile(`^[a-z0-9]([a-z0-9\-_]*[a-z0-9])?$`)
)

// ACLLink names a policy or a role from a token or a role, by ID or by
// name. A write resolves names to IDs; the stored link keeps the ID.
type ACLLink struct {
	ID   string
	Name string
}

// ACLTokenPolicyLink links a token to a policy.
type ACLTokenPolicyLink = ACLLink

// ACLTokenRoleLink links a token to a role.
type ACLTokenRoleLink = ACLLink

// ACLRolePolicyLink links a role to a policy.
type ACLRolePolicyLink = ACLLink

// ACLServiceIdentity grants what a service instance and its sidecar need:
// write on the service and on "<name>-sidecar-proxy", read on every
// service and node. Datacenters limits it; empty means every datacenter.
type ACLServiceIdentity struct {
	ServiceName string
	Datacenters []string `json:",omitempty"`
}

// ACLNodeIdentity grants what a node's agent needs: write on the node and
// read on every service, in one datacenter.
type ACLNodeIdentity struct {
	NodeName   string
	Datacenter string
}

// ACLTemplatedPolicy applies one of the built-in templated policies
// (builtin/service, builtin/node, ...), with its variables.
type ACLTemplatedPolicy struct {
	TemplateName      string
	TemplateVariables *ACLTemplatedPolicyVariables `json:",omitempty"`
	Datacenters       []string                     `json:",omitempty"`
}

// ACLTemplatedPolicyVariables are the variables a template renders with.
type ACLTemplatedPolicyVariables struct {
	Name string
}

// ACLToken is a token: the SecretID a client presents, the AccessorID
// that names it everywhere else, and what it grants. Its String and
// LogValue leave SecretID out, so that logging a token never leaks it.
type ACLToken struct {
	AccessorID        string
	SecretID          string
	Description       string
	Policies          []ACLTokenPolicyLink `json:",omitempty"`
	Roles             []ACLTokenRoleLink   `json:",omitempty"`
	ServiceIdentities []ACLServiceIdentity `json:",omitempty"`
	NodeIdentities    []ACLNodeIdentity    `json:",omitempty"`
	TemplatedPolicies []ACLTemplatedPolicy `json:",omitempty"`
	Local             bool
	AuthMethod        string `json:",omitempty"`
	// ExpirationTTL is accepted on create only ("1h" or nanoseconds) and
	// turned into ExpirationTime; it is never stored.
	ExpirationTTL  Duration   `json:",omitempty"`
	ExpirationTime *time.Time `json:",omitempty"`
	CreateTime     time.Time
	Hash           []byte `json:",omitempty"`
	RaftIndex
}

// redactedSecret stands for a SecretID wherever a token is printed.
const redactedSecret = "<hidden>"

// String describes the token without its SecretID.
func (t ACLToken) String() string {
	return fmt.Sprintf("ACLToken{AccessorID:%q SecretID:%s Description:%q Policies:%d Roles:%d Local:%t}",
		t.AccessorID, redactedSecret, t.Description, len(t.Policies), len(t.Roles), t.Local)
}

// GoString is String, so that %#v does not print the SecretID either.
func (t ACLToken) GoString() string { return t.String() }

// LogValue logs the token's AccessorID and description, never its
// SecretID.
func (t ACLToken) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("accessor_id", t.AccessorID),
		slog.String("secret_id", redactedSecret),
		slog.String("description", t.Description),
		slog.Bool("local", t.Local),
	)
}

// HasExpirationTime reports whether the token expires.
func (t *ACLToken) HasExpirationTime() bool {
	return t.ExpirationTime != nil && !t.ExpirationTime.IsZero()
}

// IsExpired reports whether the token has expired at now. An expired token
// resolves as if it did not exist.
func (t *ACLToken) IsExpired(now time.Time) bool {
	return t.HasExpirationTime() && !now.Before(*t.ExpirationTime)
}

// ACLTokenExpiryLimits bounds a new token's lifetime.
type ACLTokenExpiryLimits struct {
	Min, Max time.Duration
}

// ValidateNew checks a token about to be created, with Consul's messages:
// its IDs (if the client chose them), its expiry against lim (zero values
// mean Consul's defaults), its identities and templated policies. It
// changes nothing; now stands for a CreateTime not yet set.
func (t *ACLToken) ValidateNew(now time.Time, lim ACLTokenExpiryLimits) error {
	if t.AccessorID != "" {
		if err := validateACLTokenID(t.AccessorID); err != nil {
			return fmt.Errorf("Invalid Token: AccessorID - %w", err)
		}
	}
	if t.SecretID != "" {
		if err := validateACLTokenID(t.SecretID); err != nil {
			return fmt.Errorf("Invalid Token: SecretID - %w", err)
		}
	}
	if err := t.validateExpiry(now, lim); err != nil {
		return err
	}
	if t.AuthMethod != "" {
		return fmt.Errorf("AuthMethod field is disallowed outside of login")
	}
	return t.validateGrants()
}

// ValidateUpdate checks an update of the token existing, with Consul's
// messages: the SecretID, locality and expiry of a token cannot change.
func (t *ACLToken) ValidateUpdate(existing *ACLToken) error {
	if err := ParseUUID(t.AccessorID); err != nil {
		return fmt.Errorf("AccessorID is not a valid UUID")
	}
	if t.SecretID != "" && t.SecretID != existing.SecretID {
		return fmt.Errorf("Changing a token's SecretID is not permitted")
	}
	if t.Local != existing.Local {
		return fmt.Errorf("Cannot toggle local mode of %s", t.AccessorID)
	}
	if t.AuthMethod != "" && t.AuthMethod != existing.AuthMethod {
		return fmt.Errorf("Cannot change AuthMethod of %s", t.AccessorID)
	}
	if t.ExpirationTTL != 0 {
		return fmt.Errorf("Cannot change expiration time of %s", t.AccessorID)
	}
	if t.HasExpirationTime() && (!existing.HasExpirationTime() || !t.ExpirationTime.Equal(*existing.ExpirationTime)) {
		return fmt.Errorf("Cannot change expiration time of %s", t.AccessorID)
	}
	return t.validateGrants()
}

func (t *ACLToken) validateExpiry(now time.Time, lim ACLTokenExpiryLimits) error {
	if lim.Min == 0 {
		lim.Min = DefaultACLTokenMinExpirationTTL
	}
	if lim.Max == 0 {
		lim.Max = DefaultACLTokenMaxExpirationTTL
	}
	created := t.CreateTime
	if created.IsZero() {
		created = now
	}
	ttl := t.ExpirationTTL.Duration()
	if ttl < 0 {
		return fmt.Errorf("Token Expiration TTL '%s' should be > 0", ttl)
	}
	expires := t.ExpirationTime
	if ttl > 0 {
		if t.HasExpirationTime() {
			return fmt.Errorf("Token Expiration TTL and Expiration Time cannot both be set")
		}
		at := created.Add(ttl)
		expires = &at
	}
	if expires == nil || expires.IsZero() {
		return nil
	}
	if expires.Before(created) {
		return fmt.Errorf("ExpirationTime cannot be before CreateTime")
	}
	in := expires.Sub(created)
	if in > lim.Max {
		return fmt.Errorf("ExpirationTime cannot be more than %s in the future (was %s)", lim.Max, in)
	}
	if in < lim.Min {
		return fmt.Errorf("ExpirationTime cannot be less than %s in the future (was %s)", lim.Min, in)
	}
	return nil
}

func (t *ACLToken) validateGrants() error {
	for _, id := range t.ServiceIdentities {
		if t.Local && len(id.Datacenters) > 0 {
			return fmt.Errorf("Service identity %q cannot specify a list of datacenters on a local token", id.ServiceName)
		}
	}
	return validateACLGrants("token", t.ServiceIdentities, t.NodeIdentities, t.TemplatedPolicies)
}

// validateACLTokenID checks an AccessorID or SecretID a client chose.
func validateACLTokenID(id string) error {
	if strings.HasPrefix(id, ACLReservedIDPrefix) {
		return fmt.Errorf("UUIDs with the prefix %q are reserved", ACLReservedIDPrefix)
	}
	if ParseUUID(id) != nil {
		return fmt.Errorf("not a valid UUID")
	}
	return nil
}

// validateACLGrants checks the identities and templated policies of a
// token or a role (owner names which in the messages, as Consul does).
func validateACLGrants(owner string, svc []ACLServiceIdentity, nodes []ACLNodeIdentity, tpls []ACLTemplatedPolicy) error {
	for _, id := range svc {
		if id.ServiceName == "" {
			return fmt.Errorf("Service identity is missing the service name field on this %s", owner)
		}
		if !ValidACLIdentityName(id.ServiceName) {
			return fmt.Errorf("Service identity %q has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed", id.ServiceName)
		}
	}
	for _, id := range nodes {
		if id.NodeName == "" {
			return fmt.Errorf("Node identity is missing the node name field on this %s", owner)
		}
		if id.Datacenter == "" {
			return fmt.Errorf("Node identity is missing the datacenter field on this %s", owner)
		}
		if !ValidACLIdentityName(id.NodeName) {
			return fmt.Errorf("Node identity has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed")
		}
	}
	for _, tp := range tpls {
		if err := tp.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// ValidACLIdentityName reports whether name may name a service or node
// identity (or a builtin/service or builtin/node template's Name).
func ValidACLIdentityName(name string) bool {
	return len(name) <= ACLIdentityNameMaxLength && validACLIdentityName.MatchString(name)
}

// ACLPolicy is a named set of rules in Consul's rule language. Rules are
// kept as the text the client sent (HCL or JSON); package acl parses them.
type ACLPolicy struct {
	ID          string
	Name        string
	Description string
	Rules       string
	// Datacenters limits where the policy applies; empty means every
	// datacenter.
	Datacenters []string
	Hash        []byte
	RaftIndex
}

// Validate checks the policy's name, with Consul's messages. Its rules are
// checked by acl.Parse, which structs cannot import.
func (p *ACLPolicy) Validate() error {
	if p.Name == "" {
		return fmt.Errorf("Invalid Policy: no Name is set")
	}
	if !validACLPolicyName.MatchString(p.Name) {
		return fmt.Errorf("Invalid Policy: invalid Name. Only alphanumeric characters, '-' and '_' are allowed")
	}
	return nil
}

// ValidateGlobalManagementChange refuses what Consul refuses on the
// built-in global-management and global-read-only policies: a new name
// or new rules.
func (p *ACLPolicy) ValidateGlobalManagementChange(existing *ACLPolicy) error {
	var which string
	switch p.ID {
	case ACLPolicyGlobalManagementID:
		which = "global-management"
	case ACLPolicyGlobalReadOnlyID:
		which = "global-read-only"
	default:
		return nil
	}
	if p.Name != existing.Name {
		return fmt.Errorf("Changing the Name for the builtin %s policy is not permitted", which)
	}
	if p.Rules != existing.Rules {
		return fmt.Errorf("Changing the Rules for the builtin %s policy is not permitted", which)
	}
	return nil
}

// ACLBuiltinPolicies are the policies every cluster has, created by the
// leader when missing.
func ACLBuiltinPolicies() []*ACLPolicy {
	return []*ACLPolicy{ACLGlobalManagementPolicy(), {
		ID:          ACLPolicyGlobalReadOnlyID,
		Name:        ACLPolicyGlobalReadOnlyName,
		Description: "Builtin Policy that grants unlimited read-only access to all components",
		Rules:       ACLPolicyGlobalReadOnlyRules,
	}}
}

// ACLGlobalManagementPolicy is the built-in global-management policy as a
// fresh value, which a bootstrap stores.
func ACLGlobalManagementPolicy() *ACLPolicy {
	return &ACLPolicy{
		ID:          ACLPolicyGlobalManagementID,
		Name:        ACLPolicyGlobalManagementName,
		Description: "Builtin Policy that grants unlimited access",
		Rules:       ACLPolicyGlobalManagementRules,
	}
}

// ACLRole is a named bundle of policies and identities that tokens link to.
type ACLRole struct {
	ID                string
	Name              string
	Description       string
	Policies          []ACLRolePolicyLink  `json:",omitempty"`
	ServiceIdentities []ACLServiceIdentity `json:",omitempty"`
	NodeIdentities    []ACLNodeIdentity    `json:",omitempty"`
	TemplatedPolicies []ACLTemplatedPolicy `json:",omitempty"`
	Hash              []byte
	RaftIndex
}

// Validate checks the role's name, identities and templated policies, with
// Consul's messages.
func (r *ACLRole) Validate() error {
	if r.Name == "" {
		return fmt.Errorf("Invalid Role: no Name is set")
	}
	if !validACLRoleName.MatchString(r.Name) {
		return fmt.Errorf("Invalid Role: invalid Name. Only alphanumeric characters, '-' and '_' are allowed")
	}
	return validateACLGrants("role", r.ServiceIdentities, r.NodeIdentities, r.TemplatedPolicies)
}
