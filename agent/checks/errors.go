package checks

import "errors"

// Sentinel errors; test for them with errors.Is. Errors returned by the
// Manager wrap them with Consul's wording for the check in question.
var (
	// ErrCheckNotFound: no runner is registered under the check ID.
	ErrCheckNotFound = errors.New("check not found")
	// ErrNotTTL: the check exists but is not a TTL check, so its status
	// cannot be set through the agent API. The error text is Consul's
	// (`CheckID "x" does not have associated TTL`), which some clients
	// (Spring Cloud Consul) match to decide to re-register.
	ErrNotTTL = errors.New("check does not have associated TTL")
	// ErrInvalidStatus: a TTL update with a status other than passing,
	// warning or critical.
	ErrInvalidStatus = errors.New("invalid check status")
	// ErrInvalidCheck: the definition cannot be run (nil, no ID, no type,
	// or a missing dependency such as an RPC client for AliasNode).
	ErrInvalidCheck = errors.New("invalid check definition")
	// ErrUnsupportedCheck: a check type Trellis does not run.
	ErrUnsupportedCheck = errors.New("unsupported check type")
	// ErrStopped: the Manager or runner has been stopped.
	ErrStopped = errors.New("checks: stopped")
)

// checkError carries a message in Consul's words while still matching a
// sentinel through errors.Is.
type checkError struct {
	msg      string
	sentinel error
}

func (e *checkError) Error() string { return e.msg }
func (e *checkError) Unwrap() error { return e.sentinel }
