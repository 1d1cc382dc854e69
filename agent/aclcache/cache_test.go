package aclcache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/structs"
)

const ttl = 30 * time.Second

// TestCacheTTL: a resolved token is read again only once token_ttl has
// passed on the cache's clock; 0 keeps nothing.
func TestCacheTTL(t *testing.T) {
	cl := startCluster(t)
	pol := cl.policy(t, "", "read-a", `key_prefix "a" { policy = "read" }`)
	secret, _ := cl.token(t, []string{pol}, nil)
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		// steps: how far to move the clock before each resolution, and
		// how many ACL.TokenResolve calls reached the server after it.
		advance []time.Duration
		calls   []int
	}{
		{"cached for token_ttl", ttl, []time.Duration{0, 0, ttl - time.Second, 2 * time.Second, 0}, []int{1, 1, 1, 2, 2}},
		{"zero keeps nothing", 0, []time.Duration{0, 0, time.Hour}, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			c := newCache(t, cl, clk, tc.ttl, DownExtendCache)
			base := cl.called(structs.MethodACLTokenResolve)
			for i, d := range tc.advance {
				clk.advance(d)
				if !keyRead(t, c, secret, "a/x") {
					t.Fatalf("step %d: the token may read a/x", i)
				}
				if got := cl.called(structs.MethodACLTokenResolve) - base; got != tc.calls[i] {
					t.Fatalf("step %d: %d ACL.TokenResolve calls, want %d", i, got, tc.calls[i])
				}
			}
		})
	}
}

// TestCacheSeesChangesAfterTTL: a policy changed on the servers, directly
// linked or through a role, decides on the agent once policy_ttl (or
// role_ttl) has passed, and not before.
func TestCacheSeesChangesAfterTTL(t *testing.T) {
	cl := startCluster(t)
	for _, tc := range []struct {
		name string
		// change makes the token read b instead of a.
		setup func(t *testing.T) (secret string, change func(t *testing.T))
	}{
		{"policy rules changed", func(t *testing.T) (string, func(*testing.T)) {
			pol := cl.policy(t, "", "p-direct", `key_prefix "a" { policy = "read" }`)
			secret, _ := cl.token(t, []string{pol}, nil)
			return secret, func(t *testing.T) { cl.policy(t, pol, "p-direct", `key_prefix "b" { policy = "read" }`) }
		}},
		{"role's policy replaced", func(t *testing.T) (string, func(*testing.T)) {
			pa := cl.policy(t, "", "p-role-a", `key_prefix "a" { policy = "read" }`)
			pb := cl.policy(t, "", "p-role-b", `key_prefix "b" { policy = "read" }`)
			role := cl.role(t, "", "r", pa)
			secret, _ := cl.token(t, nil, []string{role})
			return secret, func(t *testing.T) { cl.role(t, role, "r", pb) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			c := newCache(t, cl, clk, ttl, DownExtendCache)
			secret, change := tc.setup(t)
			if !keyRead(t, c, secret, "a/x") || keyRead(t, c, secret, "b/x") {
				t.Fatal("before the change the token reads a, not b")
			}
			change(t)
			clk.advance(ttl / 2)
			if !keyRead(t, c, secret, "a/x") {
				t.Fatal("within the TTL the cached grant stands")
			}
			clk.advance(ttl)
			if keyRead(t, c, secret, "a/x") || !keyRead(t, c, secret, "b/x") {
				t.Fatal("past the TTL the token reads b, not a")
			}
		})
	}
}

// TestCacheInvalidation: a token the servers answer "ACL not found" for is
// forgotten; Invalidate forgets at once; an unknown token is never taken
// for servers that are down.
func TestCacheInvalidation(t *testing.T) {
	cl := startCluster(t)
	pol := cl.policy(t, "", "inv", `key_prefix "a" { policy = "read" }`)
	for _, tc := range []struct {
		name string
		// act runs after the token was resolved once and deleted.
		act  func(c *Cache, clk *clock, secret string)
		down string
	}{
		{"deleted, found once the TTL passed", func(_ *Cache, clk *clock, _ string) { clk.advance(ttl + time.Second) }, DownExtendCache},
		{"deleted, Invalidate", func(c *Cache, _ *clock, secret string) { c.Invalidate(secret) }, DownExtendCache},
		{"deleted, async-cache past the TTL", func(c *Cache, clk *clock, secret string) {
			clk.advance(ttl + time.Second)
			_, _ = c.Resolve(context.Background(), secret) // the stale answer, and a refresh
			c.wg.Wait()
		}, DownAsyncCache},
		{"deleted, allow while up", func(_ *Cache, clk *clock, _ string) { clk.advance(ttl + time.Second) }, DownAllow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			c := newCache(t, cl, clk, ttl, tc.down)
			secret, accessor := cl.token(t, []string{pol}, nil)
			if !keyRead(t, c, secret, "a/x") {
				t.Fatal("the token may read a/x")
			}
			cl.deleteToken(t, accessor)
			tc.act(c, clk, secret)
			if _, err := c.Resolve(context.Background(), secret); !errors.Is(err, structs.ErrACLNotFound) {
				t.Fatalf("resolve of a deleted token: %v, want ACL not found", err)
			}
			c.mu.Lock()
			_, kept := c.tokens[secret]
			c.mu.Unlock()
			if kept {
				t.Fatal("the deleted token is still cached")
			}
		})
	}
	t.Run("unknown token is not down", func(t *testing.T) {
		for _, down := range []string{DownExtendCache, DownAsyncCache, DownAllow, DownDeny} {
			c := newCache(t, cl, newClock(), ttl, down)
			if _, err := c.Resolve(context.Background(), "5b3e8f0c-0000-4000-8000-00000000dead"); !errors.Is(err, structs.ErrACLNotFound) {
				t.Fatalf("%s: unknown token: %v, want ACL not found", down, err)
			}
		}
	})
}

// TestDownPolicy: with the servers unreachable and the TTL past, each
// down_policy decides: extend-cache and async-cache keep the cached
// token's grants and deny a token never resolved, allow allows, deny
// denies (Lookup, without the down policy, fails with ErrServersDown);
// once the servers answer again the token is read again.
func TestDownPolicy(t *testing.T) {
	cl := startCluster(t)
	pol := cl.policy(t, "", "down", `key_prefix "a" { policy = "read" }`)
	secret, accessor := cl.token(t, []string{pol}, nil)
	const unseen = "0c5e2b91-1111-4000-8000-00000000beef"
	for _, tc := range []struct {
		down           string
		cached, never  bool // may read a/x: the cached token, a token never resolved
		deniedAccessor string
	}{
		{DownExtendCache, true, false, ""},
		{DownAsyncCache, true, false, ""},
		{DownAllow, true, true, ""},
		{DownDeny, false, false, accessor},
	} {
		t.Run(tc.down, func(t *testing.T) {
			clk := newClock()
			c := newCache(t, cl, clk, ttl, tc.down)
			if !keyRead(t, c, secret, "a/x") {
				t.Fatal("the token may read a/x")
			}
			cl.setDown(true)
			defer cl.setDown(false)
			clk.advance(time.Hour)
			if got := keyRead(t, c, secret, "a/x"); got != tc.cached {
				t.Fatalf("cached token reads a/x: %v, want %v", got, tc.cached)
			}
			c.wg.Wait() // async-cache's refresh, which fails too
			if got := keyRead(t, c, unseen, "a/x"); got != tc.never {
				t.Fatalf("token never resolved reads a/x: %v, want %v", got, tc.never)
			}
			if _, err := c.Lookup(context.Background(), unseen); !errors.Is(err, ErrServersDown) {
				t.Fatalf("Lookup of a token never resolved: %v, want ErrServersDown", err)
			}
			if tc.deniedAccessor != "" {
				a, _ := c.Resolve(context.Background(), secret)
				var pd *acl.PermissionDeniedError
				if err := a.Denied(acl.ResourceKey, acl.AccessRead, "a/x"); !errors.As(err, &pd) || pd.AccessorID != tc.deniedAccessor {
					t.Fatalf("denial %v does not name the token's accessor", err)
				}
			}
			cl.setDown(false)
			base := cl.called(structs.MethodACLTokenResolve)
			if !keyRead(t, c, secret, "a/x") {
				t.Fatal("servers back: the token may read a/x")
			}
			c.wg.Wait()
			if cl.called(structs.MethodACLTokenResolve) == base {
				t.Fatal("servers back: the expired token was not read again")
			}
		})
	}
}

// TestAsyncCacheRefreshesInBackground: under async-cache an expired entry
// answers at once, and the background refresh brings the servers' change.
func TestAsyncCacheRefreshesInBackground(t *testing.T) {
	cl := startCluster(t)
	pol := cl.policy(t, "", "async", `key_prefix "a" { policy = "read" }`)
	secret, _ := cl.token(t, []string{pol}, nil)
	clk := newClock()
	c := newCache(t, cl, clk, ttl, DownAsyncCache)
	if !keyRead(t, c, secret, "a/x") {
		t.Fatal("the token may read a/x")
	}
	cl.policy(t, pol, "async", `key_prefix "b" { policy = "read" }`)
	clk.advance(ttl + time.Second)
	if !keyRead(t, c, secret, "a/x") {
		t.Fatal("the expired entry answers at once")
	}
	c.wg.Wait()
	if keyRead(t, c, secret, "a/x") || !keyRead(t, c, secret, "b/x") {
		t.Fatal("after the refresh the token reads b, not a")
	}
}

// TestNewRefusesUnknownDownPolicy: a down_policy the cache does not know
// is a configuration error, not a silent default.
func TestNewRefusesUnknownDownPolicy(t *testing.T) {
	if _, err := New(Config{RPC: &cluster{}, DownPolicy: "sometimes"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New: %v, want ErrInvalidConfig", err)
	}
}
