package structs

// The internal RPC methods of ACLs (/v1/acl/...; see endpoints.go for the
// conventions). Each checks the caller's token itself: reads need
// acl:read, writes acl:write, except bootstrap (no token) and reading
// one's own token.
var (
	// MethodACLBootstrap creates the first management token, once per
	// cluster (Consul's reset procedure allows another).
	MethodACLBootstrap = writeMethod[ACLBootstrapRequest, ACLToken]("ACL.BootstrapTokens")
	// MethodACLTokenSet creates or updates a token; the reply is the token
	// as stored.
	MethodACLTokenSet = writeMethod[ACLTokenSetRequest, ACLToken]("ACL.TokenSet")
	// MethodACLTokenClone copies a token under new IDs.
	MethodACLTokenClone = writeMethod[ACLTokenSetRequest, ACLToken]("ACL.TokenClone")
	// MethodACLTokenDelete deletes a token.
	MethodACLTokenDelete = writeMethod[ACLTokenDeleteRequest, struct{}]("ACL.TokenDelete")
	// MethodACLTokenRead reads a token by AccessorID, or the caller's own.
	MethodACLTokenRead = readMethod[ACLTokenGetRequest, ACLTokenResponse]("ACL.TokenRead")
	// MethodACLTokenList lists tokens.
	MethodACLTokenList = readMethod[ACLTokenListRequest, ACLTokenListResponse]("ACL.TokenList")

	// MethodACLPolicySet creates or updates a policy.
	MethodACLPolicySet = writeMethod[ACLPolicySetRequest, ACLPolicy]("ACL.PolicySet")
	// MethodACLPolicyDelete deletes a policy.
	MethodACLPolicyDelete = writeMethod[ACLPolicyDeleteRequest, struct{}]("ACL.PolicyDelete")
	// MethodACLPolicyRead reads a policy by ID or name.
	MethodACLPolicyRead = readMethod[ACLPolicyGetRequest, ACLPolicyResponse]("ACL.PolicyRead")
	// MethodACLPolicyList lists every policy.
	MethodACLPolicyList = readMethod[DCSpecificRequest, ACLPolicyListResponse]("ACL.PolicyList")

	// MethodACLRoleSet creates or updates a role.
	MethodACLRoleSet = writeMethod[ACLRoleSetRequest, ACLRole]("ACL.RoleSet")
	// MethodACLRoleDelete deletes a role.
	MethodACLRoleDelete = writeMethod[ACLRoleDeleteRequest, struct{}]("ACL.RoleDelete")
	// MethodACLRoleRead reads a role by ID or name.
	MethodACLRoleRead = readMethod[ACLRoleGetRequest, ACLRoleResponse]("ACL.RoleRead")
	// MethodACLRoleList lists roles.
	MethodACLRoleList = readMethod[ACLRoleListRequest, ACLRoleListResponse]("ACL.RoleList")

	// MethodACLAuthorize answers access questions about the caller's
	// token, for edges without an authorizer of their own.
	MethodACLAuthorize = readMethod[ACLAuthorizeRequest, ACLAuthorizeResponse]("ACL.Authorize")

	// MethodACLTokenResolve resolves the caller's own token for a client
	// agent's cache: what the token links, as the server sees it, and the
	// servers' default policy. Any token may resolve itself.
	MethodACLTokenResolve = readMethod[ACLTokenResolveRequest, ACLTokenResolveResponse]("ACL.TokenResolve")
	// MethodACLPolicyResolve reads policies by ID for a client agent's
	// cache: those the caller's token links (directly or through its
	// roles), or any with acl:read.
	MethodACLPolicyResolve = readMethod[ACLPolicyBatchGetRequest, ACLPolicyBatchResponse]("ACL.PolicyResolve")
	// MethodACLRoleResolve reads roles by ID, as MethodACLPolicyResolve
	// reads policies.
	MethodACLRoleResolve = readMethod[ACLRoleBatchGetRequest, ACLRoleBatchResponse]("ACL.RoleResolve")
)

// Sentinel errors of ACLs that cross the wire; their texts are Consul's.
var (
	// ErrACLDisabled: the cluster runs without ACLs (HTTP 401).
	ErrACLDisabled = newError("ACLDisabled", CodeFailedPrecondition, "ACL support disabled")
	// ErrACLNotFound: no token has the SecretID presented, or the token a
	// read names does not exist (HTTP 403, as Consul answers).
	ErrACLNotFound = newError("ACLNotFound", CodePermissionDenied, "ACL not found")
	// ErrACLBootstrapNotAllowed: the cluster was bootstrapped already; the
	// error wrapping it names the reset index.
	ErrACLBootstrapNotAllowed = newError("ACLBootstrapNotAllowed", CodePermissionDenied, "ACL bootstrap no longer allowed")
	// ErrACLBootstrapInvalidResetIndex: a bootstrap raced another and the
	// reset index it read moved.
	ErrACLBootstrapInvalidResetIndex = newError("ACLBootstrapInvalidResetIndex", CodeInvalidArgument, "Invalid bootstrap reset index")
)

func aclMethods() []MethodInfo {
	return []MethodInfo{
		MethodACLBootstrap, MethodACLTokenSet, MethodACLTokenClone, MethodACLTokenDelete,
		MethodACLTokenRead, MethodACLTokenList,
		MethodACLPolicySet, MethodACLPolicyDelete, MethodACLPolicyRead, MethodACLPolicyList,
		MethodACLRoleSet, MethodACLRoleDelete, MethodACLRoleRead, MethodACLRoleList,
		MethodACLAuthorize, MethodACLTokenResolve, MethodACLPolicyResolve, MethodACLRoleResolve,
	}
}
