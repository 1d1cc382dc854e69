package authz

import (
	"context"
	"errors"
	"testing"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/structs"
)

// TestChecker: decisions come from the resolved authorizer, a denial is
// Consul's text naming the token's accessor and the first check failed,
// and the resolver's error (an unknown token) is the answer unchanged.
func TestChecker(t *testing.T) {
	rules, err := acl.Parse(`service "web" { policy = "write" }
node_prefix "" { policy = "read" }`)
	if err != nil {
		t.Fatal(err)
	}
	authorizers := map[string]*acl.Authorizer{"web": acl.NewPolicyAuthorizer("acc-web", acl.DenyAll(), rules)}
	c, err := New(Config{Resolver: ResolverFunc(func(_ context.Context, token string) (*acl.Authorizer, error) {
		if a, ok := authorizers[token]; ok {
			return a, nil
		}
		return nil, structs.ErrACLNotFound
	})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		token  string
		any    bool
		checks []Check
		want   string // "" for allowed
		is     error
	}{
		{"all allowed", "web", false, []Check{Write(acl.ResourceService, "web"), Read(acl.ResourceNode, "n1")}, "", nil},
		{"first denial named", "web", false, []Check{Read(acl.ResourceNode, "n1"), Write(acl.ResourceNode, "n1"), Write(acl.ResourceService, "db")},
			"Permission denied: token with AccessorID 'acc-web' lacks permission 'node:write' on \"n1\"", structs.ErrPermissionDenied},
		{"any: one suffices", "web", true, []Check{Write(acl.ResourceService, "db"), Write(acl.ResourceService, "web")}, "", nil},
		{"any: the first is named", "web", true, []Check{Write(acl.ResourceService, "db"), Write(acl.ResourceNode, "n1")},
			"Permission denied: token with AccessorID 'acc-web' lacks permission 'service:write' on \"db\"", structs.ErrPermissionDenied},
		{"unknown token", "nope", false, []Check{Read(acl.ResourceNode, "n1")}, "ACL not found", structs.ErrACLNotFound},
		{"no such check", "web", false, []Check{{Resource: acl.ResourceAgent, Access: acl.AccessList}}, "authz: acl: unknown check: list on \"agent\"", acl.ErrUnknownCheck},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.any {
				err = c.RequireAny(ctx, tc.token, tc.checks...)
			} else {
				err = c.Require(ctx, tc.token, tc.checks...)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("denied: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want || !errors.Is(err, tc.is)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	ok, err := c.Allowed(ctx, "web", Read(acl.ResourceService, "web"), Read(acl.ResourceService, "db"))
	if err != nil || len(ok) != 2 || !ok[0] || ok[1] {
		t.Fatalf("Allowed = %v, %v; want [true false]", ok, err)
	}
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New without Resolver: %v", err)
	}
}
