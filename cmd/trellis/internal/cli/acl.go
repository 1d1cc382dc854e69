package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/hashicorp/consul/api"
)

// The acl commands: Consul's `consul acl ...`, with its flags, its human
// output (formatters below) and its JSON output (-format json).

// aclCmd is what every acl subcommand shares: the HTTP flags and -format.
type aclCmd struct {
	hf     httpFlags
	format string
	fs     *flag.FlagSet
	env    *Env
}

func newACLCmd(name, help string, env *Env) *aclCmd {
	c := &aclCmd{env: env, fs: newFlagSet(name, help, env.Stderr)}
	c.hf.register(c.fs, true)
	c.fs.StringVar(&c.format, "format", "pretty", "Output format {pretty|json}")
	return c
}

// parse parses args and builds the client; ok false means exit with code.
func (c *aclCmd) parse(args []string) (cl *apiClient, code int, ok bool) {
	if code, ok := parseFlags(c.fs, args); !ok {
		return nil, code, false
	}
	if c.format != "pretty" && c.format != "json" {
		fmt.Fprintf(c.env.Stderr, "Invalid format %q: must be pretty or json\n", c.format)
		return nil, 1, false
	}
	cl, err := c.hf.client(c.env)
	if err != nil {
		fmt.Fprintf(c.env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return nil, 1, false
	}
	return cl, 0, true
}

// fail prints Consul's "<what>: <err>" and returns 1.
func (c *aclCmd) fail(format string, args ...any) int {
	fmt.Fprintf(c.env.Stderr, format+"\n", args...)
	return 1
}

// print writes v as JSON (-format json) or as pretty(v).
func (c *aclCmd) print(v any, pretty func(*bytes.Buffer)) int {
	if c.format == "json" {
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return c.fail("Failed to format: %v", err)
		}
		fmt.Fprintln(c.env.Stdout, string(b))
		return 0
	}
	var buf bytes.Buffer
	pretty(&buf)
	fmt.Fprint(c.env.Stdout, buf.String())
	return 0
}

// send is one request with a JSON body (nil for none) whose JSON answer is
// decoded into out (nil to ignore it).
func send(cl *apiClient, method, path string, body, out any) error {
	r := request{method: method, path: path, withDC: true}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r.body = bytes.NewReader(b)
	}
	raw, _, err := cl.do(context.Background(), r)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return nil
}

const aclBootstrapHelp = `
Usage: trellis acl bootstrap [options]

  Bootstraps the ACL system: creates the initial management token, once
  per cluster, and prints it.`

func runACLBootstrap(args []string, env *Env) int {
	c := newACLCmd("acl bootstrap", aclBootstrapHelp, env)
	cl, code, ok := c.parse(args)
	if !ok {
		return code
	}
	var tok api.ACLToken
	if err := send(cl, http.MethodPut, "/v1/acl/bootstrap", nil, &tok); err != nil {
		return c.fail("Failed ACL bootstrapping: %v", err)
	}
	return c.print(&tok, func(b *bytes.Buffer) { formatToken(b, &tok) })
}

const aclSetAgentTokenHelp = `
Usage: trellis acl set-agent-token [options] TYPE TOKEN

  Sets one of the agent's ACL tokens through /v1/agent/token. TYPE is one
  of default, agent, recovery (or agent_recovery), replication and
  config_file_service_registration. The agent keeps it in memory, and on
  disk with acl.enable_token_persistence.`

func runACLSetAgentToken(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("acl set-agent-token", aclSetAgentTokenHelp, env.Stderr)
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) != 2 {
		fmt.Fprintln(env.Stderr, "Missing TYPE and TOKEN arguments")
		return 1
	}
	kind := rest[0]
	path := map[string]string{
		"default": "default", "agent": "agent", "recovery": "agent_recovery", "agent_recovery": "agent_recovery",
		"master": "agent_master", "replication": "replication",
		"config_file_service_registration": "config_file_service_registration",
	}[kind]
	if path == "" {
		fmt.Fprintf(env.Stderr, "Unknown token type: %s\n", kind)
		return 1
	}
	cl, ok := hf.connect(env)
	if !ok {
		return 1
	}
	if _, err := cl.put(context.Background(), "/v1/agent/token/"+path, nil, map[string]string{"Token": rest[1]}); err != nil {
		fmt.Fprintf(env.Stderr, "Failed to set ACL token %q: %v\n", kind, err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "ACL token %q set successfully\n", kind)
	return 0
}

// readRules reads -rules: "@file" a file, "-" stdin, else the text itself.
func readRules(v string, stdin io.Reader) (string, error) {
	switch {
	case v == "-":
		b, err := io.ReadAll(stdin)
		return string(b), err
	case strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return "", fmt.Errorf("failed to read file: %w", err)
		}
		return string(b), nil
	}
	return v, nil
}

// Links, identities and templated policies from the repeatable flags.

func policyLinks(ids, names []string) []*api.ACLTokenPolicyLink {
	var out []*api.ACLTokenPolicyLink
	for _, id := range ids {
		out = append(out, &api.ACLTokenPolicyLink{ID: id})
	}
	for _, n := range names {
		out = append(out, &api.ACLTokenPolicyLink{Name: n})
	}
	return out
}

func roleLinks(ids, names []string) []*api.ACLTokenRoleLink {
	var out []*api.ACLTokenRoleLink
	for _, id := range ids {
		out = append(out, &api.ACLTokenRoleLink{ID: id})
	}
	for _, n := range names {
		out = append(out, &api.ACLTokenRoleLink{Name: n})
	}
	return out
}

// serviceIdentities parses -service-identity "name[:dc1,dc2]".
func serviceIdentities(in []string) ([]*api.ACLServiceIdentity, error) {
	var out []*api.ACLServiceIdentity
	for _, s := range in {
		name, dcs, _ := strings.Cut(s, ":")
		if name == "" {
			return nil, fmt.Errorf("service identity %q must be of the form <service name>[:<datacenter1>,...]", s)
		}
		si := &api.ACLServiceIdentity{ServiceName: name}
		if dcs != "" {
			si.Datacenters = strings.Split(dcs, ",")
		}
		out = append(out, si)
	}
	return out, nil
}

// nodeIdentities parses -node-identity "node:dc".
func nodeIdentities(in []string) ([]*api.ACLNodeIdentity, error) {
	var out []*api.ACLNodeIdentity
	for _, s := range in {
		name, dc, _ := strings.Cut(s, ":")
		if name == "" || dc == "" {
			return nil, fmt.Errorf("node identity %q must be of the form <node name>:<datacenter>", s)
		}
		out = append(out, &api.ACLNodeIdentity{NodeName: name, Datacenter: dc})
	}
	return out, nil
}

// templatedPolicies builds -templated-policy with its -var name:value.
func templatedPolicies(names, vars []string) ([]*api.ACLTemplatedPolicy, error) {
	var out []*api.ACLTemplatedPolicy
	var tv *api.ACLTemplatedPolicyVariables
	for _, v := range vars {
		k, val, ok := strings.Cut(v, ":")
		if !ok || k != "name" {
			return nil, fmt.Errorf("-var %q must be of the form name:<value>", v)
		}
		tv = &api.ACLTemplatedPolicyVariables{Name: val}
	}
	for _, n := range names {
		out = append(out, &api.ACLTemplatedPolicy{TemplateName: n, TemplateVariables: tv})
	}
	return out, nil
}

// formatToken is Consul's pretty token output.
func formatToken(b *bytes.Buffer, t *api.ACLToken) {
	fmt.Fprintf(b, "AccessorID:       %s\n", t.AccessorID)
	fmt.Fprintf(b, "SecretID:         %s\n", t.SecretID)
	fmt.Fprintf(b, "Description:      %s\n", t.Description)
	fmt.Fprintf(b, "Local:            %t\n", t.Local)
	if t.AuthMethod != "" {
		fmt.Fprintf(b, "Auth Method:      %s\n", t.AuthMethod)
	}
	fmt.Fprintf(b, "Create Time:      %v\n", t.CreateTime)
	if t.ExpirationTime != nil && !t.ExpirationTime.IsZero() {
		fmt.Fprintf(b, "Expiration Time:  %v\n", *t.ExpirationTime)
	}
	if len(t.Policies) > 0 {
		b.WriteString("Policies:\n")
		for _, p := range t.Policies {
			fmt.Fprintf(b, "   %s - %s\n", p.ID, p.Name)
		}
	}
	if len(t.Roles) > 0 {
		b.WriteString("Roles:\n")
		for _, r := range t.Roles {
			fmt.Fprintf(b, "   %s - %s\n", r.ID, r.Name)
		}
	}
	formatIdentities(b, "", t.ServiceIdentities, t.NodeIdentities)
	if len(t.TemplatedPolicies) > 0 {
		b.WriteString("Templated Policies:\n")
		for _, tp := range t.TemplatedPolicies {
			fmt.Fprintf(b, "   %s\n", tp.TemplateName)
			if tp.TemplateVariables != nil && tp.TemplateVariables.Name != "" {
				fmt.Fprintf(b, "      Name: %s\n", tp.TemplateVariables.Name)
			}
			if len(tp.Datacenters) > 0 {
				fmt.Fprintf(b, "      Datacenters: %s\n", strings.Join(tp.Datacenters, ", "))
			} else {
				b.WriteString("      Datacenters: all\n")
			}
		}
	}
}

// formatIdentities prints service and node identities under indent.
func formatIdentities(b *bytes.Buffer, indent string, svc []*api.ACLServiceIdentity, nodes []*api.ACLNodeIdentity) {
	if len(svc) > 0 {
		b.WriteString(indent + "Service Identities:\n")
		for _, s := range svc {
			dcs := "all"
			if len(s.Datacenters) > 0 {
				dcs = strings.Join(s.Datacenters, ", ")
			}
			fmt.Fprintf(b, "%s   %s (Datacenters: %s)\n", indent, s.ServiceName, dcs)
		}
	}
	if len(nodes) > 0 {
		b.WriteString(indent + "Node Identities:\n")
		for _, n := range nodes {
			fmt.Fprintf(b, "%s   %s (Datacenter: %s)\n", indent, n.NodeName, n.Datacenter)
		}
	}
}
