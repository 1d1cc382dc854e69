package structs

import "errors"

// Code is the class of an error: what an edge (the HTTP API, a gRPC
// status) makes of it. Every Error has one.
type Code string

// The error classes.
const (
	CodeInternal         Code = "internal"
	CodeNoLeader         Code = "no-leader"
	CodeUnavailable      Code = "unavailable" // no path to a datacenter or server
	CodePermissionDenied Code = "permission-denied"
	CodeNotFound         Code = "not-found"
	CodeInvalidArgument  Code = "invalid-argument"
	CodeRateLimited      Code = "rate-limited"
	// CodeFailedPrecondition: the request is valid but the cluster is not
	// in a state that can serve it yet (the CA does not exist yet).
	CodeFailedPrecondition Code = "failed-precondition"
	// CodeMaybeApplied: a write reached a leader and may have been
	// applied; see MaybeApplied.
	CodeMaybeApplied Code = "maybe-applied"
)

// Error is a sentinel error that keeps its identity across the internal
// RPC boundary: the server sends its name and class with the message, and
// the receiving side gives back an error that errors.Is matches against the
// same sentinel (see WireError). Compare with errors.Is, never by text.
type Error struct {
	name string
	code Code
	msg  string
}

func newError(name string, code Code, msg string) *Error {
	return &Error{name: name, code: code, msg: msg}
}

// Error returns the message, Consul's text where Consul has one: clients
// and users read it.
func (e *Error) Error() string { return e.msg }

// Name is the sentinel's stable name on the wire.
func (e *Error) Name() string { return e.name }

// Code is the sentinel's class.
func (e *Error) Code() Code { return e.code }

// Errors every layer recognises. Their texts are Consul's.
var (
	ErrNoLeader           = newError("NoLeader", CodeNoLeader, "No cluster leader")
	ErrNoDCPath           = newError("NoDCPath", CodeUnavailable, "No path to datacenter")
	ErrNoServers          = newError("NoServers", CodeUnavailable, "No known Consul servers")
	ErrPermissionDenied   = newError("PermissionDenied", CodePermissionDenied, "Permission denied")
	ErrRateLimited        = newError("RateLimited", CodeRateLimited, "rate limit exceeded, try again later")
	ErrFilterNotSupported = newError("FilterNotSupported", CodeInvalidArgument, "filter expressions are not supported")
	ErrUnknownMethod      = newError("UnknownMethod", CodeInvalidArgument, "unknown RPC method")
	// ErrAutoEncryptNotAllowed: AutoEncrypt.Sign reached a server without
	// auto_encrypt.allow_tls.
	ErrAutoEncryptNotAllowed = newError("AutoEncryptNotAllowed", CodePermissionDenied, "Agent AutoEncrypt.AllowTLS must be enabled")

	// ErrIntentionNotFound: no intention has the ID (or source and
	// destination) a read or a delete names.
	ErrIntentionNotFound = newError("IntentionNotFound", CodeNotFound, "Intention not found")
	// ErrCANotInitialized: the leader has not created the CA yet.
	ErrCANotInitialized = newError("CANotInitialized", CodeFailedPrecondition, "CA is uninitialized and unable to sign certificates yet")
	// ErrConnectNotEnabled: the agent runs with connect.enabled = false,
	// so there is no CA to read, configure or sign with.
	ErrConnectNotEnabled = newError("ConnectNotEnabled", CodeInternal, "Connect must be enabled in order to use this endpoint")
	// ErrCAStateReadOnly refuses a CA configuration that changes State.
	ErrCAStateReadOnly = newError("CAStateReadOnly", CodeInvalidArgument, "Provider State is read-only. It must be omitted or identical to the current value")

	// ErrNoLeader above means "rejected before it was proposed: nothing
	// changed". The two below mean the opposite: the write reached a leader
	// and may have been applied. A client must not take either for a
	// failure (a CAS answered so may have won); it may retry only a write
	// that is safe to apply twice, or read to find out.

	// ErrLeadershipLost: the leader proposed the write and lost its
	// leadership before the write committed (Raft's text, which Consul
	// returns too).
	ErrLeadershipLost = newError("LeadershipLost", CodeMaybeApplied, "leadership lost while committing log")
	// ErrOutcomeUnknown: the write was sent towards the leader and no
	// answer came back (the connection broke, or the hold time ran out
	// while its outcome was unknown).
	ErrOutcomeUnknown = newError("OutcomeUnknown", CodeMaybeApplied, "rpc error making call: no answer from the leader; the write may have been applied")
)

// Sentinels lists every sentinel a peer may name on the wire.
func Sentinels() []*Error {
	return []*Error{ErrNoLeader, ErrNoDCPath, ErrNoServers, ErrPermissionDenied, ErrRateLimited,
		ErrFilterNotSupported, ErrUnknownMethod, ErrIntentionNotFound, ErrCANotInitialized,
		ErrConnectNotEnabled, ErrCAStateReadOnly, ErrInvalidFilter, ErrLeadershipLost, ErrOutcomeUnknown,
		ErrSnapshotInvalid, ErrSnapshotTooLarge, ErrQueryNotFound,
		ErrACLDisabled, ErrACLNotFound, ErrACLBootstrapNotAllowed, ErrACLBootstrapInvalidResetIndex,
		ErrAutoEncryptNotAllowed}
}

// MaybeApplied reports whether err leaves a write's outcome unknown: it
// may have been applied. Such an error is never reported as "No cluster
// leader".
func MaybeApplied(err error) bool {
	return errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrOutcomeUnknown)
}

// SentinelOf returns the sentinel err is or wraps (the first in its
// chain), or nil: what a server names on the wire.
func SentinelOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// CodeOf returns the class of err: its sentinel's, or CodeInternal.
func CodeOf(err error) Code {
	if e := SentinelOf(err); e != nil {
		return e.code
	}
	return CodeInternal
}

// WireError rebuilds an error a peer sent as the sentinel name and the
// message: the sentinel itself when the message is its own, else an error
// with the message that errors.Is matches against the sentinel. An unknown
// name (a newer peer's sentinel) keeps the message only.
func WireError(name, msg string) error {
	for _, e := range Sentinels() {
		if e.name != name {
			continue
		}
		if msg == e.msg {
			return e
		}
		return &remoteError{msg: msg, base: e}
	}
	return errors.New(msg)
}

type remoteError struct {
	msg  string
	base error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.base }
