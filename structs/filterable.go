package structs

import (
	"errors"
	"fmt"
)

// Consul's ?filter= on reads. The server that answers a read compiles the
// expression against the reply's element type before running the endpoint
// (CompileFilterFor), runs it, then keeps only the matching elements of
// the reply (Filterable). Each reply type below filters the elements
// Consul's documentation names for its endpoints; the selectors are the
// elements' field names.

// ErrInvalidFilter begins the error of a ?filter= that does not compile,
// in Consul's words (it wraps go-bexpr's error as bexpr's CreateFilter
// does): clients see "Failed to create boolean expression evaluator:
// 1:4 (3): ..." as a 500.
var ErrInvalidFilter = newError("InvalidFilter", CodeInvalidArgument, "Failed to create boolean expression evaluator")

// CompileFilter parses a ?filter= expression, failing with ErrInvalidFilter
// and bexpr's reason.
func CompileFilter(expr string) (*Filter, error) {
	f, err := ParseFilter(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	return f, nil
}

// CompileFilterFor is CompileFilter that also checks the expression
// against the type of elem (see Filter.Check), as Consul's servers do
// before they read: a selector the elements lack, or a value their field
// cannot hold, fails with ErrInvalidFilter too.
func CompileFilterFor(expr string, elem any) (*Filter, error) {
	f, err := CompileFilter(expr)
	if err != nil {
		return nil, err
	}
	if err := f.Check(elem); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	return f, nil
}

// IsInvalidFilter reports whether err is CompileFilter's, also after it
// crossed the RPC boundary (a client agent's forwarded read).
func IsInvalidFilter(err error) bool {
	return errors.Is(err, ErrInvalidFilter)
}

// Filterable is a read reply that ?filter= narrows. FilterElem returns a
// nil pointer of the type of the elements filtered, which the selectors
// start from. FilterResult replaces the reply's result with the elements
// keep accepts, in order, in a NEW slice or map: the old one may be shared
// with the state store and is never modified. keep gets a pointer to each
// element.
type Filterable interface {
	FilterElem() any
	FilterResult(keep func(elem any) bool)
}

// FilterElem returns the type of a catalog node.
func (*IndexedNodes) FilterElem() any { return (*Node)(nil) }

// FilterResult keeps the nodes keep accepts (/v1/catalog/nodes: ID, Node,
// Address, Datacenter, TaggedAddresses, Meta).
func (r *IndexedNodes) FilterResult(keep func(any) bool) {
	r.Nodes = filterSlice(r.Nodes, func(n **Node) bool { return keep(*n) })
}

// FilterElem returns the type of a catalog service instance.
func (*IndexedServiceNodes) FilterElem() any { return (*ServiceNode)(nil) }

// FilterResult keeps the instances keep accepts (/v1/catalog/service and
// /v1/catalog/connect: the flattened ServiceNode fields).
func (r *IndexedServiceNodes) FilterResult(keep func(any) bool) {
	r.ServiceNodes = filterSlice(r.ServiceNodes, func(sn **ServiceNode) bool { return keep(*sn) })
}

// FilterElem returns the type of one of a node's services.
func (*IndexedNodeServices) FilterElem() any { return (*NodeService)(nil) }

// FilterResult keeps the node's services keep accepts (/v1/catalog/node:
// Consul filters the values of the Services map, not the node).
func (r *IndexedNodeServices) FilterResult(keep func(any) bool) {
	if r.NodeServices == nil {
		return
	}
	services := make(map[string]*NodeService, len(r.NodeServices.Services))
	for id, svc := range r.NodeServices.Services {
		if keep(svc) {
			services[id] = svc
		}
	}
	r.NodeServices = &NodeServices{Node: r.NodeServices.Node, Services: services}
}

// FilterElem returns the type of a health check.
func (*IndexedHealthChecks) FilterElem() any { return (*HealthCheck)(nil) }

// FilterResult keeps the checks keep accepts (/v1/health/node,
// /v1/health/checks, /v1/health/state: the HealthCheck fields).
func (r *IndexedHealthChecks) FilterResult(keep func(any) bool) {
	r.HealthChecks = filterSlice(r.HealthChecks, func(c **HealthCheck) bool { return keep(*c) })
}

// FilterElem returns the type of an instance with its node and checks.
func (*IndexedCheckServiceNodes) FilterElem() any { return (*CheckServiceNode)(nil) }

// FilterResult keeps the instances keep accepts (/v1/health/service and
// /v1/health/connect: Node.*, Service.* and Checks.*).
func (r *IndexedCheckServiceNodes) FilterResult(keep func(any) bool) {
	r.Nodes = filterSlice(r.Nodes, func(c *CheckServiceNode) bool { return keep(c) })
}

// FilterElem returns the type of an intention.
func (*IndexedIntentions) FilterElem() any { return (*Intention)(nil) }

// FilterResult keeps the intentions keep accepts (/v1/connect/intentions).
func (r *IndexedIntentions) FilterResult(keep func(any) bool) {
	r.Intentions = filterSlice(r.Intentions, func(x **Intention) bool { return keep(*x) })
}

// filterSlice returns a new slice of the elements of in that keep
// accepts (never nil, so that "nothing matched" encodes as []).
func filterSlice[S ~[]E, E any](in S, keep func(*E) bool) S {
	out := make(S, 0, len(in))
	for i := range in {
		if keep(&in[i]) {
			out = append(out, in[i])
		}
	}
	return out
}
