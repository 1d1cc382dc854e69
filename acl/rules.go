// Package acl is Consul's ACL rule language and its decisions: Parse reads
// a policy's rules (HCL or JSON), Compile merges the policies and
// identities of one token into an Authorizer over the default policy, and
// the Authorizer answers each question an endpoint asks ("may this token
// write key x?") with Allow or Deny. It imports only structs, keeps no
// state and starts no goroutine; the server resolves a token to its
// policies and asks here.
package acl

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl"
	"github.com/hashicorp/hcl/hcl/ast"
	"github.com/hashicorp/hcl/hcl/token"
)

// Access is a rule's level (Consul's "policy disposition"). The zero value
// means no rule.
type Access int

// The access levels, weakest first.
const (
	AccessUnknown Access = iota
	AccessRead
	AccessList
	AccessWrite
	AccessDeny
)

// String is the level as the rule language spells it.
func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessList:
		return "list"
	case AccessWrite:
		return "write"
	case AccessDeny:
		return "deny"
	}
	return "unknown"
}

// parseAccess reads a disposition as Consul does, case-insensitively.
func parseAccess(s string) Access {
	switch strings.ToLower(s) {
	case "read":
		return AccessRead
	case "list":
		return AccessList
	case "write":
		return AccessWrite
	case "deny":
		return AccessDeny
	}
	return AccessUnknown
}

// Resource is a resource of the rule language, as it appears in a denial
// ("lacks permission 'key:write'").
type Resource string

// The resources.
const (
	ResourceACL       Resource = "acl"
	ResourceAgent     Resource = "agent"
	ResourceEvent     Resource = "event"
	ResourceIdentity  Resource = "identity"
	ResourceIntention Resource = "intention"
	ResourceKey       Resource = "key"
	ResourceKeyring   Resource = "keyring"
	ResourceMesh      Resource = "mesh"
	ResourceNode      Resource = "node"
	ResourceOperator  Resource = "operator"
	ResourcePeering   Resource = "peering"
	ResourceQuery     Resource = "query"
	ResourceService   Resource = "service"
	ResourceSession   Resource = "session"
)

// Rule is one rule of a segmented resource: an exact segment or, with
// Prefix, every segment that starts with it.
type Rule struct {
	Segment string
	Prefix  bool
	Access  Access
	// Intentions is the explicit intentions level of a service or identity
	// rule; AccessUnknown when the rule sets none.
	Intentions Access
}

// Rules is one parsed policy document.
type Rules struct {
	ACL      Access
	Keyring  Access
	Operator Access
	Mesh     Access
	Peering  Access

	Agents     []Rule
	Events     []Rule
	Identities []Rule
	Keys       []Rule
	Nodes      []Rule
	Queries    []Rule
	Services   []Rule
	Sessions   []Rule
}

// hclRule is the decoded form of one `<resource> "<segment>" { ... }`.
type hclRule struct {
	Segment    string `hcl:",key"`
	Policy     string `hcl:"policy"`
	Intentions string `hcl:"intentions"`
}

// hclRules is the decoded document, one field per key of the language.
type hclRules struct {
	ACL      string `hcl:"acl"`
	Keyring  string `hcl:"keyring"`
	Operator string `hcl:"operator"`
	Mesh     string `hcl:"mesh"`
	Peering  string `hcl:"peering"`

	Agent          []hclRule `hcl:"agent"`
	AgentPrefix    []hclRule `hcl:"agent_prefix"`
	Identity       []hclRule `hcl:"identity"`
	IdentityPrefix []hclRule `hcl:"identity_prefix"`
	Key            []hclRule `hcl:"key"`
	KeyPrefix      []hclRule `hcl:"key_prefix"`
	Node           []hclRule `hcl:"node"`
	NodePrefix     []hclRule `hcl:"node_prefix"`
	Service        []hclRule `hcl:"service"`
	ServicePrefix  []hclRule `hcl:"service_prefix"`
	Session        []hclRule `hcl:"session"`
	SessionPrefix  []hclRule `hcl:"session_prefix"`
	Event          []hclRule `hcl:"event"`
	EventPrefix    []hclRule `hcl:"event_prefix"`
	Query          []hclRule `hcl:"query"`
	QueryPrefix    []hclRule `hcl:"query_prefix"`
}

// segmentedKind describes one segmented resource: where its rules are
// decoded and kept, and how Consul names its rule type in an error
// ("Invalid key policy: &acl.KeyRule{Prefix:...}").
type segmentedKind struct {
	key        string // the exact-match key; the prefix key adds "_prefix"
	goType     string
	segField   string
	intentions bool // the rule takes `intentions`
	enterprise bool // Consul's rule type embeds its EnterpriseRule
	allowList  bool
	decoded    func(*hclRules) (exact, prefix []hclRule)
	rules      func(*Rules) *[]Rule
}

// segmentedKinds lists the segmented resources in the order Consul
// validates them, which decides the error of a document with several.
func segmentedKinds() []segmentedKind {
	return []segmentedKind{
		{key: "agent", goType: "AgentRule", segField: "Node",
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Agent, h.AgentPrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Agents }},
		{key: "identity", goType: "IdentityRule", segField: "Name", intentions: true, enterprise: true,
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Identity, h.IdentityPrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Identities }},
		{key: "key", goType: "KeyRule", segField: "Prefix", enterprise: true, allowList: true,
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Key, h.KeyPrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Keys }},
		{key: "node", goType: "NodeRule", segField: "Name", enterprise: true,
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Node, h.NodePrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Nodes }},
		{key: "service", goType: "ServiceRule", segField: "Name", intentions: true, enterprise: true,
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Service, h.ServicePrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Services }},
		{key: "session", goType: "SessionRule", segField: "Node",
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Session, h.SessionPrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Sessions }},
		{key: "event", goType: "EventRule", segField: "Event",
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Event, h.EventPrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Events }},
		{key: "query", goType: "PreparedQueryRule", segField: "Prefix",
			decoded: func(h *hclRules) ([]hclRule, []hclRule) { return h.Query, h.QueryPrefix },
			rules:   func(r *Rules) *[]Rule { return &r.Queries }},
	}
}

// describe renders a rule the way Consul's error prints it (Go's %#v of
// its rule type), so that a message reads the same from both.
func (k segmentedKind) describe(r hclRule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "&acl.%s{%s:%s, Policy:%s", k.goType, k.segField, strconv.Quote(r.Segment), strconv.Quote(r.Policy))
	if k.intentions {
		fmt.Fprintf(&b, ", Intentions:%s", strconv.Quote(r.Intentions))
	}
	if k.enterprise {
		b.WriteString(", EnterpriseRule:acl.EnterpriseRule{}")
	}
	b.WriteString("}")
	return b.String()
}

// ignoredKeys are Consul Enterprise's resources. Consul's community
// edition accepts and ignores them, and so does Trellis: a policy written
// for Enterprise still loads, granting nothing through them.
var ignoredKeys = map[string]bool{
	"namespace": true, "namespace_prefix": true, "partition": true, "partition_prefix": true,
}

// Parse reads a policy's rules, in HCL or in JSON (HCL v1 reads both), and
// checks them with Consul's messages: "Failed to parse ACL rules: ..." for
// a document that does not parse (with its line and column), "Invalid key
// policy: ..." and the like for a disposition a resource does not take.
// Unlike Consul, an unknown resource key or an argument set twice is an
// error rather than silently granting nothing.
func Parse(text string) (*Rules, error) {
	if strings.TrimSpace(text) == "" {
		return &Rules{}, nil
	}
	// HCL v1 reads a document that starts with "{" as JSON, and its JSON
	// parser accepts some truncated documents: check the JSON first.
	if trimmed := strings.TrimSpace(text); strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
		var v any
		if err := json.Unmarshal([]byte(trimmed), &v); err != nil {
			return nil, fmt.Errorf("Failed to parse ACL rules: invalid JSON: %w", err)
		}
	}
	file, err := hcl.Parse(text)
	if err != nil {
		return nil, fmt.Errorf("Failed to parse ACL rules: %w", err)
	}
	list, ok := file.Node.(*ast.ObjectList)
	if !ok {
		return nil, fmt.Errorf("Failed to parse ACL rules: the document is not an object")
	}
	if err := checkKeys(list); err != nil {
		return nil, fmt.Errorf("Failed to parse ACL rules: %w", err)
	}
	var h hclRules
	if err := hcl.DecodeObject(&h, file); err != nil {
		return nil, fmt.Errorf("Failed to parse ACL rules: %w", err)
	}
	return h.validate()
}

// knownKeys are the keys of the language.
func knownKeys() map[string]bool {
	keys := map[string]bool{"acl": true, "keyring": true, "operator": true, "mesh": true, "peering": true}
	for _, k := range segmentedKinds() {
		keys[k.key] = true
		keys[k.key+"_prefix"] = true
	}
	return keys
}

// checkKeys refuses unknown resources and arguments set twice, at the top
// level and inside each rule.
func checkKeys(list *ast.ObjectList) error {
	known := knownKeys()
	for _, item := range list.Items {
		key := item.Keys[0].Token
		name := keyName(key)
		if ignoredKeys[name] {
			continue
		}
		if !known[name] {
			return fmt.Errorf("%sunknown resource %q", at(key.Pos), name)
		}
	}
	return checkDuplicates(list)
}

// checkDuplicates refuses an attribute (`operator = ...`, a rule's
// `policy = ...`) given twice in one object, with Consul's message.
func checkDuplicates(list *ast.ObjectList) error {
	seen := make(map[string]bool)
	for _, item := range list.Items {
		if obj, ok := item.Val.(*ast.ObjectType); ok {
			if err := checkDuplicates(obj.List); err != nil {
				return err
			}
			continue
		}
		if len(item.Keys) != 1 {
			continue
		}
		key := item.Keys[0].Token
		name := keyName(key)
		if seen[name] {
			return fmt.Errorf("The argument %q at %s was already set. Each argument can only be defined once", name, key.Pos)
		}
		seen[name] = true
	}
	return nil
}

func keyName(t token.Token) string {
	if s, ok := t.Value().(string); ok {
		return s
	}
	return t.Text
}

// at prefixes a message with HCL's position form, when there is one (the
// JSON parser keeps none).
func at(p token.Pos) string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf("At %s: ", p)
}

// validate checks each disposition, in Consul's order and with its
// messages, and converts the document.
func (h *hclRules) validate() (*Rules, error) {
	out := &Rules{}
	var err error
	if out.ACL, err = single("acl", h.ACL); err != nil {
		return nil, err
	}
	for _, k := range segmentedKinds() {
		exact, prefix := k.decoded(h)
		for _, set := range []struct {
			rules  []hclRule
			prefix bool
		}{{exact, false}, {prefix, true}} {
			name := k.key
			if set.prefix {
				name += "_prefix"
			}
			for _, r := range set.rules {
				rule, err := k.convert(name, r, set.prefix)
				if err != nil {
					return nil, err
				}
				*k.rules(out) = append(*k.rules(out), rule)
			}
		}
	}
	if out.Keyring, err = single("keyring", h.Keyring); err != nil {
		return nil, err
	}
	if out.Operator, err = single("operator", h.Operator); err != nil {
		return nil, err
	}
	if out.Mesh, err = single("mesh", h.Mesh); err != nil {
		return nil, err
	}
	if out.Peering, err = single("peering", h.Peering); err != nil {
		return nil, err
	}
	return out, nil
}

func (k segmentedKind) convert(name string, r hclRule, prefix bool) (Rule, error) {
	a := parseAccess(r.Policy)
	if a == AccessUnknown || (a == AccessList && !k.allowList) {
		return Rule{}, fmt.Errorf("Invalid %s policy: %s", name, k.describe(r))
	}
	rule := Rule{Segment: r.Segment, Prefix: prefix, Access: a}
	if k.intentions && r.Intentions != "" {
		rule.Intentions = parseAccess(r.Intentions)
		if rule.Intentions == AccessUnknown || rule.Intentions == AccessList {
			return Rule{}, fmt.Errorf("Invalid %s intentions policy: %s", name, k.describe(r))
		}
	}
	return rule, nil
}

// single checks an unsegmented resource (`operator = "read"`); empty means
// no rule, as in Consul.
func single(name, v string) (Access, error) {
	if v == "" {
		return AccessUnknown, nil
	}
	a := parseAccess(v)
	if a == AccessUnknown || a == AccessList {
		return AccessUnknown, fmt.Errorf("Invalid %s policy: %s", name, strconv.Quote(v))
	}
	return a, nil
}
