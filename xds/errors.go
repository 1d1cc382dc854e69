package xds

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidConfig is returned by New when a required Config field is
	// missing.
	ErrInvalidConfig = errors.New("xds: invalid config")
	// ErrMissingNode ends a stream whose first request does not carry an
	// Envoy node ID: without it the proxy cannot be identified.
	ErrMissingNode = errors.New("xds: first request carries no node id")
	// ErrBadResource marks a resource the server cannot send (nil, encoding
	// failure, or a message type that does not match its type URL).
	ErrBadResource = errors.New("xds: bad resource")
	// ErrStopped ends streams when the server stops, and refuses new ones.
	ErrStopped = errors.New("xds: server stopped")
	// ErrSourceClosed ends a stream whose Source closed the channel while
	// the stream was still open.
	ErrSourceClosed = errors.New("xds: config source closed the watch")
)

// wrapf wraps a sentinel error with formatted detail.
func wrapf(err error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{err}, args...)...)
}
