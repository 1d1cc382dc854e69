package acl

import (
	"fmt"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// PermissionDeniedError is a denial with Consul's text, which clients and
// operators read: `Permission denied: token with AccessorID '<id>' lacks
// permission 'key:write' on "<segment>"`. It wraps
// structs.ErrPermissionDenied, so that errors.Is matches it, the internal
// RPC carries it as that sentinel and the HTTP API answers 403.
type PermissionDeniedError struct {
	AccessorID string
	Resource   Resource
	Access     Access
	// Segment is the name asked about; empty for resources without one
	// (acl, operator, keyring, mesh, peering).
	Segment string
}

// anonymousHint is what Consul appends to a denial of the anonymous token.
const anonymousHint = ". The anonymous token is used implicitly when a request does not specify a token."

// Error is Consul's text of the denial.
func (e *PermissionDeniedError) Error() string {
	var b strings.Builder
	b.WriteString(structs.ErrPermissionDenied.Error())
	anonymous := e.AccessorID == structs.ACLTokenAnonymousID
	if anonymous {
		b.WriteString(": anonymous token")
	} else {
		fmt.Fprintf(&b, ": token with AccessorID '%s'", e.AccessorID)
	}
	fmt.Fprintf(&b, " lacks permission '%s:%s'", e.Resource, e.Access)
	if e.Segment != "" {
		fmt.Fprintf(&b, " on \"%s\"", e.Segment)
	}
	if anonymous {
		b.WriteString(anonymousHint)
	}
	return b.String()
}

// Unwrap makes the denial the permission-denied sentinel.
func (e *PermissionDeniedError) Unwrap() error { return structs.ErrPermissionDenied }

// Denied is the error for a decision of a that was Deny: the token's
// accessor lacks access on resource (segment, if it has one).
func (a *Authorizer) Denied(resource Resource, access Access, segment string) error {
	return &PermissionDeniedError{AccessorID: a.accessorID, Resource: resource, Access: access, Segment: segment}
}
