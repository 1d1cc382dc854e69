// Package authz is how an agent's own edges (its HTTP endpoints that do
// not go to the servers, its xDS streams) learn what a token may do: they
// ask a Resolver for the token's authorizer (on a client agent its ACL
// cache, agent/aclcache, holding the servers' data; on a server the
// server's own resolution) and turn a denial into Consul's text
// (acl.PermissionDeniedError).
package authz

import (
	"context"
	"errors"
	"fmt"

	"github.com/trellis-mesh/trellis/acl"
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

// Resolver turns a token's SecretID into what it may do: an unknown
// token is structs.ErrACLNotFound.
type Resolver interface {
	Resolve(ctx context.Context, token string) (*acl.Authorizer, error)
}

// ResolverFunc is a function as a Resolver.
type ResolverFunc func(ctx context.Context, token string) (*acl.Authorizer, error)

// Resolve calls f.
func (f ResolverFunc) Resolve(ctx context.Context, token string) (*acl.Authorizer, error) {
	return f(ctx, token)
}

// Config holds what a Checker needs.
type Config struct {
	// Resolver resolves tokens. Required.
	Resolver Resolver
}

// Checker answers questions about tokens with their authorizers. It
// keeps no state of its own: how fresh an answer is, and what happens
// while no server can be reached, is the Resolver's.
type Checker struct {
	resolver Resolver
}

// ErrInvalidConfig is returned by New for a Config without Resolver.
var ErrInvalidConfig = errors.New("authz: invalid config")

// New builds a Checker.
func New(cfg Config) (*Checker, error) {
	if cfg.Resolver == nil {
		return nil, fmt.Errorf("%w: Resolver is required", ErrInvalidConfig)
	}
	return &Checker{resolver: cfg.Resolver}, nil
}

// ask answers each check, in order, with the token's AccessorID for
// denials. An unknown token is structs.ErrACLNotFound ("ACL not found", a
// 403).
func (c *Checker) ask(ctx context.Context, token string, checks []Check) ([]bool, string, error) {
	a, err := c.resolver.Resolve(ctx, token)
	if err != nil {
		// Unwrapped: "ACL not found" is the whole of Consul's answer.
		return nil, "", err
	}
	out := make([]bool, len(checks))
	for i, ch := range checks {
		d, err := a.Decide(ch.Resource, ch.Access, ch.Segment)
		if err != nil {
			return nil, "", fmt.Errorf("authz: %w", err)
		}
		out[i] = d == acl.Allow
	}
	return out, a.AccessorID(), nil
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
