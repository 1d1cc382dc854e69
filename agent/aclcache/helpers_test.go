package aclcache

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

const rootToken = "9e2b6cf4-3c1a-4f55-9d7e-6c2a0b0c0001"

// cluster is a real one-server cluster with ACLs on (default deny) that
// the cache reaches over the real internal RPC, through a pool, as a
// client agent does; down points the pool at an address where nothing
// listens, and counts what reached the server.
type cluster struct {
	srv  *server.Server
	addr string
	dead string
	pool *server.ConnPool

	mu sync.Mutex
	// down and calls are guarded by mu.
	down  bool
	calls map[string]int
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		NodeName: "s1", NodeID: "00000000-0000-0000-0000-0000000000c1", Datacenter: "dc1",
		InMemory: true, Bootstrap: true, Listener: ln, Advertise: ln.Addr().(*net.TCPAddr),
		ACLs: server.ACLConfig{Enabled: true, DefaultPolicy: "deny", InitialManagement: rootToken},
	})
	if err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()
	c := &cluster{srv: srv, addr: ln.Addr().String(), dead: deadAddr, pool: server.NewConnPool(server.ConnPoolConfig{}), calls: make(map[string]int)}
	t.Cleanup(func() {
		c.pool.Close()
		if err := srv.Shutdown(); err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	waitFor(t, "the initial management token", func() bool {
		var reply structs.ACLTokenResolveResponse
		args := structs.ACLTokenResolveRequest{QueryOptions: structs.QueryOptions{Token: rootToken}}
		return structs.MethodACLTokenResolve.Call(context.Background(), srv, &args, &reply) == nil
	})
	return c
}

// RPC is the cache's way to the server.
func (c *cluster) RPC(ctx context.Context, method string, args, reply any) error {
	c.mu.Lock()
	addr := c.addr
	if c.down {
		addr = c.dead
	} else {
		c.calls[method]++
	}
	c.mu.Unlock()
	return c.pool.Call(ctx, addr, method, args, reply)
}

func (c *cluster) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

// called is how many calls of method reached the server.
func (c *cluster) called(method structs.MethodInfo) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method.Name()]
}

// policy creates or updates (id set) a policy with rules.
func (c *cluster) policy(t *testing.T, id, name, rules string) string {
	t.Helper()
	var reply structs.ACLPolicy
	call(t, c.srv, structs.MethodACLPolicySet, &structs.ACLPolicySetRequest{
		Policy: structs.ACLPolicy{ID: id, Name: name, Rules: rules}, WriteRequest: structs.WriteRequest{Token: rootToken},
	}, &reply)
	return reply.ID
}

// role creates or updates (id set) a role linking policyID.
func (c *cluster) role(t *testing.T, id, name, policyID string) string {
	t.Helper()
	var reply structs.ACLRole
	call(t, c.srv, structs.MethodACLRoleSet, &structs.ACLRoleSetRequest{
		Role: structs.ACLRole{ID: id, Name: name, Policies: []structs.ACLLink{{ID: policyID}}}, WriteRequest: structs.WriteRequest{Token: rootToken},
	}, &reply)
	return reply.ID
}

// token creates a token linking policies and roles; it returns its
// SecretID and AccessorID.
func (c *cluster) token(t *testing.T, policies, roles []string) (string, string) {
	t.Helper()
	tok := structs.ACLToken{}
	for _, p := range policies {
		tok.Policies = append(tok.Policies, structs.ACLLink{ID: p})
	}
	for _, r := range roles {
		tok.Roles = append(tok.Roles, structs.ACLLink{ID: r})
	}
	var reply structs.ACLToken
	call(t, c.srv, structs.MethodACLTokenSet, &structs.ACLTokenSetRequest{ACLToken: tok, Create: true, WriteRequest: structs.WriteRequest{Token: rootToken}}, &reply)
	return reply.SecretID, reply.AccessorID
}

func (c *cluster) deleteToken(t *testing.T, accessor string) {
	t.Helper()
	call(t, c.srv, structs.MethodACLTokenDelete, &structs.ACLTokenDeleteRequest{TokenID: accessor, WriteRequest: structs.WriteRequest{Token: rootToken}}, &struct{}{})
}

func call[A, R any](t *testing.T, srv *server.Server, m structs.Method[A, R], args *A, reply *R) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := m.Call(ctx, srv, args, reply); err != nil {
		t.Fatalf("%s: %v", m.Name(), err)
	}
}

// clock is the cache's clock, moved by the test.
type clock struct {
	mu sync.Mutex
	// now is guarded by mu.
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newCache is a cache over cl with clk, closed when the test ends.
func newCache(t *testing.T, cl *cluster, clk *clock, ttl time.Duration, down string) *Cache {
	t.Helper()
	c, err := New(Config{RPC: cl, Datacenter: "dc1", TokenTTL: ttl, PolicyTTL: ttl, RoleTTL: ttl, DownPolicy: down, Down: server.Retryable, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// keyRead is whether secret may read key k, as the cache resolves it.
func keyRead(t *testing.T, c *Cache, secret, k string) bool {
	t.Helper()
	a, err := c.Resolve(context.Background(), secret)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	return a.KeyRead(k) == acl.Allow
}

func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
