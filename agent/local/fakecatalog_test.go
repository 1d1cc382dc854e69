package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// fakeCatalog is a small in-memory catalog of one datacenter behind the
// RPC interface, with the semantics of the real server that matter to the
// syncer (node required, address unless SkipNodeUpdate, a service check
// needs its service, deregistering a service drops its checks). It records
// every call and can be made to fail.
type fakeCatalog struct {
	mu       sync.Mutex
	nodes    map[string]*structs.Node
	services map[string]map[string]*structs.NodeService // node -> id -> service
	checks   map[string]map[string]*structs.HealthCheck // node -> id -> check
	calls    []recordedCall
	// failWith, when set, fails every call.
	failWith error
	// block makes calls wait for their context.
	block bool
	// onWrite runs (without the lock) before a write is applied.
	onWrite func(method string, args any)
}

type recordedCall struct {
	method string
	reg    *structs.RegisterRequest
	dereg  *structs.DeregisterRequest
	err    error
}

func newFakeCatalog() *fakeCatalog {
	return &fakeCatalog{
		nodes:    make(map[string]*structs.Node),
		services: make(map[string]map[string]*structs.NodeService),
		checks:   make(map[string]map[string]*structs.HealthCheck),
	}
}

var errMissingService = errors.New("Missing service")

func (f *fakeCatalog) RPC(ctx context.Context, method string, args, reply any) error {
	f.mu.Lock()
	block, hook := f.block, f.onWrite
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	if hook != nil && (method == structs.MethodCatalogRegister.Name() || method == structs.MethodCatalogDeregister.Name()) {
		hook(method, args)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	failWith := f.failWith
	rc := recordedCall{method: method, err: failWith}
	switch a := args.(type) {
	case *structs.RegisterRequest:
		c := *a
		rc.reg = &c
	case *structs.DeregisterRequest:
		c := *a
		rc.dereg = &c
	}
	defer func() { f.calls = append(f.calls, rc) }()
	if failWith != nil {
		return failWith
	}
	switch method {
	case structs.MethodCatalogRegister.Name():
		rc.err = f.register(args.(*structs.RegisterRequest))
		return rc.err
	case structs.MethodCatalogDeregister.Name():
		f.deregister(args.(*structs.DeregisterRequest))
		return nil
	case structs.MethodCatalogNodeServices.Name():
		node := args.(*structs.NodeSpecificRequest).Node
		out := reply.(*structs.IndexedNodeServices)
		out.Index = 1
		if n := f.nodes[node]; n != nil {
			ns := &structs.NodeServices{Node: cloneNode(n), Services: map[string]*structs.NodeService{}}
			for id, s := range f.services[node] {
				ns.Services[id] = s.Clone()
			}
			out.NodeServices = ns
		}
		return nil
	case structs.MethodHealthNodeChecks.Name():
		node := args.(*structs.NodeSpecificRequest).Node
		out := reply.(*structs.IndexedHealthChecks)
		out.Index = 1
		for _, c := range f.checks[node] {
			out.HealthChecks = append(out.HealthChecks, c.Clone())
		}
		return nil
	}
	return fmt.Errorf("%w: %s", structs.ErrUnknownMethod, method)
}

func cloneNode(n *structs.Node) *structs.Node {
	c := *n
	c.TaggedAddresses = maps.Clone(n.TaggedAddresses)
	c.Meta = maps.Clone(n.Meta)
	return &c
}

func (f *fakeCatalog) register(req *structs.RegisterRequest) error {
	if req.Node == "" {
		return errors.New("Must provide node")
	}
	if req.Address == "" && !req.SkipNodeUpdate {
		return errors.New("Must provide address if SkipNodeUpdate is not set")
	}
	if f.nodes[req.Node] == nil || !req.SkipNodeUpdate {
		f.nodes[req.Node] = &structs.Node{ID: req.ID, Node: req.Node, Address: req.Address, Datacenter: req.Datacenter,
			TaggedAddresses: maps.Clone(req.TaggedAddresses), Meta: maps.Clone(req.NodeMeta)}
	}
	if f.services[req.Node] == nil {
		f.services[req.Node] = map[string]*structs.NodeService{}
		f.checks[req.Node] = map[string]*structs.HealthCheck{}
	}
	if req.Service != nil {
		svc := req.Service.Clone()
		svc.LocallyRegisteredAsSidecar = false
		f.services[req.Node][svc.ID] = svc
		for _, c := range f.checks[req.Node] {
			if c.ServiceID == svc.ID {
				c.ServiceName, c.ServiceTags = svc.Service, slices.Clone(svc.Tags)
			}
		}
	}
	checks := append(structs.HealthChecks{}, req.Checks...)
	if req.Check != nil {
		checks = append(checks, req.Check)
	}
	for _, in := range checks {
		c := in.Clone()
		c.Node = req.Node
		if c.ServiceID != "" {
			svc := f.services[req.Node][c.ServiceID]
			if svc == nil {
				return errMissingService
			}
			c.ServiceName, c.ServiceTags = svc.Service, slices.Clone(svc.Tags)
		}
		f.checks[req.Node][c.CheckID] = c
	}
	return nil
}

func (f *fakeCatalog) deregister(req *structs.DeregisterRequest) {
	switch {
	case req.ServiceID != "":
		delete(f.services[req.Node], req.ServiceID)
		for id, c := range f.checks[req.Node] {
			if c.ServiceID == req.ServiceID {
				delete(f.checks[req.Node], id)
			}
		}
	case req.CheckID != "":
		delete(f.checks[req.Node], req.CheckID)
	default:
		delete(f.nodes, req.Node)
		delete(f.services, req.Node)
		delete(f.checks, req.Node)
	}
}

// Accessors and manipulations behind the agent's back.

func (f *fakeCatalog) node(name string) *structs.Node {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[name]; n != nil {
		return cloneNode(n)
	}
	return nil
}

func (f *fakeCatalog) service(node, id string) *structs.NodeService {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.services[node][id]; s != nil {
		return s.Clone()
	}
	return nil
}

func (f *fakeCatalog) check(node, id string) *structs.HealthCheck {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.checks[node][id]; c != nil {
		return c.Clone()
	}
	return nil
}

func (f *fakeCatalog) serviceIDs(node string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.services[node] {
		out = append(out, id)
	}
	return sortedStrings(out)
}

func (f *fakeCatalog) checkIDs(node string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.checks[node] {
		out = append(out, id)
	}
	return sortedStrings(out)
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// put stores records directly (drift the agent did not cause).
func (f *fakeCatalog) put(node string, svc *structs.NodeService, checks ...*structs.HealthCheck) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.nodes[node] == nil {
		f.nodes[node] = &structs.Node{Node: node, Address: "127.0.0.1"}
		f.services[node] = map[string]*structs.NodeService{}
		f.checks[node] = map[string]*structs.HealthCheck{}
	}
	if svc != nil {
		f.services[node][svc.ID] = svc.Clone()
	}
	for _, c := range checks {
		c = c.Clone()
		c.Node = node
		f.checks[node][c.CheckID] = c
	}
}

func (f *fakeCatalog) deleteService(node, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deregister(&structs.DeregisterRequest{Node: node, ServiceID: id})
}

func (f *fakeCatalog) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failWith = err
}

func (f *fakeCatalog) setBlock(b bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.block = b
}

func (f *fakeCatalog) setOnWrite(fn func(string, any)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onWrite = fn
}

// writes counts the register and deregister calls so far.
func (f *fakeCatalog) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.method == structs.MethodCatalogRegister.Name() || c.method == structs.MethodCatalogDeregister.Name() {
			n++
		}
	}
	return n
}

func (f *fakeCatalog) callsSince(i int) []recordedCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recordedCall(nil), f.calls[i:]...)
}

func (f *fakeCatalog) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func describeCalls(cs []recordedCall) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s", c.method)
		if c.reg != nil && c.reg.Service != nil {
			fmt.Fprintf(&b, " svc=%s", c.reg.Service.ID)
		}
		if c.reg != nil && c.reg.Check != nil {
			fmt.Fprintf(&b, " chk=%s", c.reg.Check.CheckID)
		}
		if c.dereg != nil {
			fmt.Fprintf(&b, " -svc=%s -chk=%s", c.dereg.ServiceID, c.dereg.CheckID)
		}
		b.WriteString("; ")
	}
	return b.String()
}

// waitFor polls cond until it holds or the limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
