package structs

import (
	"errors"
	"strings"
)

// Errors every layer recognises. Their texts are Consul's: clients match on
// them, and they survive crossing the RPC boundary as plain strings, where
// ErrorFromString turns them back into these values.
var (
	ErrNoLeader           = errors.New("No cluster leader")
	ErrNoDCPath           = errors.New("No path to datacenter")
	ErrNoServers          = errors.New("No known Consul servers")
	ErrPermissionDenied   = errors.New("Permission denied")
	ErrRateLimited        = errors.New("rate limit exceeded, try again later")
	ErrFilterNotSupported = errors.New("filter expressions are not supported")
	ErrUnknownMethod      = errors.New("unknown RPC method")

	// ErrNoLeader above means "rejected before it was proposed: nothing
	// changed". The two below mean the opposite: the write reached a leader
	// and may have been applied. A client must not take either for a
	// failure (a CAS answered so may have won); it may retry only a write
	// that is safe to apply twice, or read to find out.

	// ErrLeadershipLost: the leader proposed the write and lost its
	// leadership before the write committed (Raft's text, which Consul
	// returns too).
	ErrLeadershipLost = errors.New("leadership lost while committing log")
	// ErrOutcomeUnknown: the write was sent towards the leader and no
	// answer came back (the connection broke, or the hold time ran out
	// while its outcome was unknown).
	ErrOutcomeUnknown = errors.New("rpc error making call: no answer from the leader; the write may have been applied")
)

var knownErrors = []error{ErrNoLeader, ErrNoDCPath, ErrNoServers, ErrPermissionDenied, ErrRateLimited,
	ErrFilterNotSupported, ErrUnknownMethod, ErrLeadershipLost, ErrOutcomeUnknown}

// MaybeApplied reports whether err leaves a write's outcome unknown: it
// may have been applied. Such an error is never reported as "No cluster
// leader".
func MaybeApplied(err error) bool {
	return errors.Is(err, ErrLeadershipLost) || errors.Is(err, ErrOutcomeUnknown)
}

// ErrorFromString rebuilds an error that crossed the RPC boundary as text,
// so that errors.Is works against the sentinels above on both sides.
func ErrorFromString(s string) error {
	for _, e := range knownErrors {
		if s == e.Error() {
			return e
		}
	}
	for _, e := range knownErrors {
		if strings.HasPrefix(s, e.Error()+":") {
			return &remoteError{msg: s, base: e}
		}
	}
	return errors.New(s)
}

type remoteError struct {
	msg  string
	base error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.base }
