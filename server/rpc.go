package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/trellis-mesh/trellis/structs"
)

// rpcService is the gRPC service name of the internal API. Each
// structs.Method* name is a gRPC method of it, carrying the msgpack
// encoding of the arguments and reply as a BytesValue.
const rpcService = "trellis.internal.RPC"

// rpcHoldTimeout is how long a call waits for a leader to appear (during an
// election) before it fails with ErrNoLeader, as Consul's rpc_hold_timeout.
const rpcHoldTimeout = 7 * time.Second

// endpoint is one RPC method: how to make its argument and reply values,
// whether it writes, and the handler that runs on the server that serves it.
type endpoint struct {
	write    bool
	newArgs  func() any
	newReply func() any
	fn       func(ctx context.Context, args, reply any) error
	// unfiltered returns a shallow copy of args without the ?filter=
	// expression, which the server applies itself (see serve).
	unfiltered func(args any) any
	// selfFiltering endpoints apply ?filter= themselves, to what their
	// reply is built from (see filtersItself).
	selfFiltering bool
	// here endpoints are answered by the server a call reaches, never
	// forwarded to the leader (see servedHere).
	here bool
}

// handle registers a typed handler under name.
func handle[A, R any](table map[string]endpoint, name string, write bool, fn func(context.Context, *A, *R) error) {
	table[name] = endpoint{
		write:    write,
		newArgs:  func() any { return new(A) },
		newReply: func() any { return new(R) },
		fn: func(ctx context.Context, a, r any) error {
			return fn(ctx, a.(*A), r.(*R))
		},
		unfiltered: func(a any) any {
			c := *a.(*A)
			if q, ok := any(&c).(queryOpts); ok {
				q.QueryOpts().Filter = ""
			}
			return &c
		},
	}
}

// filtersItself marks a registered read as applying ?filter= itself: its
// reply is not a list of the elements Consul filters (Catalog.ListServices
// answers service names and tags, built from the instances the filter
// selects), so serve hands it the expression instead of filtering the
// reply.
func filtersItself(table map[string]endpoint, name string) {
	ep := table[name]
	ep.selfFiltering = true
	table[name] = ep
}

// servedHere marks a registered read as answered by the server the call
// reaches, about itself (its view of the leader, of the Raft
// configuration, its own Raft stats), whatever the consistency mode.
func servedHere(table map[string]endpoint, name string) {
	ep := table[name]
	ep.here = true
	table[name] = ep
}

type queryOpts interface{ QueryOpts() *structs.QueryOptions }
type writeOpts interface{ WriteOpts() *structs.WriteRequest }

// RPC serves one internal API call: locally when this server may answer it,
// otherwise by forwarding it to the leader. args and reply are the types
// structs/endpoints.go lists for method.
func (s *Server) RPC(ctx context.Context, method string, args, reply any) (err error) {
	defer func() { s.metrics.observeRPC(method, err) }()
	ep, ok := s.endpoints[method]
	if !ok {
		return fmt.Errorf("%w: %s", structs.ErrUnknownMethod, method)
	}
	var (
		dc     string
		local  bool
		filter *structs.Filter
	)
	switch a := args.(type) {
	case queryOpts:
		q := a.QueryOpts()
		dc = q.Datacenter
		local = q.AllowStale
		if q.Filter != "" {
			// Parsed before anything runs, so that a malformed
			// expression fails at once (and never blocks).
			if filter, err = compileFilter(method, q.Filter, ep, reply); err != nil {
				return err
			}
		}
	case writeOpts:
		dc = a.WriteOpts().Datacenter
	}
	if dc != "" && dc != s.cfg.Datacenter {
		return structs.ErrNoDCPath
	}
	if local || ep.here {
		return serve(ctx, ep, args, reply, filter)
	}
	return s.onLeader(ctx, method, args, reply, ep, filter)
}

// compileFilter parses a read's ?filter= expression for a reply that can
// be filtered, or an endpoint that filters itself. Other reads refuse any
// expression.
func compileFilter(method, expr string, ep endpoint, reply any) (*structs.Filter, error) {
	if _, ok := reply.(structs.Filterable); !ok && !ep.selfFiltering {
		return nil, fmt.Errorf("%w: %s has no filterable result", structs.ErrFilterNotSupported, method)
	}
	return structs.CompileFilter(expr)
}

// serve runs the endpoint here. With a filter, the endpoint gets a copy of
// args without the expression (Health.ServiceNodes' query would apply it
// too) and the filter applies once, to the reply it produced: after a
// blocking query returned (it wakes when the unfiltered result's index
// moves, as Consul's does) and on whichever server answered, so that
// leader, stale and forwarded reads filter alike.
func serve(ctx context.Context, ep endpoint, args, reply any, filter *structs.Filter) error {
	if filter == nil || ep.selfFiltering {
		return ep.fn(ctx, args, reply)
	}
	if err := ep.fn(ctx, ep.unfiltered(args), reply); err != nil {
		return err
	}
	reply.(structs.Filterable).FilterResult(filter.Evaluate)
	return nil
}

// onLeader runs the call here if this server leads, otherwise forwards it
// (with its filter expression, which the leader applies), waiting up to
// rpcHoldTimeout for a leader to exist.
func (s *Server) onLeader(ctx context.Context, method string, args, reply any, ep endpoint, filter *structs.Filter) error {
	hold := time.NewTimer(rpcHoldTimeout)
	defer hold.Stop()
	backoff := 25 * time.Millisecond
	for {
		if s.IsLeader() {
			if q, ok := args.(queryOpts); ok && q.QueryOpts().RequireConsistent {
				if err := s.raft.VerifyLeader().Error(); err != nil {
					return fmt.Errorf("%w: %v", structs.ErrNoLeader, err)
				}
			}
			return serve(ctx, ep, args, reply, filter)
		}
		leader := s.LeaderAddr()
		if leader != "" && leader != s.cfg.Advertise.String() {
			err := s.pool.Call(ctx, leader, method, args, reply)
			// A leader that just stepped down answers ErrNoLeader; an
			// unreachable one looks like a transport error. Both are worth
			// another try within the hold time.
			if err == nil || !Retryable(err) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.ctx.Done():
			return ErrShutdown
		case <-hold.C:
			return structs.ErrNoLeader
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// Retryable reports whether a failed call is worth sending again, to the
// same or another server: no leader yet, leadership just changed, or the
// server could not be reached.
func Retryable(err error) bool {
	if errors.Is(err, structs.ErrNoLeader) || errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return true
	}
	var te *transportError
	return errors.As(err, &te)
}

// handleGRPC serves every internal method that arrives over gRPC.
func (s *Server) handleGRPC(_ any, stream grpc.ServerStream) error {
	full, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return status.Error(codes.Internal, "no method")
	}
	method := strings.TrimPrefix(full, "/"+rpcService+"/")
	ep, ok := s.endpoints[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "%s: %s", structs.ErrUnknownMethod, method)
	}
	var in wrapperspb.BytesValue
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	args := ep.newArgs()
	if err := s.codec.Unmarshal(in.GetValue(), args); err != nil {
		return status.Errorf(codes.InvalidArgument, "decode %s arguments: %v", method, err)
	}
	reply := ep.newReply()
	if err := s.RPC(stream.Context(), method, args, reply); err != nil {
		return status.Error(codes.Unknown, err.Error())
	}
	out, err := s.codec.Marshal(reply)
	if err != nil {
		return status.Errorf(codes.Internal, "encode %s reply: %v", method, err)
	}
	return stream.SendMsg(wrapperspb.Bytes(out))
}
