package structs

import (
	"fmt"
	"strings"
)

// The names of Consul's templated policies.
const (
	ACLTemplatedPolicyServiceName     = "builtin/service"
	ACLTemplatedPolicyNodeName        = "builtin/node"
	ACLTemplatedPolicyDNSName         = "builtin/dns"
	ACLTemplatedPolicyNomadServerName = "builtin/nomad-server"
	ACLTemplatedPolicyAPIGatewayName  = "builtin/api-gateway"
	ACLTemplatedPolicyNomadClientName = "builtin/nomad-client"
)

// aclTemplateNameSchema is the JSON schema of the templates that take a
// Name, as Consul publishes it at /v1/acl/templated-policy/name/<n>.
const aclTemplateNameSchema = "{\n\t\"type\": \"object\",\n\t\"properties\": {\n\t\t\"name\": { \"type\": \"string\", \"$ref\": \"#/definitions/min-length-one\" }\n\t},\n\t\"required\": [\"name\"],\n\t\"definitions\": {\n\t\t\"min-length-one\": {\n\t\t\t\t\"type\": \"string\",\n\t\t\t\t\"minLength\": 1\n\t\t}\n\t}\n}"

// ACLTemplatedPolicyDefinition is one built-in templated policy: the
// rules it renders to, with {{.Name}} standing for its Name variable.
type ACLTemplatedPolicyDefinition struct {
	TemplateName string
	// Schema is the JSON schema of the variables, empty for a template
	// that takes none.
	Schema      string
	Template    string
	Description string
}

// NeedsName reports whether the template takes the Name variable.
func (d ACLTemplatedPolicyDefinition) NeedsName() bool { return d.Schema != "" }

// ACLTemplatedPolicies lists the built-in templated policies, in Consul's
// order. The rules are those Consul documents for each.
func ACLTemplatedPolicies() []ACLTemplatedPolicyDefinition {
	return []ACLTemplatedPolicyDefinition{
		{
			TemplateName: ACLTemplatedPolicyServiceName,
			Schema:       aclTemplateNameSchema,
			Template:     "\nservice \"{{.Name}}\" {\n\tpolicy = \"write\"\n}\nservice \"{{.Name}}-sidecar-proxy\" {\n\tpolicy = \"write\"\n}\nservice_prefix \"\" {\n\tpolicy = \"read\"\n}\nnode_prefix \"\" {\n\tpolicy = \"read\"\n}",
			Description:  "Gives the token or role permissions to register a service and discover services in the Consul catalog. It also gives the specified service's sidecar proxy the permission to discover and route traffic to other services.",
		},
		{
			TemplateName: ACLTemplatedPolicyNodeName,
			Schema:       aclTemplateNameSchema,
			Template:     "\nnode \"{{.Name}}\" {\n\tpolicy = \"write\"\n}\nservice_prefix \"\" {\n\tpolicy = \"read\"\n}",
			Description:  "Gives the token or role permissions for a register an agent/node into the catalog. A node is typically a consul agent but can also be a physical server, cloud instance or a container.",
		},
		{
			TemplateName: ACLTemplatedPolicyDNSName,
			Template:     "\nnode_prefix \"\" {\n\tpolicy = \"read\"\n}\nservice_prefix \"\" {\n\tpolicy = \"read\"\n}\nquery_prefix \"\" {\n\tpolicy = \"read\"\n}",
			Description:  "Gives the token or role permissions for the Consul DNS to query services in the network.",
		},
		{
			TemplateName: ACLTemplatedPolicyNomadServerName,
			Template:     "\nacl = \"write\"\nagent_prefix \"\" {\n  policy = \"read\"\n}\nnode_prefix \"\" {\n  policy = \"read\"\n}\nservice_prefix \"\" {\n  policy = \"write\"\n}",
			Description:  "Gives the token or role permissions required for integration with a nomad server.",
		},
		{
			TemplateName: ACLTemplatedPolicyAPIGatewayName,
			Schema:       aclTemplateNameSchema,
			Template:     "mesh = \"read\"\nnode_prefix \"\" {\n\tpolicy = \"read\"\n}\nservice_prefix \"\" {\n\tpolicy = \"read\"\n}\nservice \"{{.Name}}\" {\n\tpolicy = \"write\"\n}",
			Description:  "Gives the token or role permissions for a Consul api gateway",
		},
		{
			TemplateName: ACLTemplatedPolicyNomadClientName,
			Template:     "agent_prefix \"\" {\n  policy = \"read\"\n}\nnode_prefix \"\" {\n  policy = \"read\"\n}\nservice_prefix \"\" {\n  policy = \"write\"\n}\nkey_prefix \"\" {\n  policy = \"read\"\n}",
			Description:  "Gives the token or role permissions required for integration with a nomad client.",
		},
	}
}

// LookupACLTemplatedPolicy returns the built-in template named name.
func LookupACLTemplatedPolicy(name string) (ACLTemplatedPolicyDefinition, bool) {
	for _, d := range ACLTemplatedPolicies() {
		if d.TemplateName == name {
			return d, true
		}
	}
	return ACLTemplatedPolicyDefinition{}, false
}

// Validate checks that the template exists and has the variables it needs,
// with Consul's messages.
func (tp *ACLTemplatedPolicy) Validate() error {
	def, ok := LookupACLTemplatedPolicy(tp.TemplateName)
	if !ok {
		return fmt.Errorf("no such ACL templated policy with Name %q", tp.TemplateName)
	}
	if !def.NeedsName() {
		return nil
	}
	name := ""
	if tp.TemplateVariables != nil {
		name = tp.TemplateVariables.Name
	}
	if name == "" {
		return fmt.Errorf("validation error for templated policy: %q: name is required", tp.TemplateName)
	}
	switch tp.TemplateName {
	case ACLTemplatedPolicyServiceName:
		if !ValidACLIdentityName(name) {
			return fmt.Errorf("service identity %q has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed", name)
		}
	case ACLTemplatedPolicyNodeName:
		if !ValidACLIdentityName(name) {
			return fmt.Errorf("node identity %q  has an invalid name. Only lowercase alphanumeric characters, '-' and '_' are allowed", name)
		}
	}
	return nil
}

// Rules renders the template into policy rules. The Name goes inside an
// HCL string, escaped, so that no Name can add rules of its own.
func (tp *ACLTemplatedPolicy) Rules() (string, error) {
	if err := tp.Validate(); err != nil {
		return "", err
	}
	def, _ := LookupACLTemplatedPolicy(tp.TemplateName)
	if !def.NeedsName() {
		return def.Template, nil
	}
	name := tp.TemplateVariables.Name
	if strings.ContainsAny(name, "\n\r") {
		return "", fmt.Errorf("validation error for templated policy: %q: name must be one line", tp.TemplateName)
	}
	escaped := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name)
	return strings.ReplaceAll(def.Template, "{{.Name}}", escaped), nil
}
