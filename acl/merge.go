package acl

import (
	"sort"
	"strings"
)

// precedence orders the levels for merging rules of one segment from
// several policies: deny beats write, write beats list, list beats read.
func precedence(a Access) int {
	switch a {
	case AccessDeny:
		return 4
	case AccessWrite:
		return 3
	case AccessList:
		return 2
	case AccessRead:
		return 1
	}
	return 0
}

// table holds the merged rules of one segmented resource.
type table struct {
	exact  map[string]Access
	prefix map[string]Access
	// byLength lists the prefix segments longest first, so that the first
	// that matches is the most specific.
	byLength []string
}

func newTable() *table {
	return &table{exact: make(map[string]Access), prefix: make(map[string]Access)}
}

// add merges one rule into the table.
func (t *table) add(segment string, prefix bool, a Access) {
	m := t.exact
	if prefix {
		m = t.prefix
	}
	if old, ok := m[segment]; !ok || precedence(a) > precedence(old) {
		m[segment] = a
	}
}

// seal orders the prefixes once every rule is in.
func (t *table) seal() {
	t.byLength = t.byLength[:0]
	for p := range t.prefix {
		t.byLength = append(t.byLength, p)
	}
	sort.Slice(t.byLength, func(i, j int) bool {
		if len(t.byLength[i]) != len(t.byLength[j]) {
			return len(t.byLength[i]) > len(t.byLength[j])
		}
		return t.byLength[i] < t.byLength[j]
	})
}

// lookup returns the rule that governs segment: its exact rule if it has
// one, else the longest prefix rule that matches it. An exact rule wins
// over every prefix rule, even a deny, as in Consul.
func (t *table) lookup(segment string) (Access, bool) {
	if a, ok := t.exact[segment]; ok {
		return a, true
	}
	if p, ok := t.longestPrefix(segment); ok {
		return t.prefix[p], true
	}
	return AccessUnknown, false
}

func (t *table) longestPrefix(segment string) (string, bool) {
	for _, p := range t.byLength {
		if strings.HasPrefix(segment, p) {
			return p, true
		}
	}
	return "", false
}

// segments lists every segment that has a rule, exact or prefix.
func (t *table) segments() []string {
	seen := make(map[string]bool, len(t.exact)+len(t.prefix))
	var out []string
	for _, m := range []map[string]Access{t.exact, t.prefix} {
		for s := range m {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// enforce decides a required level against a rule's level: write grants
// everything, list grants list and read, read grants read, deny nothing;
// no rule leaves the decision to the next layer.
func enforce(rule, required Access) Decision {
	switch rule {
	case AccessWrite:
		return Allow
	case AccessList:
		if required == AccessList || required == AccessRead {
			return Allow
		}
		return Deny
	case AccessRead:
		if required == AccessRead {
			return Allow
		}
		return Deny
	case AccessDeny:
		return Deny
	}
	return undecided
}

// leafDecision is the decision of the rules at one segment for a question
// about every segment (see all): the prefix rule's, unless an exact rule decides
// otherwise without the prefix rule denying.
func (t *table) leafDecision(segment string, required Access) Decision {
	d := undecided
	if a, ok := t.prefix[segment]; ok {
		d = enforce(a, required)
	}
	a, ok := t.exact[segment]
	if !ok || d == Deny {
		return d
	}
	if e := enforce(a, required); e != undecided {
		return e
	}
	return d
}

// all decides "required on every segment" (ServiceReadAll,
// IntentionWrite on "*"): denied if any rule denies it; allowed only if
// the catch-all prefix "" grants it; otherwise left to the next layer.
func (t *table) all(required Access) Decision {
	d := undecided
	if a, ok := t.prefix[""]; ok {
		if d = enforce(a, required); d == Deny {
			return Deny
		}
	}
	for _, s := range t.segments() {
		if t.leafDecision(s, required) == Deny {
			return Deny
		}
	}
	return d
}

// any decides "required on some segment" (ServiceWriteAny, IntentionRead
// on "*"): allowed if any rule grants it; a catch-all prefix "" that
// denies it denies unless a more specific rule grants it.
func (t *table) any(required Access) Decision {
	d := undecided
	if a, ok := t.prefix[""]; ok {
		if d = enforce(a, required); d == Allow {
			return Allow
		}
	}
	for _, m := range []map[string]Access{t.prefix, t.exact} {
		for _, a := range m {
			if enforce(a, required) == Allow {
				return Allow
			}
		}
	}
	return d
}

// writePrefix decides whether everything under prefix may be written (a
// recursive KV delete): the longest prefix rule covering it must grant
// write, and no rule inside it may grant less.
func (t *table) writePrefix(prefix string) Decision {
	d := undecided
	if p, ok := t.longestPrefix(prefix); ok {
		if t.prefix[p] != AccessWrite {
			return Deny
		}
		d = Allow
	}
	for _, m := range []map[string]Access{t.exact, t.prefix} {
		for s, a := range m {
			if strings.HasPrefix(s, prefix) && a != AccessWrite {
				return Deny
			}
		}
	}
	return d
}
