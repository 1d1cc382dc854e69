package structs

import (
	"errors"
	"reflect"
	"sync"

	bexpr "github.com/hashicorp/go-bexpr"
)

// Filter expressions are go-bexpr's, at the version Consul pins (v0.1.2),
// so that an expression Consul accepts, what it selects and the error it
// fails with are the same here:
//
//	Service.Meta.version == "v1"
//	"canary" in Service.Tags and not (Service.Meta.env != prod)
//	Checks.Status != passing
//
// Selectors are the Go field names of the element filtered (a field's
// `bexpr:"name"` tag renames it, `bexpr:"-"` hides it, as on Consul's
// structs), case-sensitive; a selector through a list matches when any
// element matches; a missing map key makes ==, in and "is not empty"
// false and their negations true. bexpr checks selectors, operators and
// values against the element's type, so a Filter is bound to each type it
// evaluates.

// ErrFilterSyntax is what every error of an expression matches with
// errors.Is; the error's text is bexpr's own ("1:4 (3): no match found,
// ..."), which Consul prints after its prefix.
var ErrFilterSyntax = errors.New("invalid filter expression")

// filterError carries bexpr's error unchanged, so that its text is
// Consul's, while matching ErrFilterSyntax.
type filterError struct{ err error }

func (e *filterError) Error() string { return e.err.Error() }

// Is makes errors.Is(err, ErrFilterSyntax) hold for every bexpr error.
func (e *filterError) Is(target error) bool { return target == ErrFilterSyntax }

func (e *filterError) Unwrap() error { return e.err }

// Filter is a parsed expression, safe for concurrent use.
type Filter struct {
	expr string

	mu sync.Mutex
	// bound holds an evaluator per element type: bexpr's validation
	// stores values coerced to the selected fields' types in the
	// expression's tree, so one tree cannot serve two types, and an
	// evaluator created without a type binds itself, unsynchronised, on
	// first use.
	bound map[reflect.Type]boundFilter
}

type boundFilter struct {
	eval *bexpr.Evaluator
	err  error
}

// ParseFilter parses an expression. Only its syntax is checked here;
// Check or CompileFilterFor also check its selectors against a type.
func ParseFilter(expr string) (*Filter, error) {
	if _, err := bexpr.CreateEvaluator(expr, nil); err != nil {
		return nil, &filterError{err}
	}
	return &Filter{expr: expr}, nil
}

// Check reports whether the expression fits elements of elem's type
// (elem may be a nil pointer of it): every selector names a field, every
// operator applies to it and every value converts to it. The error is
// bexpr's, as Consul reports it.
func (f *Filter) Check(elem any) error {
	_, err := f.evaluator(reflect.TypeOf(elem))
	return err
}

func (f *Filter) evaluator(t reflect.Type) (*bexpr.Evaluator, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.bound[t]; ok {
		return b.eval, b.err
	}
	eval, err := bexpr.CreateEvaluatorForType(f.expr, nil, t)
	if err != nil {
		eval, err = nil, &filterError{err}
	}
	if f.bound == nil {
		f.bound = make(map[reflect.Type]boundFilter)
	}
	f.bound[t] = boundFilter{eval: eval, err: err}
	return eval, err
}

// Evaluate reports whether v (a struct, or a pointer to one, whose fields
// the selectors name) matches the expression. An expression that does not
// fit v's type (see Check) matches nothing.
func (f *Filter) Evaluate(v any) (match bool) {
	eval, err := f.evaluator(reflect.TypeOf(v))
	if err != nil {
		return false
	}
	// bexpr dereferences a nil struct pointer met on a selector's path
	// (a service without Weights, an agent service without Proxy) and
	// panics; Consul's elements never have one there, ours may, and such
	// an element has nothing the selector could match.
	defer func() {
		if recover() != nil {
			match = false
		}
	}()
	match, err = eval.Evaluate(v)
	return match && err == nil
}
