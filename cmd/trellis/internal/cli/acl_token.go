package cli

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// tokenFlags are the flags that shape a token, shared by create and
// update.
type tokenFlags struct {
	description              string
	policyIDs, policyNames   stringList
	roleIDs, roleNames       stringList
	serviceIdents, nodeIdent stringList
	templated, vars          stringList
}

func (f *tokenFlags) register(c *aclCmd) {
	c.fs.StringVar(&f.description, "description", "", "A description of the token")
	c.fs.Var(&f.policyIDs, "policy-id", "ID of a policy to use for this token. May be specified multiple times")
	c.fs.Var(&f.policyNames, "policy-name", "Name of a policy to use for this token. May be specified multiple times")
	c.fs.Var(&f.roleIDs, "role-id", "ID of a role to use for this token. May be specified multiple times")
	c.fs.Var(&f.roleNames, "role-name", "Name of a role to use for this token. May be specified multiple times")
	c.fs.Var(&f.serviceIdents, "service-identity", "Name of a service identity to use for this token, as <service>[:<datacenter1>,...]. May be specified multiple times")
	c.fs.Var(&f.nodeIdent, "node-identity", "Name of a node identity to use for this token, as <node>:<datacenter>. May be specified multiple times")
	c.fs.Var(&f.templated, "templated-policy", "The templated policy name. May be specified multiple times")
	c.fs.Var(&f.vars, "var", "Templated policy variables, as name:<value>")
}

// apply sets on t what the flags give; lists given replace t's.
func (f *tokenFlags) apply(t *api.ACLToken) error {
	if links := policyLinks(f.policyIDs, f.policyNames); links != nil {
		t.Policies = links
	}
	if links := roleLinks(f.roleIDs, f.roleNames); links != nil {
		t.Roles = links
	}
	si, err := serviceIdentities(f.serviceIdents)
	if err != nil {
		return err
	}
	if si != nil {
		t.ServiceIdentities = si
	}
	ni, err := nodeIdentities(f.nodeIdent)
	if err != nil {
		return err
	}
	if ni != nil {
		t.NodeIdentities = ni
	}
	tp, err := templatedPolicies(f.templated, f.vars)
	if err != nil {
		return err
	}
	if tp != nil {
		t.TemplatedPolicies = tp
	}
	return nil
}

// accessorFlag is -accessor-id, with -id as Consul's older name.
func accessorFlag(c *aclCmd, v *string) {
	c.fs.StringVar(v, "accessor-id", "", "The Accessor ID of the token. It may be specified as a unique ID prefix but will error if the prefix matches multiple token Accessor IDs")
	c.fs.StringVar(v, "id", "", "Deprecated: use -accessor-id")
}

// tokenID expands a unique AccessorID prefix, as Consul's CLI does.
func tokenID(cl *apiClient, id string) (string, error) {
	if len(id) >= 36 || id == "anonymous" {
		if id == "anonymous" {
			return "00000000-0000-0000-0000-000000000002", nil
		}
		return id, nil
	}
	var list []*api.ACLTokenListEntry
	if err := send(cl, http.MethodGet, "/v1/acl/tokens", nil, &list); err != nil {
		return "", err
	}
	found := ""
	for _, t := range list {
		if strings.HasPrefix(t.AccessorID, id) {
			if found != "" {
				return "", fmt.Errorf("Found multiple tokens for the provided ID prefix: %s", id)
			}
			found = t.AccessorID
		}
	}
	if found == "" {
		return "", fmt.Errorf("No such token ID with prefix: %s", id)
	}
	return found, nil
}

const aclTokenCreateHelp = `
Usage: trellis acl token create [options]

  Creates a new token with the policies, roles and identities given.`

func runACLTokenCreate(args []string, env *Env) int {
	c := newACLCmd("acl token create", aclTokenCreateHelp, env)
	var (
		f                tokenFlags
		accessor, secret string
		local            bool
		ttl              time.Duration
	)
	f.register(c)
	c.fs.StringVar(&accessor, "accessor", "", "Create the token with this Accessor ID")
	c.fs.StringVar(&secret, "secret", "", "Create the token with this Secret ID")
	c.fs.BoolVar(&local, "local", false, "Create this as a datacenter local token")
	c.fs.DurationVar(&ttl, "expires-ttl", 0, "Duration of time this token should be valid for")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	t := &api.ACLToken{Description: f.description, AccessorID: accessor, SecretID: secret, Local: local, ExpirationTTL: ttl}
	if err := f.apply(t); err != nil {
		return c.fail("%v", err)
	}
	var out api.ACLToken
	if err := send(cl, http.MethodPut, "/v1/acl/token", t, &out); err != nil {
		return c.fail("Failed to create new token: %v", err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatToken(b, &out) })
}

const aclTokenReadHelp = `
Usage: trellis acl token read [options] -accessor-id ID

  Reads the token with the given Accessor ID, or with -self the caller's.`

func runACLTokenRead(args []string, env *Env) int {
	c := newACLCmd("acl token read", aclTokenReadHelp, env)
	var (
		id   string
		self bool
	)
	accessorFlag(c, &id)
	c.fs.BoolVar(&self, "self", false, "Indicates that the current HTTP token should be read by secret ID instead of expecting a -accessor-id")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	path := "/v1/acl/token/self"
	if !self {
		if id == "" {
			return c.fail("Must specify the -accessor-id parameter")
		}
		full, err := tokenID(cl, id)
		if err != nil {
			return c.fail("Error determining token ID: %v", err)
		}
		path, id = "/v1/acl/token/"+full, full
	}
	var out api.ACLToken
	if err := send(cl, http.MethodGet, path, nil, &out); err != nil {
		return c.fail("Error reading token %q: %v", id, err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatToken(b, &out) })
}

const aclTokenListHelp = `
Usage: trellis acl token list [options]

  Lists every token the caller may read.`

func runACLTokenList(args []string, env *Env) int {
	c := newACLCmd("acl token list", aclTokenListHelp, env)
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	var list []*api.ACLToken
	if err := send(cl, http.MethodGet, "/v1/acl/tokens", nil, &list); err != nil {
		return c.fail("Failed to retrieve the token list: %v", err)
	}
	return c.print(list, func(b *bytes.Buffer) {
		for i, t := range list {
			if i > 0 {
				b.WriteString("\n")
			}
			formatToken(b, t)
		}
	})
}

const aclTokenUpdateHelp = `
Usage: trellis acl token update [options] -accessor-id ID

  Updates a token. Policies, roles and identities given replace the
  token's; -append-policy-id and -append-policy-name add to them.`

func runACLTokenUpdate(args []string, env *Env) int {
	c := newACLCmd("acl token update", aclTokenUpdateHelp, env)
	var (
		f                       tokenFlags
		id                      string
		appendIDs, appendNames  stringList
		descriptionSetByCommand bool
	)
	f.register(c)
	accessorFlag(c, &id)
	c.fs.Var(&appendIDs, "append-policy-id", "ID of a policy to add to this token. May be specified multiple times")
	c.fs.Var(&appendNames, "append-policy-name", "Name of a policy to add to this token. May be specified multiple times")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	c.fs.Visit(func(fl *flag.Flag) { descriptionSetByCommand = descriptionSetByCommand || fl.Name == "description" })
	if id == "" {
		return c.fail("Cannot update a token without specifying the -accessor-id parameter")
	}
	full, err := tokenID(cl, id)
	if err != nil {
		return c.fail("Error determining token ID: %v", err)
	}
	var t api.ACLToken
	if err := send(cl, http.MethodGet, "/v1/acl/token/"+full, nil, &t); err != nil {
		return c.fail("Error when retrieving current token: %v", err)
	}
	if descriptionSetByCommand {
		t.Description = f.description
	}
	if err := f.apply(&t); err != nil {
		return c.fail("%v", err)
	}
	t.Policies = append(t.Policies, policyLinks(appendIDs, appendNames)...)
	var out api.ACLToken
	if err := send(cl, http.MethodPut, "/v1/acl/token/"+full, &t, &out); err != nil {
		return c.fail("Failed to update token %s: %v", full, err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatToken(b, &out) })
}

const aclTokenDeleteHelp = `
Usage: trellis acl token delete [options] -accessor-id ID

  Deletes a token.`

func runACLTokenDelete(args []string, env *Env) int {
	c := newACLCmd("acl token delete", aclTokenDeleteHelp, env)
	var id string
	accessorFlag(c, &id)
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if id == "" {
		return c.fail("Must specify the -accessor-id parameter")
	}
	full, err := tokenID(cl, id)
	if err != nil {
		return c.fail("Error determining token ID: %v", err)
	}
	if err := send(cl, http.MethodDelete, "/v1/acl/token/"+full, nil, nil); err != nil {
		return c.fail("Error deleting token %q: %v", full, err)
	}
	fmt.Fprintf(env.Stdout, "Token %q deleted successfully\n", full)
	return 0
}

const aclTokenCloneHelp = `
Usage: trellis acl token clone [options] -accessor-id ID

  Copies a token under new Accessor and Secret IDs.`

func runACLTokenClone(args []string, env *Env) int {
	c := newACLCmd("acl token clone", aclTokenCloneHelp, env)
	var id, description string
	accessorFlag(c, &id)
	c.fs.StringVar(&description, "description", "", "A description of the new cloned token")
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	if id == "" {
		return c.fail("Cannot clone a token without specifying the -accessor-id parameter")
	}
	full, err := tokenID(cl, id)
	if err != nil {
		return c.fail("Error determining token ID: %v", err)
	}
	var out api.ACLToken
	if err := send(cl, http.MethodPut, "/v1/acl/token/"+full+"/clone", map[string]string{"Description": description}, &out); err != nil {
		return c.fail("Failed to clone token: %v", err)
	}
	return c.print(&out, func(b *bytes.Buffer) { formatToken(b, &out) })
}
