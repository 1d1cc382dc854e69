package structs

import "slices"

// The envelopes of the ACL RPC methods (endpoints_acl.go) and the Raft
// commands that store tokens, policies and roles. The commands carry no
// WriteRequest: the caller's token has no place in the log of what changed.

// ACLBootstrapRequest asks for the first management token. BootstrapSecret,
// when set, is the SecretID to give it (consul/api's BootstrapWithToken).
type ACLBootstrapRequest struct {
	BootstrapSecret string
	WriteRequest
}

// ACLBootstrapCommand is the Raft command of a bootstrap: the token to
// store and the reset index the leader read; the FSM refuses it when the
// stored reset index moved since.
type ACLBootstrapCommand struct {
	Token      *ACLToken
	ResetIndex uint64
}

// ACLTokenSetRequest creates (Create) or updates a token. For a clone,
// ACLToken.AccessorID names the token to copy and ACLToken.Description,
// when set, replaces its description. (Not "Token": that is the caller's,
// in WriteRequest.)
type ACLTokenSetRequest struct {
	ACLToken ACLToken
	Create   bool
	WriteRequest
}

// ACLTokenDeleteRequest deletes the token with AccessorID TokenID.
type ACLTokenDeleteRequest struct {
	TokenID string
	WriteRequest
}

// ACLTokenGetRequest reads one token, by AccessorID or, with BySecret, by
// SecretID (/v1/acl/token/self).
type ACLTokenGetRequest struct {
	TokenID  string
	BySecret bool
	QueryOptions
}

// ACLTokenResponse is one token, nil when there is none.
type ACLTokenResponse struct {
	Token *ACLToken
	QueryMeta
}

// ACLTokenListRequest lists tokens, those linking Policy or Role, or
// created by AuthMethod, or granting ServiceName, when set.
type ACLTokenListRequest struct {
	Policy      string
	Role        string
	AuthMethod  string
	ServiceName string
	QueryOptions
}

// ACLTokenListResponse lists tokens. Their SecretIDs are redacted unless
// the caller may write ACLs, as Consul does.
type ACLTokenListResponse struct {
	Tokens []*ACLToken
	QueryMeta
}

// ACLTokenBatchSetRequest is the Raft command that stores tokens.
type ACLTokenBatchSetRequest struct {
	Tokens []*ACLToken
}

// ACLTokenBatchDeleteRequest is the Raft command that deletes tokens by
// AccessorID.
type ACLTokenBatchDeleteRequest struct {
	TokenIDs []string
}

// ACLPolicySetRequest creates (an empty ID) or updates a policy.
type ACLPolicySetRequest struct {
	Policy ACLPolicy
	WriteRequest
}

// ACLPolicyDeleteRequest deletes a policy.
type ACLPolicyDeleteRequest struct {
	PolicyID string
	WriteRequest
}

// ACLPolicyGetRequest reads a policy by ID, or by name when PolicyName is
// set.
type ACLPolicyGetRequest struct {
	PolicyID   string
	PolicyName string
	QueryOptions
}

// ACLPolicyResponse is one policy, nil when there is none.
type ACLPolicyResponse struct {
	Policy *ACLPolicy
	QueryMeta
}

// ACLPolicyListResponse lists every policy.
type ACLPolicyListResponse struct {
	Policies []*ACLPolicy
	QueryMeta
}

// ACLPolicyBatchSetRequest is the Raft command that stores policies.
type ACLPolicyBatchSetRequest struct {
	Policies []*ACLPolicy
}

// ACLPolicyBatchDeleteRequest is the Raft command that deletes policies.
type ACLPolicyBatchDeleteRequest struct {
	PolicyIDs []string
}

// ACLRoleSetRequest creates (an empty ID) or updates a role.
type ACLRoleSetRequest struct {
	Role ACLRole
	WriteRequest
}

// ACLRoleDeleteRequest deletes a role.
type ACLRoleDeleteRequest struct {
	RoleID string
	WriteRequest
}

// ACLRoleGetRequest reads a role by ID, or by name when RoleName is set.
type ACLRoleGetRequest struct {
	RoleID   string
	RoleName string
	QueryOptions
}

// ACLRoleResponse is one role, nil when there is none.
type ACLRoleResponse struct {
	Role *ACLRole
	QueryMeta
}

// ACLRoleListRequest lists roles, those linking Policy when set.
type ACLRoleListRequest struct {
	Policy string
	QueryOptions
}

// ACLRoleListResponse lists roles.
type ACLRoleListResponse struct {
	Roles []*ACLRole
	QueryMeta
}

// ACLRoleBatchSetRequest is the Raft command that stores roles.
type ACLRoleBatchSetRequest struct {
	Roles []*ACLRole
}

// ACLRoleBatchDeleteRequest is the Raft command that deletes roles.
type ACLRoleBatchDeleteRequest struct {
	RoleIDs []string
}

// ACLAuthorizationRequest asks whether the caller's token allows Access
// ("read", "write") on Resource (Consul's names: "agent", "key", ...),
// Segment naming the node, key or service where the resource has them.
type ACLAuthorizationRequest struct {
	Resource string
	Segment  string
	Access   string
}

// ACLAuthorizeRequest asks for several decisions at once, for edges that
// hold no authorizer of their own (an agent's /v1/agent/token).
type ACLAuthorizeRequest struct {
	Requests []ACLAuthorizationRequest
	QueryOptions
}

// ACLAuthorizationResponse answers one ACLAuthorizationRequest.
type ACLAuthorizationResponse struct {
	ACLAuthorizationRequest
	Allow bool
}

// ACLAuthorizeResponse answers every request, in order, with the
// caller's AccessorID for denials.
type ACLAuthorizeResponse struct {
	AccessorID string
	Responses  []ACLAuthorizationResponse
	QueryMeta
}

// Clone returns a deep copy of the token (nil for nil).
func (t *ACLToken) Clone() *ACLToken {
	if t == nil {
		return nil
	}
	c := *t
	c.Policies = slices.Clone(t.Policies)
	c.Roles = slices.Clone(t.Roles)
	c.ServiceIdentities = cloneServiceIdentities(t.ServiceIdentities)
	c.NodeIdentities = slices.Clone(t.NodeIdentities)
	c.TemplatedPolicies = cloneTemplatedPolicies(t.TemplatedPolicies)
	if t.ExpirationTime != nil {
		e := *t.ExpirationTime
		c.ExpirationTime = &e
	}
	c.Hash = slices.Clone(t.Hash)
	return &c
}

// Redacted is a copy of the token with its SecretID replaced by Consul's
// "<hidden>", for callers that may read but not write ACLs.
func (t *ACLToken) Redacted() *ACLToken {
	c := t.Clone()
	c.SecretID = redactedSecret
	return c
}

// Clone returns a deep copy of the policy (nil for nil).
func (p *ACLPolicy) Clone() *ACLPolicy {
	if p == nil {
		return nil
	}
	c := *p
	c.Datacenters = slices.Clone(p.Datacenters)
	c.Hash = slices.Clone(p.Hash)
	return &c
}

// Clone returns a deep copy of the role (nil for nil).
func (r *ACLRole) Clone() *ACLRole {
	if r == nil {
		return nil
	}
	c := *r
	c.Policies = slices.Clone(r.Policies)
	c.ServiceIdentities = cloneServiceIdentities(r.ServiceIdentities)
	c.NodeIdentities = slices.Clone(r.NodeIdentities)
	c.TemplatedPolicies = cloneTemplatedPolicies(r.TemplatedPolicies)
	c.Hash = slices.Clone(r.Hash)
	return &c
}

func cloneServiceIdentities(in []ACLServiceIdentity) []ACLServiceIdentity {
	if in == nil {
		return nil
	}
	out := make([]ACLServiceIdentity, len(in))
	for i, id := range in {
		id.Datacenters = slices.Clone(id.Datacenters)
		out[i] = id
	}
	return out
}

func cloneTemplatedPolicies(in []ACLTemplatedPolicy) []ACLTemplatedPolicy {
	if in == nil {
		return nil
	}
	out := make([]ACLTemplatedPolicy, len(in))
	for i, tp := range in {
		if tp.TemplateVariables != nil {
			v := *tp.TemplateVariables
			tp.TemplateVariables = &v
		}
		tp.Datacenters = slices.Clone(tp.Datacenters)
		out[i] = tp
	}
	return out
}

// ACLTokenResolveRequest resolves the caller's token (QueryOptions.Token;
// "" is the anonymous token).
type ACLTokenResolveRequest struct {
	QueryOptions
}

// ACLTokenResolveResponse is what a client agent needs to compile the
// caller's token itself: the token as stored (its SecretID redacted: the
// caller has it) and the servers' acl.default_policy, under which the
// agent compiles it so that it decides as the servers do.
type ACLTokenResolveResponse struct {
	Token         *ACLToken
	DefaultPolicy string
	QueryMeta
}

// ACLPolicyBatchGetRequest reads the policies with the IDs PolicyIDs.
type ACLPolicyBatchGetRequest struct {
	PolicyIDs []string
	QueryOptions
}

// ACLPolicyBatchResponse holds the policies found and readable by the
// caller; an ID missing from it names no such policy (or one the caller
// may not read).
type ACLPolicyBatchResponse struct {
	Policies []*ACLPolicy
	QueryMeta
}

// ACLRoleBatchGetRequest reads the roles with the IDs RoleIDs.
type ACLRoleBatchGetRequest struct {
	RoleIDs []string
	QueryOptions
}

// ACLRoleBatchResponse holds the roles found and readable by the caller,
// as ACLPolicyBatchResponse.
type ACLRoleBatchResponse struct {
	Roles []*ACLRole
	QueryMeta
}
