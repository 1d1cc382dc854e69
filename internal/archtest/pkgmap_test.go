package archtest

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
)

// rule is one line of the map: the packages matching pattern may import
// the module packages matching any of allowed.
type rule struct {
	pattern string
	allowed []string
	line    int
}

// pkg is one package of the module, with the module packages it imports;
// paths are relative to the module.
type pkg struct {
	path    string
	imports []string
}

// parseMap reads the map's text format (see imports.txt's header).
func parseMap(r io.Reader) ([]rule, error) {
	var rules []rule
	seen := make(map[string]int)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		pattern, list, ok := strings.Cut(text, ":")
		pattern = strings.TrimSpace(pattern)
		if !ok || pattern == "" || strings.ContainsAny(pattern, " \t") {
			return nil, fmt.Errorf("line %d: want \"pattern: allowed ...\", got %q", n, text)
		}
		if first, dup := seen[pattern]; dup {
			return nil, fmt.Errorf("line %d: %s already has a rule on line %d", n, pattern, first)
		}
		seen[pattern] = n
		rules = append(rules, rule{pattern: pattern, allowed: strings.Fields(list), line: n})
	}
	return rules, sc.Err()
}

// matches reports whether the package path falls under pattern: the path
// itself, or with "x/..." x and every package below it.
func matches(pattern, path string) bool {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == tree || strings.HasPrefix(path, tree+"/")
	}
	return pattern == path
}

// specificity orders the rules matching one package: an exact path beats
// every subtree, a deeper subtree a shallower one.
func specificity(pattern string) int {
	if tree, ok := strings.CutSuffix(pattern, "/..."); ok {
		return len(tree)
	}
	return 1 << 30
}

// governing returns the rule a package obeys, or nil when none matches.
func governing(rules []rule, path string) *rule {
	var best *rule
	for i := range rules {
		r := &rules[i]
		if matches(r.pattern, path) && (best == nil || specificity(r.pattern) > specificity(best.pattern)) {
			best = r
		}
	}
	return best
}

// check returns one line per violation of the map by pkgs, sorted; none
// means the tree keeps to the map.
func check(rules []rule, pkgs []pkg) []string {
	var problems []string
	covers := func(pattern string) bool {
		for _, p := range pkgs {
			if matches(pattern, p.path) {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		if !covers(r.pattern) {
			problems = append(problems, fmt.Sprintf("imports.txt:%d: rule %s matches no package of the module", r.line, r.pattern))
		}
		for _, a := range r.allowed {
			if !covers(a) {
				problems = append(problems, fmt.Sprintf("imports.txt:%d: %s allows %s, which names no package of the module", r.line, r.pattern, a))
			}
		}
	}
	for _, p := range pkgs {
		r := governing(rules, p.path)
		if r == nil {
			problems = append(problems, fmt.Sprintf("%s: no rule of imports.txt matches it; place it on the map", p.path))
			continue
		}
		for _, imp := range p.imports {
			if !allows(r, imp) {
				problems = append(problems, fmt.Sprintf("%s imports %s, which imports.txt:%d (%s) does not allow", p.path, imp, r.line, r.pattern))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

func allows(r *rule, imp string) bool {
	for _, a := range r.allowed {
		if matches(a, imp) {
			return true
		}
	}
	return false
}
