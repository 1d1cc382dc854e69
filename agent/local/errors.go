package local

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Errors this package returns wrap one of them, so callers
// branch with errors.Is; the message itself is Consul's text where Consul
// has one, ready to be written as an HTTP body.
var (
	// ErrServiceNotFound: no service with that ID is registered on this
	// agent (HTTP 404).
	ErrServiceNotFound = errors.New("service not found")
	// ErrCheckNotFound: no check with that ID is registered on this agent
	// (HTTP 404).
	ErrCheckNotFound = errors.New("check not found")
	// ErrInvalid: a registration or update the agent refuses (HTTP 400).
	// Every such error is a *ValidationError.
	ErrInvalid = errors.New("invalid registration")
	// ErrNoSidecarPort: no port was given for a sidecar and none is free in
	// the configured range (or auto-assignment is disabled).
	ErrNoSidecarPort = errors.New("no sidecar port available")
	// ErrPersist: the change could not be written to the data dir; the
	// in-memory state was left as it was.
	ErrPersist = errors.New("persisting local state failed")
)

// ValidationError is a registration the agent refuses. Field names the
// offending field (as the JSON body spells it, dotted for nested ones,
// e.g. "Connect.SidecarService.Port"); Error() is the complete message the
// HTTP layer answers with status 400, Consul's text where Consul has one.
type ValidationError struct {
	Field  string
	Reason string
}

// Error is the message for the HTTP body.
func (e *ValidationError) Error() string { return e.Reason }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// notFoundError carries Consul's 404 text while matching a sentinel.
type notFoundError struct {
	sentinel error
	msg      string
}

func (e *notFoundError) Error() string { return e.msg }
func (e *notFoundError) Unwrap() error { return e.sentinel }

func unknownService(id string) error {
	return &notFoundError{sentinel: ErrServiceNotFound,
		msg: fmt.Sprintf("Unknown service ID %q. Ensure that the service ID is passed, not the service name.", id)}
}

func unknownCheck(id string) error {
	return &notFoundError{sentinel: ErrCheckNotFound,
		msg: fmt.Sprintf("Unknown check ID %q. Ensure that the check ID is passed, not the check name.", id)}
}

// multiError renders several validation failures the way
// hashicorp/go-multierror does, which is the text Consul's agent answers
// for NodeService validation failures.
func multiError(msgs []string) string {
	if len(msgs) == 1 {
		return fmt.Sprintf("1 error occurred:\n\t* %s\n\n", msgs[0])
	}
	points := make([]string, len(msgs))
	for i, m := range msgs {
		points[i] = "* " + m
	}
	return fmt.Sprintf("%d errors occurred:\n\t%s\n\n", len(msgs), strings.Join(points, "\n\t"))
}
