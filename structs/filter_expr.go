package structs

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// A small implementation of the filter expression language Consul takes
// from go-bexpr, enough for service-resolver subsets and ?filter=:
//
//	Service.Meta.version == "v1"
//	"canary" in Service.Tags and not (Service.Meta.env != prod)
//	Service.Tags is not empty or Node.Node matches "^web-"
//
// Operators: == != (selector against a value), [not] in (value in a
// selector), [not] contains and [not] matches (selector against a value),
// is [not] empty; combined with and, or, not and parentheses (not binds
// tightest, then and, then or). Values are quoted with "" or ``, or bare
// words (numbers, true, false, names). Selectors are dotted field names;
// a segment may also be a ["quoted"] map key.
//
// A selector that goes through a list (Checks.Status on a health result,
// Service.Proxy.Upstreams.DestinationName) matches when any element of the
// list matches, the operator (negated or not) applying to each element, as
// in go-bexpr: "Checks.Status != passing" keeps instances with at least one
// check that is not passing, and an empty list matches nothing. A selector
// naming a missing map key or field makes ==, in, contains, matches and
// "is not empty" false and their negations true.

// ErrFilterSyntax is what every parse error matches with errors.Is. The
// error's own text is go-bexpr's shape, "line:column (offset): message",
// which Consul prints after its own prefix.
var ErrFilterSyntax = errors.New("invalid filter expression")

// filterSyntaxError is a parse error at a byte offset of the expression.
type filterSyntaxError struct {
	line, column, offset int
	msg                  string
}

func (e *filterSyntaxError) Error() string {
	return fmt.Sprintf("%d:%d (%d): %s", e.line, e.column, e.offset, e.msg)
}

// Is makes errors.Is(err, ErrFilterSyntax) hold for every parse error.
func (e *filterSyntaxError) Is(target error) bool { return target == ErrFilterSyntax }

// syntaxError builds the error for offset off of src, counting lines and
// columns (in characters, from 1) the way go-bexpr's parser reports them.
func syntaxError(src string, off int, format string, args ...any) error {
	line, col := 1, 1
	for _, r := range src[:min(max(off, 0), len(src))] {
		if r == '\n' {
			line, col = line+1, 1
			continue
		}
		col++
	}
	return &filterSyntaxError{line: line, column: col, offset: off, msg: fmt.Sprintf(format, args...)}
}

// Filter is a parsed expression, safe for concurrent use.
type Filter struct {
	root filterNode
}

// ParseFilter parses an expression.
func ParseFilter(expr string) (*Filter, error) {
	toks, err := lexFilter(expr)
	if err != nil {
		return nil, err
	}
	p := &filterParser{src: expr, toks: toks}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.errorf(t, "unexpected %q", t.text)
	}
	return &Filter{root: n}, nil
}

// Evaluate reports whether v (a struct, or a pointer to one, whose fields
// the selectors name) matches the expression.
func (f *Filter) Evaluate(v any) bool {
	return f.root.eval(reflect.ValueOf(v))
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokLParen
	tokRParen
	tokEq
	tokNe
	tokString // quoted
	tokWord   // bare word or selector
)

type filterToken struct {
	kind tokKind
	text string
	pos  int
}

func lexFilter(s string) ([]filterToken, error) {
	var toks []filterToken
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			toks = append(toks, filterToken{tokLParen, "(", i})
			i++
		case c == ')':
			toks = append(toks, filterToken{tokRParen, ")", i})
			i++
		case c == '=' || c == '!':
			if i+1 >= len(s) || s[i+1] != '=' {
				return nil, syntaxError(s, i, "expected '%c='", c)
			}
			k := tokEq
			if c == '!' {
				k = tokNe
			}
			toks = append(toks, filterToken{k, s[i : i+2], i})
			i += 2
		case c == '"' || c == '`':
			str, n, err := lexQuoted(s[i:])
			if err != nil {
				return nil, syntaxError(s, i, "%v", err)
			}
			toks = append(toks, filterToken{tokString, str, i})
			i += n
		default:
			start := i
			for i < len(s) {
				c := s[i]
				if c == '[' {
					// A ["key"] segment of a selector.
					j := i + 1
					if j >= len(s) || (s[j] != '"' && s[j] != '`') {
						return nil, syntaxError(s, i, "expected a quoted key after '['")
					}
					_, n, err := lexQuoted(s[j:])
					if err != nil {
						return nil, syntaxError(s, j, "%v", err)
					}
					j += n
					if j >= len(s) || s[j] != ']' {
						return nil, syntaxError(s, j, "expected ']'")
					}
					i = j + 1
					continue
				}
				if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(' || c == ')' || c == '=' || c == '!' || c == '"' || c == '`' {
					break
				}
				i++
			}
			toks = append(toks, filterToken{tokWord, s[start:i], start})
		}
	}
	return append(toks, filterToken{tokEOF, "", len(s)}), nil
}

// lexQuoted reads a quoted string at the start of s and returns its value
// and length.
func lexQuoted(s string) (string, int, error) {
	q := s[0]
	if q == '`' {
		end := strings.IndexByte(s[1:], '`')
		if end < 0 {
			return "", 0, errors.New("unterminated string")
		}
		return s[1 : 1+end], end + 2, nil
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			v, err := strconv.Unquote(s[:i+1])
			if err != nil {
				return "", 0, fmt.Errorf("invalid string %s", s[:i+1])
			}
			return v, i + 1, nil
		}
	}
	return "", 0, errors.New("unterminated string")
}

type filterParser struct {
	src  string
	toks []filterToken
	pos  int
}

func (p *filterParser) peek() filterToken { return p.toks[p.pos] }
func (p *filterParser) peekAt(n int) filterToken {
	if p.pos+n < len(p.toks) {
		return p.toks[p.pos+n]
	}
	return p.toks[len(p.toks)-1]
}
func (p *filterParser) next() filterToken {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func (p *filterParser) errorf(t filterToken, format string, args ...any) error {
	return syntaxError(p.src, t.pos, format, args...)
}

// isKeyword reports whether t is the bare word kw (case-insensitive).
func isKeyword(t filterToken, kw string) bool {
	return t.kind == tokWord && strings.EqualFold(t.text, kw)
}

func (p *filterParser) or() (filterNode, error) {
	left, err := p.and()
	if err != nil {
		return nil, err
	}
	for isKeyword(p.peek(), "or") {
		p.next()
		right, err := p.and()
		if err != nil {
			return nil, err
		}
		left = &boolNode{or: true, left: left, right: right}
	}
	return left, nil
}

func (p *filterParser) and() (filterNode, error) {
	left, err := p.not()
	if err != nil {
		return nil, err
	}
	for isKeyword(p.peek(), "and") {
		p.next()
		right, err := p.not()
		if err != nil {
			return nil, err
		}
		left = &boolNode{left: left, right: right}
	}
	return left, nil
}

func (p *filterParser) not() (filterNode, error) {
	// "not" negates an expression unless it starts "not in", which cannot
	// happen here because a match starts with an operand.
	if isKeyword(p.peek(), "not") {
		p.next()
		n, err := p.not()
		if err != nil {
			return nil, err
		}
		return &notNode{n: n}, nil
	}
	return p.primary()
}

func (p *filterParser) primary() (filterNode, error) {
	t := p.peek()
	switch t.kind {
	case tokLParen:
		p.next()
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tokRParen {
			return nil, p.errorf(c, "expected ')'")
		}
		return n, nil
	case tokWord, tokString:
		return p.match()
	}
	if t.kind == tokEOF {
		return nil, p.errorf(t, "unexpected end of expression")
	}
	return nil, p.errorf(t, "unexpected %q", t.text)
}

func (p *filterParser) match() (filterNode, error) {
	first := p.next()
	// value [not] in selector
	if isKeyword(p.peek(), "in") || (isKeyword(p.peek(), "not") && isKeyword(p.peekAt(1), "in")) {
		negate := isKeyword(p.peek(), "not")
		if negate {
			p.next()
		}
		p.next()
		sel, err := p.selector(p.next())
		if err != nil {
			return nil, err
		}
		return &matchNode{op: opIn, sel: sel, value: first.text, negate: negate}, nil
	}
	sel, err := p.selector(first)
	if err != nil {
		return nil, err
	}
	op := p.next()
	switch {
	case op.kind == tokEq || op.kind == tokNe:
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		return &matchNode{op: opEqual, sel: sel, value: v, negate: op.kind == tokNe}, nil
	case isKeyword(op, "is"):
		negate := false
		if isKeyword(p.peek(), "not") {
			p.next()
			negate = true
		}
		if e := p.next(); !isKeyword(e, "empty") {
			return nil, p.errorf(e, "expected 'empty'")
		}
		return &matchNode{op: opEmpty, sel: sel, negate: negate}, nil
	case isKeyword(op, "not") || isKeyword(op, "contains") || isKeyword(op, "matches"):
		negate := false
		if isKeyword(op, "not") {
			negate = true
			op = p.next()
		}
		kind := opContains
		switch {
		case isKeyword(op, "contains"):
		case isKeyword(op, "matches"):
			kind = opMatches
		default:
			return nil, p.errorf(op, "expected 'contains' or 'matches'")
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n := &matchNode{op: kind, sel: sel, value: v, negate: negate}
		if kind == opMatches {
			re, err := regexp.Compile(v)
			if err != nil {
				return nil, p.errorf(op, "invalid regular expression %q: %v", v, err)
			}
			n.re = re
		}
		return n, nil
	}
	if op.kind == tokEOF {
		return nil, p.errorf(op, "unexpected end of expression, expected an operator")
	}
	return nil, p.errorf(op, "unexpected %q, expected an operator", op.text)
}

func (p *filterParser) value() (string, error) {
	t := p.next()
	if t.kind != tokString && t.kind != tokWord {
		if t.kind == tokEOF {
			return "", p.errorf(t, "unexpected end of expression, expected a value")
		}
		return "", p.errorf(t, "unexpected %q, expected a value", t.text)
	}
	return t.text, nil
}

// selector splits a selector word into its segments.
func (p *filterParser) selector(t filterToken) ([]string, error) {
	if t.kind != tokWord {
		return nil, p.errorf(t, "expected a selector, found %q", t.text)
	}
	var segs []string
	s := t.text
	for s != "" {
		if s[0] == '[' {
			key, n, err := lexQuoted(s[1:])
			if err != nil {
				return nil, p.errorf(t, "invalid selector %q", t.text)
			}
			segs = append(segs, key)
			s = strings.TrimPrefix(s[1+n:], "]")
			s = strings.TrimPrefix(s, ".")
			continue
		}
		end := strings.IndexAny(s, ".[")
		seg := s
		if end >= 0 {
			seg = s[:end]
			s = strings.TrimPrefix(s[end:], ".")
		} else {
			s = ""
		}
		if !isIdentifier(seg) {
			return nil, p.errorf(t, "invalid selector %q", t.text)
		}
		segs = append(segs, seg)
	}
	if len(segs) == 0 {
		return nil, p.errorf(t, "invalid selector %q", t.text)
	}
	return segs, nil
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || unicode.IsLetter(r) || (i > 0 && (unicode.IsDigit(r) || r == '-'))) {
			return false
		}
	}
	return true
}

type filterNode interface {
	eval(v reflect.Value) bool
}

type boolNode struct {
	or          bool
	left, right filterNode
}

func (n *boolNode) eval(v reflect.Value) bool {
	if n.or {
		return n.left.eval(v) || n.right.eval(v)
	}
	return n.left.eval(v) && n.right.eval(v)
}

type notNode struct{ n filterNode }

func (n *notNode) eval(v reflect.Value) bool { return !n.n.eval(v) }

type matchOp int

const (
	opEqual matchOp = iota
	opIn
	opContains
	opMatches
	opEmpty
)

type matchNode struct {
	op     matchOp
	sel    []string
	value  string
	negate bool
	re     *regexp.Regexp
}

func (n *matchNode) eval(v reflect.Value) bool { return n.evalAt(v, n.sel) }

// evalAt resolves the selector segments sel from v and applies the match
// to what they name. A list met before the last segment is searched: the
// match holds when it holds for any element (go-bexpr's implicit "any"),
// so an empty list matches nothing, whatever the operator.
func (n *matchNode) evalAt(v reflect.Value, sel []string) bool {
	v = indirect(v)
	if len(sel) == 0 {
		return n.apply(v)
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if n.evalAt(v.Index(i), sel) {
				return true
			}
		}
		return false
	case reflect.Struct:
		// By name, then case-insensitively (Consul's selectors are its
		// JSON field names, which are the Go names here but for case).
		seg := sel[0]
		f := v.FieldByName(seg)
		if !f.IsValid() {
			f = v.FieldByNameFunc(func(name string) bool { return strings.EqualFold(name, seg) })
		}
		if !f.IsValid() {
			return n.apply(reflect.Value{})
		}
		return n.evalAt(f, sel[1:])
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return n.apply(reflect.Value{})
		}
		e := v.MapIndex(reflect.ValueOf(sel[0]).Convert(v.Type().Key()))
		if !e.IsValid() {
			return n.apply(reflect.Value{})
		}
		return n.evalAt(e, sel[1:])
	}
	// Nothing to select into (a nil pointer, a scalar): the selector names
	// nothing.
	return n.apply(reflect.Value{})
}

// apply runs the operator on target, the invalid Value when the selector
// named nothing.
func (n *matchNode) apply(target reflect.Value) bool {
	found := target.IsValid()
	var ok bool
	switch n.op {
	case opEmpty:
		ok = !found || isEmptyValue(target)
	case opEqual:
		ok = found && isScalar(target) && scalarString(target) == n.value
	case opIn, opContains:
		ok = found && containsValue(target, n.value)
	case opMatches:
		ok = found && isScalar(target) && n.re.MatchString(scalarString(target))
	}
	return ok != n.negate
}

// indirect follows pointers and interfaces; a nil one gives the invalid
// Value.
func indirect(v reflect.Value) reflect.Value {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

func isScalar(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func scalarString(v reflect.Value) string {
	if !isScalar(v) {
		return ""
	}
	return fmt.Sprint(v.Interface())
}

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// containsValue: an element of a list, a key of a map, or a substring.
func containsValue(v reflect.Value, s string) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			e := v.Index(i)
			for e.Kind() == reflect.Pointer || e.Kind() == reflect.Interface {
				if e.IsNil() {
					break
				}
				e = e.Elem()
			}
			if isScalar(e) && scalarString(e) == s {
				return true
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String {
			return v.MapIndex(reflect.ValueOf(s).Convert(v.Type().Key())).IsValid()
		}
	case reflect.String:
		return strings.Contains(v.String(), s)
	}
	return false
}
