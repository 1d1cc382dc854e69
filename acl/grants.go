package acl

import "github.com/trellis-mesh/trellis/structs"

// TokenGrants gathers what tok grants: its own policies, identities and
// templated policies and those of its roles, looked up by ID with role
// and policy (nil, nil for one that no longer exists: it grants nothing).
// Servers look them up in their store, a client agent in its cache.
func TokenGrants(tok *structs.ACLToken, role func(id string) (*structs.ACLRole, error), policy func(id string) (*structs.ACLPolicy, error)) (Grants, error) {
	g := Grants{
		ServiceIdentities: tok.ServiceIdentities,
		NodeIdentities:    tok.NodeIdentities,
		TemplatedPolicies: tok.TemplatedPolicies,
	}
	policyIDs := make([]string, 0, len(tok.Policies))
	for _, l := range tok.Policies {
		policyIDs = append(policyIDs, l.ID)
	}
	for _, l := range tok.Roles {
		r, err := role(l.ID)
		if err != nil {
			return Grants{}, err
		}
		if r == nil {
			continue
		}
		for _, pl := range r.Policies {
			policyIDs = append(policyIDs, pl.ID)
		}
		g.ServiceIdentities = append(g.ServiceIdentities, r.ServiceIdentities...)
		g.NodeIdentities = append(g.NodeIdentities, r.NodeIdentities...)
		g.TemplatedPolicies = append(g.TemplatedPolicies, r.TemplatedPolicies...)
	}
	seen := make(map[string]bool, len(policyIDs))
	for _, id := range policyIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		p, err := policy(id)
		if err != nil {
			return Grants{}, err
		}
		if p != nil {
			g.Policies = append(g.Policies, p)
		}
	}
	return g, nil
}
