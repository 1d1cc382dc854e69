package acl

import (
	"fmt"
	"slices"

	"github.com/trellis-mesh/trellis/structs"
)

// policyLayer is the merged rules of one token.
type policyLayer struct {
	acl, keyring, operator, mesh, peering Access
	tables                                map[Resource]*table
}

// merge folds several rule documents into one layer: for each segment the
// strongest level wins (deny, write, list, read); a service rule without
// `intentions` grants read on its intentions for read or write and
// denies them for deny, as Consul derives it.
func merge(docs []*Rules) *policyLayer {
	p := &policyLayer{tables: make(map[Resource]*table)}
	for _, r := range []Resource{ResourceAgent, ResourceEvent, ResourceIdentity, ResourceIntention,
		ResourceKey, ResourceNode, ResourceQuery, ResourceService, ResourceSession} {
		p.tables[r] = newTable()
	}
	explicit := newTable() // the intentions levels services set themselves
	for _, d := range docs {
		for _, g := range []struct {
			dst *Access
			v   Access
		}{{&p.acl, d.ACL}, {&p.keyring, d.Keyring}, {&p.operator, d.Operator}, {&p.mesh, d.Mesh}, {&p.peering, d.Peering}} {
			if precedence(g.v) > precedence(*g.dst) {
				*g.dst = g.v
			}
		}
		for res, rules := range map[Resource][]Rule{
			ResourceAgent: d.Agents, ResourceEvent: d.Events, ResourceIdentity: d.Identities, ResourceKey: d.Keys,
			ResourceNode: d.Nodes, ResourceQuery: d.Queries, ResourceService: d.Services, ResourceSession: d.Sessions,
		} {
			for _, r := range rules {
				p.tables[res].add(r.Segment, r.Prefix, r.Access)
				if res == ResourceService && r.Intentions != AccessUnknown {
					explicit.add(r.Segment, r.Prefix, r.Intentions)
				}
			}
		}
	}
	svc, in := p.tables[ResourceService], p.tables[ResourceIntention]
	for _, e := range []struct {
		prefix bool
		rules  map[string]Access
		set    map[string]Access
	}{{false, svc.exact, explicit.exact}, {true, svc.prefix, explicit.prefix}} {
		for seg, a := range e.rules {
			if x, ok := e.set[seg]; ok {
				in.add(seg, e.prefix, x)
				continue
			}
			in.add(seg, e.prefix, derivedIntentions(a))
		}
	}
	for _, t := range p.tables {
		t.seal()
	}
	return p
}

func derivedIntentions(service Access) Access {
	if service == AccessDeny {
		return AccessDeny
	}
	return AccessRead
}

func (p *policyLayer) decide(q query) Decision {
	switch q.res {
	case ResourceACL:
		return enforce(p.acl, q.access)
	case ResourceKeyring:
		return enforce(p.keyring, q.access)
	case ResourceOperator:
		return enforce(p.operator, q.access)
	case ResourceMesh:
		return p.orOperator(p.mesh, q.access)
	case ResourcePeering:
		return p.orOperator(p.peering, q.access)
	}
	t, ok := p.tables[q.res]
	if !ok {
		return undecided
	}
	switch q.kind {
	case queryAll:
		return t.all(q.access)
	case queryAny:
		return t.any(q.access)
	case queryWritePrefix:
		return t.writePrefix(q.segment)
	case queryDefault:
		return undecided
	}
	a, _ := t.lookup(q.segment)
	return enforce(a, q.access)
}

// orOperator decides mesh and peering: their own rule if the token has
// one, else its operator rule, as Consul documents.
func (p *policyLayer) orOperator(own, required Access) Decision {
	if own != AccessUnknown {
		return enforce(own, required)
	}
	return enforce(p.operator, required)
}

// NewPolicyAuthorizer merges rule documents into an Authorizer over parent
// (AllowAll or DenyAll for the default policy): what the rules do not
// decide, parent does. accessorID names the token in denials.
func NewPolicyAuthorizer(accessorID string, parent *Authorizer, docs ...*Rules) *Authorizer {
	layers := append([]layer{merge(docs)}, parent.layers...)
	return &Authorizer{accessorID: accessorID, layers: layers}
}

// DefaultPolicy returns the Authorizer of acl.default_policy ("allow" or
// "deny").
func DefaultPolicy(policy string) (*Authorizer, error) {
	switch policy {
	case "allow":
		return AllowAll(), nil
	case "deny":
		return DenyAll(), nil
	}
	return nil, fmt.Errorf("acl: invalid default policy %q: want \"allow\" or \"deny\"", policy)
}

// Grants is everything one token grants, resolved by the caller: its own
// policies and those of its roles, and the identities and templated
// policies of both.
type Grants struct {
	Policies          []*structs.ACLPolicy
	ServiceIdentities []structs.ACLServiceIdentity
	NodeIdentities    []structs.ACLNodeIdentity
	TemplatedPolicies []structs.ACLTemplatedPolicy
}

// Config is what Compile needs.
type Config struct {
	// AccessorID names the token in denials.
	AccessorID string
	// Datacenter is the local datacenter: policies, identities and
	// templated policies limited to other datacenters grant nothing here.
	Datacenter string
	// Default is the layer under the token's rules; nil means DenyAll.
	Default *Authorizer
	Grants
}

// Compile builds a token's Authorizer: the rules of its policies, the
// rules its service identities, node identities and templated policies
// stand for (builtin/service, builtin/node, ...), merged over Default.
// A policy whose rules do not parse fails the whole compile, naming the
// policy, rather than silently granting less.
func Compile(cfg Config) (*Authorizer, error) {
	parent := cfg.Default
	if parent == nil {
		parent = DenyAll()
	}
	var docs []*Rules
	for _, p := range cfg.Policies {
		if !inDatacenter(p.Datacenters, cfg.Datacenter) {
			continue
		}
		r, err := Parse(p.Rules)
		if err != nil {
			return nil, fmt.Errorf("acl: policy %q: %w", p.Name, err)
		}
		docs = append(docs, r)
	}
	synth, err := synthesized(cfg.Grants, cfg.Datacenter)
	if err != nil {
		return nil, err
	}
	return NewPolicyAuthorizer(cfg.AccessorID, parent, append(docs, synth...)...), nil
}

// synthesized renders the identities and templated policies that apply in
// dc: a service identity is builtin/service with its name, a node identity
// builtin/node.
func synthesized(g Grants, dc string) ([]*Rules, error) {
	var tpls []structs.ACLTemplatedPolicy
	for _, id := range g.ServiceIdentities {
		if inDatacenter(id.Datacenters, dc) {
			tpls = append(tpls, named(structs.ACLTemplatedPolicyServiceName, id.ServiceName))
		}
	}
	for _, id := range g.NodeIdentities {
		if id.Datacenter == dc {
			tpls = append(tpls, named(structs.ACLTemplatedPolicyNodeName, id.NodeName))
		}
	}
	for _, tp := range g.TemplatedPolicies {
		if inDatacenter(tp.Datacenters, dc) {
			tpls = append(tpls, tp)
		}
	}
	docs := make([]*Rules, 0, len(tpls))
	for _, tp := range tpls {
		text, err := tp.Rules()
		if err != nil {
			return nil, fmt.Errorf("acl: templated policy %q: %w", tp.TemplateName, err)
		}
		r, err := Parse(text)
		if err != nil {
			return nil, fmt.Errorf("acl: templated policy %q: %w", tp.TemplateName, err)
		}
		docs = append(docs, r)
	}
	return docs, nil
}

func named(template, name string) structs.ACLTemplatedPolicy {
	return structs.ACLTemplatedPolicy{TemplateName: template, TemplateVariables: &structs.ACLTemplatedPolicyVariables{Name: name}}
}

// inDatacenter reports whether a grant limited to dcs applies in dc; an
// empty list means every datacenter.
func inDatacenter(dcs []string, dc string) bool {
	return len(dcs) == 0 || slices.Contains(dcs, dc)
}
