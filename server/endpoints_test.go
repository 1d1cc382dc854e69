package server

import (
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// TestEveryMethodHasOneHandler: the server answers exactly the methods
// structs describes, each with a handler of the descriptor's types, and
// treats as writes exactly the methods described as writes.
func TestEveryMethodHasOneHandler(t *testing.T) {
	table := (&Server{}).endpointTable()
	seen := map[string]bool{}
	for _, m := range structs.Methods() {
		t.Run(m.Name(), func(t *testing.T) {
			if seen[m.Name()] {
				t.Fatal("two descriptors share the name")
			}
			seen[m.Name()] = true
			ep, ok := table[m.Name()]
			if !ok {
				t.Fatal("no handler")
			}
			if got, want := reflect.TypeOf(ep.newArgs()), reflect.PointerTo(m.ArgsType()); got != want {
				t.Errorf("handler takes %v, the descriptor says %v", got, want)
			}
			if got, want := reflect.TypeOf(ep.newReply()), reflect.PointerTo(m.ReplyType()); got != want {
				t.Errorf("handler replies %v, the descriptor says %v", got, want)
			}
			if ep.write != m.Write() {
				t.Errorf("handler write = %v, descriptor %v", ep.write, m.Write())
			}
		})
	}
	for name := range table {
		if !seen[name] {
			t.Errorf("handler %s has no descriptor in structs.Methods", name)
		}
	}
}

// TestEveryMethodHasAnACLRule: no method reaches a handler without having
// declared what it asks of the caller's token (acl_rules.go).
func TestEveryMethodHasAnACLRule(t *testing.T) {
	table := (&Server{}).endpointTable()
	for _, m := range structs.Methods() {
		ep := table[m.Name()]
		switch {
		case ep.acl.kind == aclUndeclared:
			t.Errorf("%s declares no ACL rule", m.Name())
		case ep.acl.kind == aclChecked && ep.acl.authorize == nil && ep.acl.filter == nil:
			t.Errorf("%s is checked but has neither a check nor a filter", m.Name())
		}
	}
}
