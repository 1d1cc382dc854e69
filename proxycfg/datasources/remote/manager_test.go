package remote

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/leaf"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/proxycfg/internal/mgrtest"
	"github.com/trellis-mesh/trellis/server"
	"github.com/trellis-mesh/trellis/structs"
)

// countingRPC counts the calls that reach the servers, by method and
// subject (the service or chain asked about), and the first calls
// (MinQueryIndex 0) among them.
type countingRPC struct {
	next structs.Caller

	mu      sync.Mutex
	calls   map[string]int
	initial map[string]int
}

func (c *countingRPC) RPC(ctx context.Context, method string, args, reply any) error {
	key := method
	switch a := args.(type) {
	case *structs.ServiceSpecificRequest:
		key += ":" + a.ServiceName
	case *structs.DiscoveryChainRequest:
		key += ":" + a.Name
	}
	c.mu.Lock()
	c.calls[key]++
	if q, ok := args.(interface{ QueryOpts() *structs.QueryOptions }); ok && q.QueryOpts().MinQueryIndex == 0 {
		c.initial[key]++
	}
	c.mu.Unlock()
	return c.next.RPC(ctx, method, args, reply)
}

func (c *countingRPC) counts(key string) (calls, initial int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[key], c.initial[key]
}

// TestManagerDedupOverRealServer: 200 sidecars registered with a real
// manager on a "client agent" (remote sources over the wire to a real
// server), all with the same 5 upstreams, cause one blocking health
// query per upstream, not 1,000; a new instance of one upstream reaches
// all 200 through that one query.
func TestManagerDedupOverRealServer(t *testing.T) {
	const proxies, upstreams = 200, 5
	srv, addr := dstest.StartServer(t, "s1")
	pool := server.NewConnPool(server.ConnPoolConfig{})
	defer pool.Close()
	rpc := &countingRPC{next: poolRPC{pool: pool, addr: addr}, calls: map[string]int{}, initial: map[string]int{}}
	for u := range upstreams {
		name := fmt.Sprintf("up%d", u)
		dstest.Register(t, srv, "n-"+name, &structs.NodeService{ID: name, Service: name, Port: 8080})
		dstest.Register(t, srv, "n-"+name, dstest.Sidecar(name, 21000))
	}

	src, err := New(Config{RPC: rpc, Datacenter: "dc1", MaxQueryTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	leaves, err := leaf.New(leaf.Config{Watcher: mgrtest.StubLeaves{}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := proxycfg.New(proxycfg.Config{DataSources: src.DataSources(leaves), Datacenter: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		m.Close()
		src.Close()
		leaves.Close()
	}()

	var names []string
	for u := range upstreams {
		names = append(names, fmt.Sprintf("up%d", u))
	}
	watches := make([]<-chan *proxycfg.ConfigSnapshot, proxies)
	for p := range proxies {
		svc := dstest.Sidecar("web", 21000+p, names...)
		svc.ID = fmt.Sprintf("web-%d-sidecar-proxy", p)
		id := proxycfg.ProxyID{Node: "client1", ServiceID: svc.ID}
		if err := m.Register(id, svc, proxycfg.SourceLocal, "", true); err != nil {
			t.Fatal(err)
		}
		ch, cancel := m.Watch(id)
		defer cancel()
		watches[p] = ch
	}
	endpoints := func(s *proxycfg.ConfigSnapshot, up string) int {
		n := 0
		if u := s.ConnectProxy.Upstreams.Get(proxycfg.UpstreamID(up)); u != nil {
			for _, eps := range u.Endpoints {
				n += len(eps)
			}
		}
		return n
	}
	waitAll := func(what string, ok func(*proxycfg.ConfigSnapshot) bool) {
		t.Helper()
		for p, ch := range watches {
			deadline := time.After(dstest.Timeout)
			for done := false; !done; {
				select {
				case s := <-ch:
					done = ok(s)
				case <-deadline:
					t.Fatalf("proxy %d: no snapshot with %s", p, what)
				}
			}
		}
	}
	waitAll("every upstream's endpoint", func(s *proxycfg.ConfigSnapshot) bool {
		for _, up := range names {
			if endpoints(s, up) != 1 {
				return false
			}
		}
		return true
	})
	for _, up := range names {
		if _, initial := rpc.counts(structs.MethodHealthServiceNodes.Name() + ":" + up); initial != 1 {
			t.Errorf("%s: %d first health queries for %d proxies, want 1", up, initial, proxies)
		}
		if _, initial := rpc.counts(structs.MethodDiscoveryChainGet.Name() + ":" + up); initial != 1 {
			t.Errorf("%s: %d first chain queries, want 1", up, initial)
		}
	}
	if _, initial := rpc.counts(structs.MethodConnectCARoots.Name()); initial != 1 {
		t.Errorf("%d first roots queries, want 1", initial)
	}
	if st := src.Stats(); st.Queries > 2*upstreams+5 {
		t.Errorf("%d distinct queries for %d proxies: %+v", st.Queries, proxies, st)
	}

	before, _ := rpc.counts(structs.MethodHealthServiceNodes.Name() + ":up2")
	dstest.Register(t, srv, "n-up2b", dstest.Sidecar("up2", 21000))
	waitAll("up2's second endpoint", func(s *proxycfg.ConfigSnapshot) bool { return endpoints(s, "up2") == 2 })
	after, _ := rpc.counts(structs.MethodHealthServiceNodes.Name() + ":up2")
	if after-before > 2 {
		t.Fatalf("%d health queries for up2 to tell %d proxies about one change", after-before, proxies)
	}
	t.Logf("stats: remote %+v, manager %+v", src.Stats(), m.Stats())
}
