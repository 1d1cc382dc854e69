package structs

import (
	"context"
	"reflect"
)

// Method describes one internal RPC method: its name on the wire and, as
// its type parameters, the argument and reply types every caller and the
// server's handler share. A caller and a handler that disagree on a type
// do not compile, because both are written against the descriptor.
type Method[A, R any] struct {
	name string
	// write is whether the method goes through Raft on the leader.
	write bool
}

// Caller makes internal RPC calls by name: a server (answering here or
// forwarding to the leader), a client agent's router, or a test's fake.
// Code calls through a Method's Call, never Caller.RPC directly, so that the
// types are checked where the call is written.
type Caller interface {
	RPC(ctx context.Context, method string, args, reply any) error
}

// Name is the method's name on the wire ("Catalog.Register"). Names, like
// Raft command numbers, are part of the protocol between versions.
func (m Method[A, R]) Name() string { return m.name }

// Write reports whether the method writes (goes through Raft).
func (m Method[A, R]) Write() bool { return m.write }

// Call makes the call through c.
func (m Method[A, R]) Call(ctx context.Context, c Caller, args *A, reply *R) error {
	return c.RPC(ctx, m.name, args, reply)
}

// ArgsType is the argument type (A, not *A).
func (m Method[A, R]) ArgsType() reflect.Type { return reflect.TypeFor[A]() }

// ReplyType is the reply type (R, not *R).
func (m Method[A, R]) ReplyType() reflect.Type { return reflect.TypeFor[R]() }

// MethodInfo is what generic code (the server's endpoint table, tests over
// the registry) knows of any Method.
type MethodInfo interface {
	Name() string
	Write() bool
	ArgsType() reflect.Type
	ReplyType() reflect.Type
}

func readMethod[A, R any](name string) Method[A, R]  { return Method[A, R]{name: name} }
func writeMethod[A, R any](name string) Method[A, R] { return Method[A, R]{name: name, write: true} }
