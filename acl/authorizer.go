package acl

// Decision is an Authorizer's answer.
type Decision int

// The answers. A layer of an Authorizer may also leave a question
// undecided, for the layer under it; the Authorizer itself never does.
const (
	Deny Decision = iota
	Allow

	undecided Decision = -1
)

// String is "allow" or "deny".
func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "default"
}

// queryKind says how a question reads a segmented resource.
type queryKind int

const (
	queryOne         queryKind = iota // one segment
	queryAll                          // every segment
	queryAny                          // some segment
	queryWritePrefix                  // everything under a prefix
	queryDefault                      // IntentionDefaultAllow: no rule decides it
)

// query is one question to a layer.
type query struct {
	res     Resource
	access  Access
	segment string
	kind    queryKind
}

// layer is one link of an Authorizer's chain: a token's compiled rules or
// a static policy (the default policy, management).
type layer interface {
	decide(q query) Decision
}

// Authorizer answers every question Consul's endpoints ask of a token.
// It is a chain of layers, as Consul's chained authorizers are: the
// token's merged rules first, then the default policy; the first layer
// that decides answers. An Authorizer is immutable and safe for
// concurrent use.
type Authorizer struct {
	accessorID string
	layers     []layer
}

// AccessorID is the accessor of the token the Authorizer was compiled for,
// named in its denials.
func (a *Authorizer) AccessorID() string { return a.accessorID }

func (a *Authorizer) decide(q query) Decision {
	for _, l := range a.layers {
		if d := l.decide(q); d != undecided {
			return d
		}
	}
	return Deny
}

func (a *Authorizer) one(res Resource, access Access, segment string) Decision {
	return a.decide(query{res: res, access: access, segment: segment})
}

func (a *Authorizer) global(res Resource, access Access) Decision {
	return a.decide(query{res: res, access: access})
}

// ACLRead: may the token read tokens, policies and roles (acl = "read").
func (a *Authorizer) ACLRead() Decision { return a.global(ResourceACL, AccessRead) }

// ACLWrite: may the token change tokens, policies and roles.
func (a *Authorizer) ACLWrite() Decision { return a.global(ResourceACL, AccessWrite) }

// Snapshot: may the token save or restore a snapshot, which holds every
// secret; Consul asks acl = "write" for it.
func (a *Authorizer) Snapshot() Decision { return a.global(ResourceACL, AccessWrite) }

// AgentRead: may the token read the agent endpoints of node.
func (a *Authorizer) AgentRead(node string) Decision {
	return a.one(ResourceAgent, AccessRead, node)
}

// AgentWrite: may the token change the agent of node (join, leave, reload).
func (a *Authorizer) AgentWrite(node string) Decision {
	return a.one(ResourceAgent, AccessWrite, node)
}

// EventRead: may the token list user events named name.
func (a *Authorizer) EventRead(name string) Decision {
	return a.one(ResourceEvent, AccessRead, name)
}

// EventWrite: may the token fire a user event named name.
func (a *Authorizer) EventWrite(name string) Decision {
	return a.one(ResourceEvent, AccessWrite, name)
}

// IdentityRead: may the token read the workload identity name.
func (a *Authorizer) IdentityRead(name string) Decision {
	return a.one(ResourceIdentity, AccessRead, name)
}

// IdentityWrite: may the token write the workload identity name.
func (a *Authorizer) IdentityWrite(name string) Decision {
	return a.one(ResourceIdentity, AccessWrite, name)
}

// IdentityReadAll: may the token read every workload identity.
func (a *Authorizer) IdentityReadAll() Decision {
	return a.decide(query{res: ResourceIdentity, access: AccessRead, kind: queryAll})
}

// IdentityWriteAny: may the token write some workload identity.
func (a *Authorizer) IdentityWriteAny() Decision {
	return a.decide(query{res: ResourceIdentity, access: AccessWrite, kind: queryAny})
}

// IntentionRead: may the token read intentions whose destination is
// service. "*" asks whether it may read some intention, as Consul's list
// does before it filters.
func (a *Authorizer) IntentionRead(service string) Decision {
	if service == "*" {
		return a.decide(query{res: ResourceIntention, access: AccessRead, kind: queryAny})
	}
	return a.one(ResourceIntention, AccessRead, service)
}

// IntentionWrite: may the token create, change or delete intentions whose
// destination is service. "*" (a wildcard destination) needs write on
// every service.
func (a *Authorizer) IntentionWrite(service string) Decision {
	if service == "*" {
		return a.decide(query{res: ResourceIntention, access: AccessWrite, kind: queryAll})
	}
	return a.one(ResourceIntention, AccessWrite, service)
}

// IntentionDefaultAllow: does a connection that no intention matches get
// through. No rule decides it: the default policy does.
func (a *Authorizer) IntentionDefaultAllow() Decision {
	return a.decide(query{res: ResourceIntention, kind: queryDefault})
}

// KeyRead: may the token read key.
func (a *Authorizer) KeyRead(key string) Decision { return a.one(ResourceKey, AccessRead, key) }

// KeyList: may the token list the keys under prefix (`list`, with
// acl.enable_key_list_policy).
func (a *Authorizer) KeyList(prefix string) Decision {
	return a.one(ResourceKey, AccessList, prefix)
}

// KeyWrite: may the token write or delete key.
func (a *Authorizer) KeyWrite(key string) Decision { return a.one(ResourceKey, AccessWrite, key) }

// KeyWritePrefix: may the token delete everything under prefix (a
// recursive delete): write on the prefix and on every rule inside it.
func (a *Authorizer) KeyWritePrefix(prefix string) Decision {
	return a.decide(query{res: ResourceKey, access: AccessWrite, segment: prefix, kind: queryWritePrefix})
}

// KeyringRead: may the token list the gossip keyring.
func (a *Authorizer) KeyringRead() Decision { return a.global(ResourceKeyring, AccessRead) }

// KeyringWrite: may the token change the gossip keyring.
func (a *Authorizer) KeyringWrite() Decision { return a.global(ResourceKeyring, AccessWrite) }

// MeshRead: may the token read mesh-wide configuration; without a mesh
// rule, the operator rule decides.
func (a *Authorizer) MeshRead() Decision { return a.global(ResourceMesh, AccessRead) }

// MeshWrite: may the token change mesh-wide configuration (proxy-defaults,
// mesh config entries); without a mesh rule, the operator rule decides.
func (a *Authorizer) MeshWrite() Decision { return a.global(ResourceMesh, AccessWrite) }

// PeeringRead: may the token read peerings; without a peering rule, the
// operator rule decides.
func (a *Authorizer) PeeringRead() Decision { return a.global(ResourcePeering, AccessRead) }

// PeeringWrite: may the token change peerings; without a peering rule,
// the operator rule decides.
func (a *Authorizer) PeeringWrite() Decision { return a.global(ResourcePeering, AccessWrite) }

// NodeRead: may the token see node in the catalog.
func (a *Authorizer) NodeRead(node string) Decision { return a.one(ResourceNode, AccessRead, node) }

// NodeReadAll: may the token see every node.
func (a *Authorizer) NodeReadAll() Decision {
	return a.decide(query{res: ResourceNode, access: AccessRead, kind: queryAll})
}

// NodeWrite: may the token register or deregister node.
func (a *Authorizer) NodeWrite(node string) Decision {
	return a.one(ResourceNode, AccessWrite, node)
}

// OperatorRead: may the token read operator state (Raft, autopilot).
func (a *Authorizer) OperatorRead() Decision { return a.global(ResourceOperator, AccessRead) }

// OperatorWrite: may the token change operator state.
func (a *Authorizer) OperatorWrite() Decision { return a.global(ResourceOperator, AccessWrite) }

// QueryRead: may the token read the prepared query named name.
func (a *Authorizer) QueryRead(name string) Decision {
	return a.one(ResourceQuery, AccessRead, name)
}

// QueryWrite: may the token create, change or delete the prepared query
// named name.
func (a *Authorizer) QueryWrite(name string) Decision {
	return a.one(ResourceQuery, AccessWrite, name)
}

// ServiceRead: may the token see service in the catalog.
func (a *Authorizer) ServiceRead(service string) Decision {
	return a.one(ResourceService, AccessRead, service)
}

// ServiceReadAll: may the token see every service.
func (a *Authorizer) ServiceReadAll() Decision {
	return a.decide(query{res: ResourceService, access: AccessRead, kind: queryAll})
}

// ServiceWrite: may the token register service (or a proxy for it, or
// ask for its leaf certificate).
func (a *Authorizer) ServiceWrite(service string) Decision {
	return a.one(ResourceService, AccessWrite, service)
}

// ServiceWriteAny: may the token write some service.
func (a *Authorizer) ServiceWriteAny() Decision {
	return a.decide(query{res: ResourceService, access: AccessWrite, kind: queryAny})
}

// SessionRead: may the token read the sessions of node.
func (a *Authorizer) SessionRead(node string) Decision {
	return a.one(ResourceSession, AccessRead, node)
}

// SessionWrite: may the token create or destroy sessions on node.
func (a *Authorizer) SessionWrite(node string) Decision {
	return a.one(ResourceSession, AccessWrite, node)
}

// static is a layer that decides everything alike: Consul's allow-all,
// deny-all and manage-all authorizers. ACL management (and snapshots,
// which are acl = "write") is granted only by manage-all: the default
// policy "allow" does not hand out tokens.
type static struct {
	allow, manage bool
}

func (s static) decide(q query) Decision {
	grant := s.allow
	if q.res == ResourceACL {
		grant = s.manage
	}
	if grant {
		return Allow
	}
	return Deny
}

// AllowAll is the default policy "allow": everything but ACL management.
func AllowAll() *Authorizer { return &Authorizer{layers: []layer{static{allow: true}}} }

// DenyAll is the default policy "deny".
func DenyAll() *Authorizer { return &Authorizer{layers: []layer{static{}}} }

// ManageAll allows everything, ACL management included: the authorizer of
// the agent recovery token and of Consul's management tokens resolved
// without a policy lookup.
func ManageAll() *Authorizer {
	return &Authorizer{layers: []layer{static{allow: true, manage: true}}}
}
