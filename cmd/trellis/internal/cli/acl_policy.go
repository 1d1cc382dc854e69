package cli

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/hashicorp/consul/api"
)

// aclObject is what policy and role commands share: the collection's
// paths and names in messages.
type aclObject struct {
	kind string // "policy" or "role"
	one  string // "/v1/acl/policy/"
	list string // "/v1/acl/policies"
}

var (
	aclPolicies = aclObject{kind: "policy", one: "/v1/acl/policy/", list: "/v1/acl/policies"}
	aclRoles    = aclObject{kind: "role", one: "/v1/acl/role/", list: "/v1/acl/roles"}
)

// resolve finds the ID from -id (a unique prefix is enough, as in Consul)
// or -name.
func (o aclObject) resolve(cl *apiClient, id, name string) (string, error) {
	if id == "" && name == "" {
		return "", fmt.Errorf("Must specify the -id or -name parameter")
	}
	if id != "" && len(id) >= 36 {
		return id, nil
	}
	var list []struct{ ID, Name string }
	if err := send(cl, http.MethodGet, o.list, nil, &list); err != nil {
		return "", err
	}
	found := ""
	for _, e := range list {
		if (id != "" && strings.HasPrefix(e.ID, id)) || (id == "" && e.Name == name) {
			if found != "" {
				return "", fmt.Errorf("Found multiple %s IDs for the provided prefix: %s", o.kind, id)
			}
			found = e.ID
		}
	}
	if found == "" {
		if id != "" {
			return "", fmt.Errorf("No such %s ID with prefix: %s", o.kind, id)
		}
		return "", fmt.Errorf("No such %s with name %s", o.kind, name)
	}
	return found, nil
}

// idNameFlags are -id and -name, which name the object acted on.
func idNameFlags(c *aclCmd, kind string, id, name *string) {
	c.fs.StringVar(id, "id", "", "The ID of the "+kind+". It may be specified as a unique ID prefix")
	c.fs.StringVar(name, "name", "", "The name of the "+kind)
}

// delete is `acl <kind> delete`.
func (o aclObject) delete(c *aclCmd, args []string) int {
	var id, name string
	idNameFlags(c, o.kind, &id, &name)
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	full, err := o.resolve(cl, id, name)
	if err != nil {
		return c.fail("Error determining %s ID: %v", o.kind, err)
	}
	if err := send(cl, http.MethodDelete, o.one+full, nil, nil); err != nil {
		return c.fail("Error deleting %s %q: %v", o.kind, full, err)
	}
	fmt.Fprintf(c.env.Stdout, "%s %q deleted successfully\n", strings.ToUpper(o.kind[:1])+o.kind[1:], full)
	return 0
}

// read is `acl <kind> read`: by -id, or by name through /name/<name>.
func (o aclObject) read(c *aclCmd, args []string, out any, pretty func(*bytes.Buffer)) int {
	var id, name string
	idNameFlags(c, o.kind, &id, &name)
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	path := o.one + "name/" + url.PathEscape(name)
	if id != "" || name == "" {
		full, err := o.resolve(cl, id, name)
		if err != nil {
			return c.fail("Error determining %s ID: %v", o.kind, err)
		}
		path = o.one + full
	}
	if err := send(cl, http.MethodGet, path, nil, out); err != nil {
		return c.fail("Error reading %s %q: %v", o.kind, id+name, err)
	}
	return c.print(out, pretty)
}

// policyFlags shape a policy (create, update).
type policyFlags struct {
	description, rules string
	dcs                stringList
}

func (f *policyFlags) register(c *aclCmd) {
	c.fs.StringVar(&f.description, "description", "", "A description of the policy")
	c.fs.StringVar(&f.rules, "rules", "", "The policy rules. May be prefixed with '@' to indicate that the value is a file path to load the rules from. '-' may also be given to indicate that the rules are available on stdin")
	c.fs.Var(&f.dcs, "valid-datacenter", "Datacenter that the policy should be valid within. May be specified multiple times")
}

func runACLPolicyCreate(args []string, env *Env) int {
	c := newACLCmd("acl policy create", "\nUsage: trellis acl policy create -name NAME [options]\n\n  Creates a policy.", env)
	var (
		f    policyFlags
		name string
	)
	f.register(c)
	c.fs.StringVar(&name, "name", "", "The new policy's name. This flag is required.")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if name == "" {
		return c.fail("Missing required '-name' flag")
	}
	rules, err := readRules(f.rules, env.Stdin)
	if err != nil {
		return c.fail("Error loading rules: %v", err)
	}
	p := api.ACLPolicy{Name: name, Description: f.description, Rules: rules, Datacenters: f.dcs}
	var out api.ACLPolicy
	if err := send(cl, http.MethodPut, "/v1/acl/policy", &p, &out); err != nil {
		return c.fail("Failed to create new policy: %v", err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatPolicy(b, &out) })
}

func runACLPolicyRead(args []string, env *Env) int {
	c := newACLCmd("acl policy read", "\nUsage: trellis acl policy read [options] -id ID | -name NAME\n\n  Reads a policy.", env)
	var out api.ACLPolicy
	return aclPolicies.read(c, args, &out, func(b *bytes.Buffer) { formatPolicy(b, &out) })
}

func runACLPolicyList(args []string, env *Env) int {
	c := newACLCmd("acl policy list", "\nUsage: trellis acl policy list [options]\n\n  Lists every policy.", env)
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	var list []*api.ACLPolicyListEntry
	if err := send(cl, http.MethodGet, "/v1/acl/policies", nil, &list); err != nil {
		return c.fail("Failed to retrieve the policy list: %v", err)
	}
	return c.print(list, func(b *bytes.Buffer) {
		for _, p := range list {
			fmt.Fprintf(b, "%s:\n", p.Name)
			fmt.Fprintf(b, "   ID:           %s\n", p.ID)
			fmt.Fprintf(b, "   Description:  %s\n", p.Description)
			fmt.Fprintf(b, "   Datacenters:  %s\n", strings.Join(p.Datacenters, ", "))
		}
	})
}

func runACLPolicyUpdate(args []string, env *Env) int {
	c := newACLCmd("acl policy update", "\nUsage: trellis acl policy update [options] -id ID | -name NAME\n\n  Updates a policy; only the fields given change.", env)
	var (
		f                 policyFlags
		id, name, newName string
	)
	f.register(c)
	idNameFlags(c, "policy", &id, &name)
	c.fs.StringVar(&newName, "new-name", "", "A new name for the policy")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	full, err := aclPolicies.resolve(cl, id, name)
	if err != nil {
		return c.fail("Error determining policy ID: %v", err)
	}
	var p api.ACLPolicy
	if err := send(cl, http.MethodGet, "/v1/acl/policy/"+full, nil, &p); err != nil {
		return c.fail("Error reading policy %q: %v", full, err)
	}
	set := map[string]bool{}
	c.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["description"] {
		p.Description = f.description
	}
	if set["rules"] {
		if p.Rules, err = readRules(f.rules, env.Stdin); err != nil {
			return c.fail("Error loading rules: %v", err)
		}
	}
	if set["valid-datacenter"] {
		p.Datacenters = f.dcs
	}
	if newName != "" {
		p.Name = newName
	}
	var out api.ACLPolicy
	if err := send(cl, http.MethodPut, "/v1/acl/policy/"+full, &p, &out); err != nil {
		return c.fail("Error updating policy %q: %v", full, err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatPolicy(b, &out) })
}

func runACLPolicyDelete(args []string, env *Env) int {
	c := newACLCmd("acl policy delete", "\nUsage: trellis acl policy delete [options] -id ID | -name NAME\n\n  Deletes a policy.", env)
	return aclPolicies.delete(c, args)
}

// formatPolicy is Consul's pretty policy output.
func formatPolicy(b *bytes.Buffer, p *api.ACLPolicy) {
	fmt.Fprintf(b, "ID:           %s\n", p.ID)
	fmt.Fprintf(b, "Name:         %s\n", p.Name)
	fmt.Fprintf(b, "Description:  %s\n", p.Description)
	fmt.Fprintf(b, "Datacenters:  %s\n", strings.Join(p.Datacenters, ", "))
	fmt.Fprintf(b, "Rules:\n%s\n", p.Rules)
}

// roleFlags shape a role (create, update).
type roleFlags struct {
	description                   string
	policyIDs, policyNames        stringList
	serviceIdents, nodeIdentities stringList
}

func (f *roleFlags) register(c *aclCmd) {
	c.fs.StringVar(&f.description, "description", "", "A description of the role")
	c.fs.Var(&f.policyIDs, "policy-id", "ID of a policy to use for this role. May be specified multiple times")
	c.fs.Var(&f.policyNames, "policy-name", "Name of a policy to use for this role. May be specified multiple times")
	c.fs.Var(&f.serviceIdents, "service-identity", "Name of a service identity to use for this role, as <service>[:<datacenter1>,...]. May be specified multiple times")
	c.fs.Var(&f.nodeIdentities, "node-identity", "Name of a node identity to use for this role, as <node>:<datacenter>. May be specified multiple times")
}

// apply sets on r what the flags give; lists given replace r's.
func (f *roleFlags) apply(r *api.ACLRole) error {
	for _, l := range policyLinks(f.policyIDs, f.policyNames) {
		r.Policies = append(r.Policies, &api.ACLRolePolicyLink{ID: l.ID, Name: l.Name})
	}
	si, err := serviceIdentities(f.serviceIdents)
	if err != nil {
		return err
	}
	ni, err := nodeIdentities(f.nodeIdentities)
	if err != nil {
		return err
	}
	r.ServiceIdentities = append(r.ServiceIdentities, si...)
	r.NodeIdentities = append(r.NodeIdentities, ni...)
	return nil
}

func runACLRoleCreate(args []string, env *Env) int {
	c := newACLCmd("acl role create", "\nUsage: trellis acl role create -name NAME [options]\n\n  Creates a role.", env)
	var (
		f    roleFlags
		name string
	)
	f.register(c)
	c.fs.StringVar(&name, "name", "", "The new role's name. This flag is required.")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if name == "" {
		return c.fail("Missing required '-name' flag")
	}
	r := api.ACLRole{Name: name, Description: f.description}
	if err := f.apply(&r); err != nil {
		return c.fail("%v", err)
	}
	var out api.ACLRole
	if err := send(cl, http.MethodPut, "/v1/acl/role", &r, &out); err != nil {
		return c.fail("Failed to create new role: %v", err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatRole(b, "", &out) })
}

func runACLRoleRead(args []string, env *Env) int {
	c := newACLCmd("acl role read", "\nUsage: trellis acl role read [options] -id ID | -name NAME\n\n  Reads a role.", env)
	var out api.ACLRole
	return aclRoles.read(c, args, &out, func(b *bytes.Buffer) { formatRole(b, "", &out) })
}

func runACLRoleList(args []string, env *Env) int {
	c := newACLCmd("acl role list", "\nUsage: trellis acl role list [options]\n\n  Lists every role.", env)
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	var list []*api.ACLRole
	if err := send(cl, http.MethodGet, "/v1/acl/roles", nil, &list); err != nil {
		return c.fail("Failed to retrieve the role list: %v", err)
	}
	return c.print(list, func(b *bytes.Buffer) {
		for _, r := range list {
			fmt.Fprintf(b, "%s:\n", r.Name)
			formatRole(b, "   ", r)
		}
	})
}

func runACLRoleUpdate(args []string, env *Env) int {
	c := newACLCmd("acl role update", "\nUsage: trellis acl role update [options] -id ID | -name NAME\n\n  Updates a role. Policies and identities given replace the role's.", env)
	var (
		f                 roleFlags
		id, name, newName string
	)
	f.register(c)
	idNameFlags(c, "role", &id, &name)
	c.fs.StringVar(&newName, "new-name", "", "A new name for the role")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	full, err := aclRoles.resolve(cl, id, name)
	if err != nil {
		return c.fail("Error determining role ID: %v", err)
	}
	var r api.ACLRole
	if err := send(cl, http.MethodGet, "/v1/acl/role/"+full, nil, &r); err != nil {
		return c.fail("Error reading role %q: %v", full, err)
	}
	set := map[string]bool{}
	c.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["description"] {
		r.Description = f.description
	}
	if set["policy-id"] || set["policy-name"] {
		r.Policies = nil
	}
	if set["service-identity"] {
		r.ServiceIdentities = nil
	}
	if set["node-identity"] {
		r.NodeIdentities = nil
	}
	if err := f.apply(&r); err != nil {
		return c.fail("%v", err)
	}
	if newName != "" {
		r.Name = newName
	}
	var out api.ACLRole
	if err := send(cl, http.MethodPut, "/v1/acl/role/"+full, &r, &out); err != nil {
		return c.fail("Error updating role %q: %v", full, err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatRole(b, "", &out) })
}

func runACLRoleDelete(args []string, env *Env) int {
	c := newACLCmd("acl role delete", "\nUsage: trellis acl role delete [options] -id ID | -name NAME\n\n  Deletes a role.", env)
	return aclRoles.delete(c, args)
}

// formatRole is Consul's pretty role output; list entries are indented.
func formatRole(b *bytes.Buffer, indent string, r *api.ACLRole) {
	fmt.Fprintf(b, "%sID:           %s\n", indent, r.ID)
	if indent == "" {
		fmt.Fprintf(b, "Name:         %s\n", r.Name)
	}
	fmt.Fprintf(b, "%sDescription:  %s\n", indent, r.Description)
	if len(r.Policies) > 0 {
		b.WriteString(indent + "Policies:\n")
		for _, p := range r.Policies {
			fmt.Fprintf(b, "%s   %s - %s\n", indent, p.ID, p.Name)
		}
	}
	formatIdentities(b, indent, r.ServiceIdentities, r.NodeIdentities)
}
