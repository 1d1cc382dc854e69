package structs

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Prepared query templates: a query with Template.Type name_prefix_match
// answers every name its Name prefixes, and its string fields may hold
// Consul's interpolations, filled from the name that was asked for:
//
//	${name.full}    the name asked for
//	${name.prefix}  the template's Name
//	${name.suffix}  what follows the prefix
//	${match(N)}     capture N of Template.Regexp against the full name (0 is
//	                the whole match; "" when it did not match)
//	${agent.segment} the network segment of the agent running the query
//
// Only these are understood (Consul's HIL accepts more expressions, none
// of which its documentation gives for queries); anything else is an
// error when the template is stored.

// IsTemplate reports whether the query is a template.
func (q *PreparedQuery) IsTemplate() bool { return q.Template.Type != "" }

// ValidateTemplate checks a template's type, regexp and interpolations, with
// Consul's messages; a query that is not a template passes.
func (q *PreparedQuery) ValidateTemplate() error {
	if !q.IsTemplate() {
		return nil
	}
	if q.Template.Type != QueryTemplateTypeNamePrefixMatch {
		return fmt.Errorf("Bad Template: Bad Type '%s'", q.Template.Type)
	}
	if q.Template.Regexp != "" {
		if _, err := regexp.Compile(q.Template.Regexp); err != nil {
			return fmt.Errorf("Bad Template: Bad Regexp: %w", err)
		}
	}
	if _, err := q.Render(q.Name, ""); err != nil {
		return fmt.Errorf("Bad Template: %w", err)
	}
	return nil
}

// Render returns a copy of the template with every interpolation filled
// for name (which the template's Name prefixes); a query that is not a
// template comes back as a plain copy.
func (q *PreparedQuery) Render(name, agentSegment string) (*PreparedQuery, error) {
	out := q.Clone()
	if !q.IsTemplate() {
		return out, nil
	}
	var matches []string
	if q.Template.Regexp != "" {
		re, err := regexp.Compile(q.Template.Regexp)
		if err != nil {
			return nil, fmt.Errorf("Bad Regexp: %w", err)
		}
		matches = re.FindStringSubmatch(name)
	}
	vars := map[string]string{
		"name.full":     name,
		"name.prefix":   q.Name,
		"name.suffix":   "",
		"agent.segment": agentSegment,
	}
	if len(name) >= len(q.Name) {
		vars["name.suffix"] = name[len(q.Name):]
	}
	r := &renderer{vars: vars, matches: matches}
	sq := &out.Service
	sq.Service = r.str(sq.Service)
	sq.Near = r.str(sq.Near)
	sq.Tags = r.list(sq.Tags)
	sq.IgnoreCheckIDs = r.list(sq.IgnoreCheckIDs)
	sq.Failover.Datacenters = r.list(sq.Failover.Datacenters)
	for i := range sq.Failover.Targets {
		sq.Failover.Targets[i].Datacenter = r.str(sq.Failover.Targets[i].Datacenter)
		sq.Failover.Targets[i].Peer = r.str(sq.Failover.Targets[i].Peer)
	}
	sq.NodeMeta = r.meta(sq.NodeMeta)
	sq.ServiceMeta = r.meta(sq.ServiceMeta)
	out.DNS.TTL = r.str(out.DNS.TTL)
	if r.err != nil {
		return nil, r.err
	}
	if q.Template.RemoveEmptyTags {
		kept := sq.Tags[:0]
		for _, t := range sq.Tags {
			if t != "" {
				kept = append(kept, t)
			}
		}
		sq.Tags = kept
	}
	return out, nil
}

// renderer fills interpolations, keeping the first error.
type renderer struct {
	vars    map[string]string
	matches []string
	err     error
}

func (r *renderer) list(in []string) []string {
	for i := range in {
		in[i] = r.str(in[i])
	}
	return in
}

func (r *renderer) meta(in map[string]string) map[string]string {
	for k, v := range in {
		in[k] = r.str(v)
	}
	return in
}

func (r *renderer) str(s string) string {
	if r.err != nil || !strings.Contains(s, "${") {
		return s
	}
	var b strings.Builder
	for {
		start := strings.Index(s, "${")
		if start < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := strings.Index(s[start:], "}")
		if end < 0 {
			r.err = fmt.Errorf("unterminated interpolation in %q", s)
			return s
		}
		b.WriteString(s[:start])
		v, err := r.eval(strings.TrimSpace(s[start+2 : start+end]))
		if err != nil {
			r.err = err
			return s
		}
		b.WriteString(v)
		s = s[start+end+1:]
	}
}

func (r *renderer) eval(expr string) (string, error) {
	if v, ok := r.vars[expr]; ok {
		return v, nil
	}
	if arg, ok := strings.CutPrefix(expr, "match("); ok {
		arg, ok = strings.CutSuffix(arg, ")")
		n, err := strconv.Atoi(strings.TrimSpace(arg))
		if !ok || err != nil || n < 0 {
			return "", fmt.Errorf("invalid interpolation ${%s}: match takes one non-negative integer", expr)
		}
		if n < len(r.matches) {
			return r.matches[n], nil
		}
		return "", nil
	}
	return "", fmt.Errorf("unknown variable accessed: %s", expr)
}
