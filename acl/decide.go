package acl

import (
	"errors"
	"fmt"
)

// ErrUnknownCheck is Decide's answer to a resource and access level that
// no decision answers ("write" on "keyring" is one, "list" on "agent" is
// not).
var ErrUnknownCheck = errors.New("acl: unknown check")

// Decide answers access (read or write) on res, segment naming the node,
// service, agent, key, ... where res has segments: the one question an
// edge that does not know which method to call asks (ACL.Authorize, an
// agent's own endpoints).
func (a *Authorizer) Decide(res Resource, access Access, segment string) (Decision, error) {
	type key struct {
		res    Resource
		access Access
	}
	global := map[key]func() Decision{
		{ResourceACL, AccessRead}: a.ACLRead, {ResourceACL, AccessWrite}: a.ACLWrite,
		{ResourceOperator, AccessRead}: a.OperatorRead, {ResourceOperator, AccessWrite}: a.OperatorWrite,
		{ResourceKeyring, AccessRead}: a.KeyringRead, {ResourceKeyring, AccessWrite}: a.KeyringWrite,
		{ResourceMesh, AccessRead}: a.MeshRead, {ResourceMesh, AccessWrite}: a.MeshWrite,
		{ResourcePeering, AccessRead}: a.PeeringRead, {ResourcePeering, AccessWrite}: a.PeeringWrite,
	}
	if f, ok := global[key{res, access}]; ok {
		return f(), nil
	}
	var segmented map[Resource]func(string) Decision
	switch access {
	case AccessRead:
		segmented = map[Resource]func(string) Decision{
			ResourceAgent: a.AgentRead, ResourceEvent: a.EventRead, ResourceKey: a.KeyRead, ResourceNode: a.NodeRead,
			ResourceQuery: a.QueryRead, ResourceService: a.ServiceRead, ResourceSession: a.SessionRead,
			ResourceIntention: a.IntentionRead, ResourceIdentity: a.IdentityRead,
		}
	case AccessWrite:
		segmented = map[Resource]func(string) Decision{
			ResourceAgent: a.AgentWrite, ResourceEvent: a.EventWrite, ResourceKey: a.KeyWrite, ResourceNode: a.NodeWrite,
			ResourceQuery: a.QueryWrite, ResourceService: a.ServiceWrite, ResourceSession: a.SessionWrite,
			ResourceIntention: a.IntentionWrite, ResourceIdentity: a.IdentityWrite,
		}
	}
	if f, ok := segmented[res]; ok {
		return f(segment), nil
	}
	return Deny, fmt.Errorf("%w: %s on %q", ErrUnknownCheck, access, res)
}
