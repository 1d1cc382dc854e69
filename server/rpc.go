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
	// retrySafe writes may be sent again after an attempt whose outcome
	// is unknown (see retrySafe).
	retrySafe bool
	// acl is what the endpoint asks of the caller's token (acl_rules.go).
	acl aclRule
	// streams endpoints accept a structs.Stream over gRPC (see streamed).
	streams bool
}

// handle registers the handler of method m: fn's types are m's, so that a
// handler cannot disagree with the callers of m.
func handle[A, R any](table map[string]endpoint, m structs.Method[A, R], fn func(context.Context, *A, *R) error) {
	table[m.Name()] = endpoint{
		write:    m.Write(),
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
func filtersItself(table map[string]endpoint, m structs.MethodInfo) {
	ep := table[m.Name()]
	ep.selfFiltering = true
	table[m.Name()] = ep
}

// servedHere marks a registered read as answered by the server the call
// reaches, about itself (its view of the leader, of the Raft
// configuration, its own Raft stats), whatever the consistency mode.
func servedHere(table map[string]endpoint, m structs.MethodInfo) {
	ep := table[m.Name()]
	ep.here = true
	table[m.Name()] = ep
}

// retrySafe marks registered writes as safe to send again after an
// attempt whose outcome is unknown (the leader lost leadership mid-commit,
// or the connection to it broke after the request was sent). That holds
// for a handler that proposes its commands through raftApplyWrite, so the
// FSM applies each at most once, and whose checks before proposing give
// the first attempt's answer again once it was applied (a KV CAS, a
// register, a session create whose ID comes from the request ID). Other
// writes are never re-sent after they may have reached a leader: their
// caller is told the outcome is unknown.
func retrySafe(table map[string]endpoint, methods ...structs.MethodInfo) {
	for _, m := range methods {
		ep := table[m.Name()]
		ep.retrySafe = true
		table[m.Name()] = ep
	}
}

type queryOpts interface{ QueryOpts() *structs.QueryOptions }
type writeOpts interface{ WriteOpts() *structs.WriteRequest }

// RPC serves one internal API call: locally when this server may answer it,
// otherwise by forwarding it to the leader. args and reply are the types
// structs/endpoints.go lists for method.
func (s *Server) RPC(ctx context.Context, method string, args, reply any) (err error) {
	defer func() { s.metrics.observeRPC(err) }()
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
		// Named before the first attempt, so that every retry, here or
		// on the server a forward reaches, carries the same ID.
		structs.EnsureRequestID(args)
	}
	if dc != "" && dc != s.cfg.Datacenter {
		return structs.ErrNoDCPath
	}
	if local || ep.here {
		return s.serve(ctx, ep, args, reply, filter)
	}
	return s.onLeader(ctx, method, args, reply, ep, filter)
}

// compileFilter parses a read's ?filter= expression for a reply that can
// be filtered, checked against the reply's elements as Consul's servers
// check it, or for an endpoint that filters itself (and checks it against
// what it filters). Other reads refuse any expression.
func compileFilter(method, expr string, ep endpoint, reply any) (*structs.Filter, error) {
	if ep.selfFiltering {
		return structs.CompileFilter(expr)
	}
	fr, ok := reply.(structs.Filterable)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no filterable result", structs.ErrFilterNotSupported, method)
	}
	return structs.CompileFilterFor(expr, fr.FilterElem())
}

// serve runs the endpoint here, under its ACL rule: the caller's token
// is checked before the handler runs and the reply filtered after. With a
// filter, the endpoint gets a copy of args without the expression
// (Health.ServiceNodes' query would apply it too) and the filter applies
// once, to the reply it produced: after a blocking query returned (it
// wakes when the unfiltered result's index moves, as Consul's does) and on
// whichever server answered, so that leader, stale and forwarded reads
// filter alike.
func (s *Server) serve(ctx context.Context, ep endpoint, args, reply any, filter *structs.Filter) error {
	e := enforcer{s: s}
	authz, tok, err := e.before(ctx, ep.acl, args)
	if err != nil {
		return err
	}
	if authz != nil {
		ctx = withACLRecheck(ctx, func(ctx context.Context) error {
			a, t, err := e.before(ctx, ep.acl, args)
			authz, tok = a, t
			return err
		})
	}
	if filter == nil || ep.selfFiltering {
		err = ep.fn(ctx, args, reply)
	} else if err = ep.fn(ctx, ep.unfiltered(args), reply); err == nil {
		reply.(structs.Filterable).FilterResult(filter.Evaluate)
	}
	if err != nil {
		return err
	}
	e.after(ep.acl, authz, tok, args, reply)
	return nil
}

// onLeader runs the call here if this server leads (once it may answer:
// see readyToServe), otherwise forwards it (with its filter expression,
// which the leader applies), retrying within rpcHoldTimeout while a retry
// is both useful and safe (see canRetry). A write that may have been
// applied is never reported as "No cluster leader".
func (s *Server) onLeader(ctx context.Context, method string, args, reply any, ep endpoint, filter *structs.Filter) error {
	hold := time.NewTimer(rpcHoldTimeout)
	defer hold.Stop()
	backoff := 10 * time.Millisecond
	// unknown is the first error of an attempt that may have applied
	// the write; once set, a failure to get a definite answer reports it.
	var unknown error
	for {
		err := s.attemptOnLeader(ctx, method, args, reply, ep, filter)
		if err == nil {
			return nil
		}
		if ep.write && unknown == nil && OutcomeUnknown(err) {
			unknown = err
		}
		if !canRetry(ep.write, ep.retrySafe, err) {
			return outcome(unknown, err)
		}
		select {
		case <-ctx.Done():
			return outcome(unknown, ctx.Err())
		case <-s.ctx.Done():
			return outcome(unknown, ErrShutdown)
		case <-hold.C:
			return outcome(unknown, structs.ErrNoLeader)
		case <-time.After(backoff):
		}
		if backoff < 500*time.Millisecond {
			backoff *= 2
		}
	}
}

// errRaftStopped: this server's Raft stopped while the server runs.
var errRaftStopped = fmt.Errorf("%w: %w", structs.ErrNoLeader, ErrLogWriteFailed)

// errNotReady: this server leads but has not yet applied what earlier
// terms committed, so it may answer nothing but stale reads yet.
var errNotReady = fmt.Errorf("%w: the new leader is not ready yet", structs.ErrNoLeader)

// attemptOnLeader makes one attempt: here when this server leads and is
// ready, else one forward to the leader it knows.
func (s *Server) attemptOnLeader(ctx context.Context, method string, args, reply any, ep endpoint, filter *structs.Filter) error {
	if s.raftStopped.Load() {
		// Raft stopped after a failed log write (failstop.go): no point
		// holding the call; another server can take it.
		return errRaftStopped
	}
	if s.IsLeader() {
		term, ready := s.readyToServe()
		if !ready {
			return errNotReady
		}
		if q, ok := args.(queryOpts); ok && !ep.write {
			if err := s.reads.confirm(ctx, term, q.QueryOpts().RequireConsistent); err != nil {
				return err
			}
		}
		return s.serve(withRequestID(ctx, requestIDOf(args)), ep, args, reply, filter)
	}
	leader := s.LeaderAddr()
	if leader == "" || leader == s.cfg.Advertise.String() {
		return structs.ErrNoLeader
	}
	return s.pool.Call(ctx, leader, method, args, reply)
}

// requestIDOf returns a write's request ID ("" for a read).
func requestIDOf(args any) string {
	if w, ok := args.(writeOpts); ok {
		return w.WriteOpts().RequestID
	}
	return ""
}

// outcome is what a call that ended with err reports, given the first
// error of an earlier attempt whose write may have been applied (nil for
// none): that uncertainty outlives any later failure to reach a leader;
// only a definite answer from a leader replaces it.
func outcome(unknown, err error) error {
	if unknown == nil || !inconclusive(err) {
		return err
	}
	if structs.MaybeApplied(unknown) {
		return unknown
	}
	return fmt.Errorf("%w: %v", structs.ErrOutcomeUnknown, unknown) //nolint:errorlint // the cause stays text: an unknown outcome must not also match "no leader"
}

// inconclusive reports whether err says nothing of a write's outcome.
func inconclusive(err error) bool {
	return NotApplied(err) || OutcomeUnknown(err) || errors.Is(err, ErrShutdown) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Retryable reports whether a failed read is worth sending again, to the
// same or another server: no leader yet, leadership just changed, or the
// server could not be reached. A write may go again only when NotApplied.
func Retryable(err error) bool {
	if errors.Is(err, structs.ErrNoLeader) || errors.Is(err, raft.ErrNotLeader) || structs.MaybeApplied(err) {
		return true
	}
	var te *transportError
	return errors.As(err, &te)
}

// NotApplied reports whether a failed write certainly changed nothing
// (rejected before a leader proposed it, or never sent), so that sending it
// again is safe. (A server also retries its retry-safe writes after an
// unknown outcome; see retrySafe.)
func NotApplied(err error) bool {
	if errors.Is(err, structs.ErrNoLeader) || errors.Is(err, raft.ErrNotLeader) {
		return true
	}
	var te *transportError
	return errors.As(err, &te) && !te.sent
}

// OutcomeUnknown reports whether a failed write may have been applied: a
// leader proposed it and could not tell how it ended, or it was sent and
// no answer came back.
func OutcomeUnknown(err error) bool {
	if structs.MaybeApplied(err) {
		return true
	}
	var te *transportError
	return errors.As(err, &te) && te.sent
}

// canRetry decides for one failed attempt of a call on the server.
func canRetry(write, dedupSafe bool, err error) bool {
	switch {
	case errors.Is(err, ErrLogWriteFailed):
		return false
	case !write:
		return Retryable(err)
	case NotApplied(err):
		return true
	default:
		return dedupSafe && OutcomeUnknown(err)
	}
}

// handleGRPC serves every internal method that arrives over gRPC.
func (s *Server) handleGRPC(_ any, stream grpc.ServerStream) error {
	return s.serveGRPC(stream, nil)
}

// handleUnverifiedGRPC serves the connections that presented no client
// certificate to a server port that verifies incoming ones
// (auto_encrypt.allow_tls): they may ask for a certificate and nothing
// else, as on Consul's insecure RPC port.
func (s *Server) handleUnverifiedGRPC(_ any, stream grpc.ServerStream) error {
	return s.serveGRPC(stream, func(method string) bool { return method == structs.MethodAutoEncryptSign.Name() })
}

// serveGRPC serves one call; allowed, when set, limits the methods.
func (s *Server) serveGRPC(stream grpc.ServerStream, allowed func(string) bool) error {
	full, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return status.Error(codes.Internal, "no method")
	}
	method := strings.TrimPrefix(full, "/"+rpcService+"/")
	if allowed != nil && !allowed(method) {
		return statusOf(fmt.Errorf("%w: %s needs a client certificate (tls verify_incoming)", structs.ErrPermissionDenied, method))
	}
	ep, ok := s.endpoints[method]
	if !ok {
		return statusOf(fmt.Errorf("%w: %s", structs.ErrUnknownMethod, method))
	}
	var in wrapperspb.BytesValue
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	args := ep.newArgs()
	if err := s.rpcCodec.Unmarshal(in.GetValue(), args); err != nil {
		return status.Errorf(codes.InvalidArgument, "decode %s arguments: %v", method, err)
	}
	reply := ep.newReply()
	if isStreamed(stream.Context()) {
		return s.serveStream(stream, method, ep, args, reply) // rpc_stream.go
	}
	if err := s.RPC(stream.Context(), method, args, reply); err != nil {
		return statusOf(err) // rpc_errors.go
	}
	out, err := s.rpcCodec.Marshal(reply)
	if err != nil {
		return status.Errorf(codes.Internal, "encode %s reply: %v", method, err)
	}
	return stream.SendMsg(wrapperspb.Bytes(out))
}
