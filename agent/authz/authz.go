// Package authz is how an agent's own edges (its HTTP endpoints that do
// not go to the servers, its xDS streams, its DNS answers) learn what a
// token may do: it asks the servers with ACL.Authorize, so that a client
// agent never decides on its own authority, and turns a denial into
// Consul's text (acl.PermissionDeniedError).
package authz

import (
	"context"
	"errors"
	"fmt"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/structs"
)

// Check is one question about a token: access on resource, segment naming
// the node, service, agent or key where the resource has one.
type Check struct {
	Resource acl.Resource
	Access   acl.Access
	Segment  string
}

// Read is the check of read access on res (segment seg).
func Read(res acl.Resource, seg string) Check {
	return Check{Resource: res, Access: acl.AccessRead, Segment: seg}
}

// Write is the check of write access on res (segment seg).
func Write(res acl.Resource, seg string) Check {
	return Check{Resource: res, Access: acl.AccessWrite, Segment: seg}
}

// Config holds what a Checker needs.
type Config struct {
	// RPC reaches the servers (the local server on a server agent).
	// Required.
	RPC structs.Caller
	// Datacenter is the local datacenter, where tokens are resolved.
	Datacenter string
}

// Checker asks the servers about tokens. It keeps no state: every call
// is one ACL.Authorize round trip, so a token deleted or changed is seen
// at the next question.
type Checker struct {
	rpc structs.Caller
	dc  string
}

// ErrInvalidConfig is returned by New for a Config without RPC.
var ErrInvalidConfig = errors.New("authz: invalid config")

// New builds a Checker.
func New(cfg Config) (*Checker, error) {
	if cfg.RPC == nil {
		return nil, fmt.Errorf("%w: RPC is required", ErrInvalidConfig)
	}
	return &Checker{rpc: cfg.RPC, dc: cfg.Datacenter}, nil
}

// ask is one ACL.Authorize round trip: the answer to each check, in
// order, and the token's AccessorID for denials. An unknown token is the
// servers' structs.ErrACLNotFound ("ACL not found", a 403), and a failure
// to reach them is an error too: an agent that cannot ask does not allow.
func (c *Checker) ask(ctx context.Context, token string, checks []Check) ([]bool, string, error) {
	args := structs.ACLAuthorizeRequest{QueryOptions: structs.QueryOptions{Token: token}}
	args.Datacenter = c.dc
	for _, ch := range checks {
		args.Requests = append(args.Requests, structs.ACLAuthorizationRequest{
			Resource: string(ch.Resource), Segment: ch.Segment, Access: ch.Access.String(),
		})
	}
	var reply structs.ACLAuthorizeResponse
	if err := structs.MethodACLAuthorize.Call(ctx, c.rpc, &args, &reply); err != nil {
		return nil, "", fmt.Errorf("authz: ask the servers: %w", err)
	}
	if len(reply.Responses) != len(checks) {
		return nil, "", fmt.Errorf("authz: %d answers to %d questions", len(reply.Responses), len(checks))
	}
	out := make([]bool, len(checks))
	for i, r := range reply.Responses {
		out[i] = r.Allow
	}
	return out, reply.AccessorID, nil
}

// Allowed answers each check for token, in order (for filtering lists).
func (c *Checker) Allowed(ctx context.Context, token string, checks ...Check) ([]bool, error) {
	ok, _, err := c.ask(ctx, token, checks)
	return ok, err
}

// Require is nil when token passes every check, else Consul's denial for
// the first it fails (an *acl.PermissionDeniedError, which the HTTP API
// answers with 403 and xDS with PermissionDenied).
func (c *Checker) Require(ctx context.Context, token string, checks ...Check) error {
	ok, accessor, err := c.ask(ctx, token, checks)
	if err != nil {
		return err
	}
	for i, a := range ok {
		if !a {
			return denial(accessor, checks[i])
		}
	}
	return nil
}

// RequireAny is nil when token passes at least one of checks, else the
// denial of the first: Consul's "the service's or else the node's write"
// rule for checks.
func (c *Checker) RequireAny(ctx context.Context, token string, checks ...Check) error {
	ok, accessor, err := c.ask(ctx, token, checks)
	if err != nil {
		return err
	}
	for _, a := range ok {
		if a {
			return nil
		}
	}
	if len(checks) == 0 {
		return nil
	}
	return denial(accessor, checks[0])
}

func denial(accessor string, c Check) error {
	return &acl.PermissionDeniedError{AccessorID: accessor, Resource: c.Resource, Access: c.Access, Segment: c.Segment}
}
