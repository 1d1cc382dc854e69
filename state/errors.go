package state

import (
	"errors"
	"fmt"
)

// Sentinel errors of the state store. Their texts are Consul's where Consul
// has one, because they travel to HTTP clients as plain strings and some
// clients match on them. Callers test for them with errors.Is; the errors a
// write returns may wrap them with more context.
var (
	// ErrMissingNodeName refuses a node, service, check or session write
	// without a node name.
	ErrMissingNodeName = errors.New("Must provide node")
	// ErrMissingNode is returned when a write refers to a node that is not
	// registered.
	ErrMissingNode = errors.New("Missing node registration")
	// ErrMissingService is returned when a check names a service that is not
	// registered on the check's node.
	ErrMissingService = errors.New("Missing service registration")
	// ErrMissingServiceName refuses a service without a name.
	ErrMissingServiceName = errors.New("Must provide service name")
	// ErrMissingCheckID refuses a check without an ID.
	ErrMissingCheckID = errors.New("Missing check ID")
	// ErrCheckNodeMismatch is returned when a registration carries a check
	// for a node other than the one being registered.
	ErrCheckNodeMismatch = errors.New("check node does not match node")
	// ErrNodeNameReserved is returned when a node would take the name of a
	// live node with a different ID.
	ErrNodeNameReserved = errors.New("node name is reserved")
	// ErrMissingSessionID refuses a session without an ID.
	ErrMissingSessionID = errors.New("Missing session ID")
	// ErrSessionExists refuses to create a session whose ID is taken:
	// overwriting it would orphan the locks the old one holds.
	ErrSessionExists = errors.New("session already exists")
	// ErrInvalidSessionBehavior refuses a behavior other than release and
	// delete.
	ErrInvalidSessionBehavior = errors.New("Invalid session behavior")
	// ErrMissingSessionCheck is returned when a session depends on a check
	// that is not registered on its node.
	ErrMissingSessionCheck = errors.New("Missing check registration")
	// ErrSessionCheckCritical is returned when a session would depend on a
	// check that is critical already.
	ErrSessionCheckCritical = errors.New("Check is in critical state")
	// ErrMissingKey refuses a KV write without a key.
	ErrMissingKey = errors.New("Missing key name")
	// ErrMissingLockSession refuses a lock or unlock without a session.
	ErrMissingLockSession = errors.New("missing session")
	// ErrInvalidSession is returned by a lock whose session does not exist.
	ErrInvalidSession = errors.New("invalid session")
)

// textError carries Consul's exact message for an error while still
// matching one of the sentinels above with errors.Is.
type textError struct {
	msg  string
	base error
}

func (e *textError) Error() string { return e.msg }
func (e *textError) Unwrap() error { return e.base }

// errorf builds an error whose text is the formatted message (Consul's
// wording) and that unwraps to base.
func errorf(base error, format string, args ...any) error {
	return &textError{msg: fmt.Sprintf(format, args...), base: base}
}
