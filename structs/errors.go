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
)

var knownErrors = []error{ErrNoLeader, ErrNoDCPath, ErrNoServers, ErrPermissionDenied, ErrRateLimited, ErrFilterNotSupported, ErrUnknownMethod}

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
