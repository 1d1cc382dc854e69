package serverstate

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// fakeACL stands in for the server's rules: the tokens it denies, a
// filter that drops db's instances for the token "no-db", and a count
// of the reads it was asked about.
type fakeACL struct {
	mu    sync.Mutex
	deny  map[string]bool
	calls map[string]int
}

func (a *fakeACL) EnforceRead(_ memdb.WatchSet, method string, args, reply any) error {
	tok := args.(*structs.ServiceSpecificRequest).Token
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls[method+"/"+tok]++
	if a.deny[tok] {
		return structs.ErrPermissionDenied
	}
	if r, ok := reply.(*structs.IndexedCheckServiceNodes); ok && tok == "no-db" {
		kept := structs.CheckServiceNodes{}
		for _, n := range r.Nodes {
			if n.Service.Proxy.DestinationServiceName != "db" {
				kept = append(kept, n)
			}
		}
		r.Nodes = kept
	}
	return nil
}

func (a *fakeACL) count(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[key]
}

// syncBuffer is a bytes.Buffer safe for the sources' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestReadsFollowACL: every read passes the ACL rule of its RPC method
// with the request's token: a filtered read lacks what the token may not
// see, and a denied one is delivered as an error, logged once and retried
// with backoff rather than in a loop.
func TestReadsFollowACL(t *testing.T) {
	acl := &fakeACL{deny: map[string]bool{"denied": true}, calls: map[string]int{}}
	var logs syncBuffer
	f := &fixture{t: t}
	f.store.Store(state.NewStore())
	src, err := New(Config{Store: f.store.Load, Datacenter: "dc1", ACL: acl,
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		RetryMin: 100 * time.Millisecond, RetryMax: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	f.src = src
	f.register("n1", sidecar("db", nil))
	f.register("n1", sidecar("api", nil))
	h := src.DataSources(nil).Health
	req := func(service, token string) *structs.ServiceSpecificRequest {
		return &structs.ServiceSpecificRequest{ServiceName: service, Connect: true,
			QueryOptions: structs.QueryOptions{Datacenter: "dc1", Token: token}}
	}

	wantNodes(t, dstest.Watch(t, "all", notify(h, req("db", "any"))).Next(t), "db-sidecar-proxy")
	wantNodes(t, dstest.Watch(t, "filtered", notify(h, req("db", "no-db"))).Next(t))
	wantNodes(t, dstest.Watch(t, "api", notify(h, req("api", "no-db"))).Next(t), "api-sidecar-proxy")

	denied := dstest.Watch(t, "denied", notify(h, req("db", "denied")))
	if err := denied.NextErr(t); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("denied read: %v", err)
	}
	// Retried with backoff: after the first failure, waits of 50-100 ms,
	// 100-200 ms, then 200-400 ms; a loop without one would read
	// thousands of times.
	time.Sleep(time.Second)
	if n := acl.count(structs.MethodHealthServiceNodes.Name() + "/denied"); n < 2 || n > 10 {
		t.Fatalf("denied read made %d times in a second", n)
	}
	if n := strings.Count(logs.String(), "proxycfg data source failed"); n != 1 {
		t.Fatalf("denial logged %d times, want once:\n%s", n, logs.String())
	}
}
