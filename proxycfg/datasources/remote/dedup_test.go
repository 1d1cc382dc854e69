package remote

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeHealth is a counting stand-in for the servers' Health.ServiceNodes:
// a blocking query per service over an in-memory index, which counts every
// call, the first calls (MinQueryIndex 0) and the calls in flight.
type fakeHealth struct {
	mu       sync.Mutex
	changed  *sync.Cond
	index    map[string]uint64
	nodes    map[string]structs.CheckServiceNodes
	calls    map[string]int
	initial  map[string]int
	inFlight int
	maxIn    int
}

func newFakeHealth() *fakeHealth {
	f := &fakeHealth{
		index: make(map[string]uint64), nodes: make(map[string]structs.CheckServiceNodes),
		calls: make(map[string]int), initial: make(map[string]int),
	}
	f.changed = sync.NewCond(&f.mu)
	return f
}

func (f *fakeHealth) RPC(ctx context.Context, method string, args, reply any) error {
	if method != structs.MethodHealthServiceNodes.Name() {
		return fmt.Errorf("unexpected method %s", method)
	}
	req := args.(*structs.ServiceSpecificRequest)
	out := reply.(*structs.IndexedCheckServiceNodes)
	if req.Filter != "" {
		return structs.ErrFilterNotSupported // as the servers do
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	name := req.ServiceName
	f.calls[name]++
	if req.MinQueryIndex == 0 {
		f.initial[name]++
	}
	f.inFlight++
	f.maxIn = max(f.maxIn, f.inFlight)
	defer func() { f.inFlight-- }()
	// Wake the Cond when the caller gives up, so the wait below ends.
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.changed.Broadcast()
	})
	defer stop()
	for f.index[name] <= req.MinQueryIndex && req.MinQueryIndex > 0 && ctx.Err() == nil {
		f.changed.Wait()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	out.Nodes = append(structs.CheckServiceNodes{}, f.nodes[name]...)
	out.Index = max(f.index[name], 1)
	return nil
}

// add registers one more instance of service and wakes its waiters.
func (f *fakeHealth) add(service, id string, meta map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index[service] = max(f.index[service], 1) + 1
	f.nodes[service] = append(f.nodes[service], structs.CheckServiceNode{
		Node:    &structs.Node{Node: "n-" + id},
		Service: &structs.NodeService{ID: id, Service: service, Meta: meta},
	})
	f.changed.Broadcast()
}

func (f *fakeHealth) counts(service string) (calls, initial int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[service], f.initial[service]
}

func (f *fakeHealth) inflight() (now, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight, f.maxIn
}

func healthReq(service, token string) *structs.ServiceSpecificRequest {
	return &structs.ServiceSpecificRequest{ServiceName: service, Connect: true, QueryOptions: structs.QueryOptions{Datacenter: "dc1", Token: token}}
}

func healthNotify(s *Sources, req *structs.ServiceSpecificRequest) dstest.NotifyFunc {
	h := s.DataSources(nil).Health
	return func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error {
		return h.Notify(ctx, req, corr, ch)
	}
}

// TestDedupManyProxiesFewQuestions: 200 proxies with the same 5 upstreams
// (1,000 watches, each with its own request value) make 5 blocking
// queries, not 1,000; a change of one upstream reaches its 200 watchers
// and nobody else; the last watcher leaving ends the query.
func TestDedupManyProxiesFewQuestions(t *testing.T) {
	const proxies, upstreams = 200, 5
	backend := newFakeHealth()
	src, err := New(Config{RPC: backend, Datacenter: "dc1", MaxQueryTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	subs := make([][]*dstest.Sub, upstreams)
	for p := range proxies {
		for u := range upstreams {
			// A fresh request per watch, as every state machine makes
			// its own.
			corr := fmt.Sprintf("p%d/u%d", p, u)
			subs[u] = append(subs[u], dstest.Watch(t, corr, healthNotify(src, healthReq(fmt.Sprintf("up%d", u), ""))))
		}
	}
	for u := range upstreams {
		for i, r := range nextAll(t, subs[u]) {
			if n := r.(*structs.IndexedCheckServiceNodes); len(n.Nodes) != 0 {
				t.Fatalf("%s: %d instances, want 0", subs[u][i].Corr, len(n.Nodes))
			}
		}
	}
	// Each loop is now blocked in its second call.
	dstest.WaitFor(t, "5 blocked queries", func() bool { now, _ := backend.inflight(); return now == upstreams })
	for u := range upstreams {
		if calls, initial := backend.counts(fmt.Sprintf("up%d", u)); initial != 1 || calls != 2 {
			t.Fatalf("up%d: %d first calls and %d calls, want 1 and 2", u, initial, calls)
		}
	}
	if _, peak := backend.inflight(); peak != upstreams {
		t.Fatalf("peak concurrent queries = %d, want %d", peak, upstreams)
	}
	if st := src.Stats(); st.Queries != upstreams || st.Subscribers != proxies*upstreams || st.QueriesStarted != upstreams {
		t.Fatalf("stats = %+v", st)
	}

	// One upstream changes: its 200 watchers get the same new result.
	backend.add("up2", "up2-sidecar-1", nil)
	results := nextAll(t, subs[2])
	for i, r := range results {
		if n := r.(*structs.IndexedCheckServiceNodes); len(n.Nodes) != 1 {
			t.Fatalf("%s: %d instances after the change", subs[2][i].Corr, len(n.Nodes))
		}
		if r != results[0] {
			t.Fatalf("%s got its own copy of the result: results must be shared", subs[2][i].Corr)
		}
	}
	time.Sleep(100 * time.Millisecond)
	for u := range upstreams {
		if u == 2 {
			continue
		}
		for _, s := range subs[u] {
			select {
			case ev := <-s.Ch:
				t.Fatalf("%s: unexpected event %+v", s.Corr, ev)
			default:
			}
		}
		if calls, _ := backend.counts(fmt.Sprintf("up%d", u)); calls != 2 {
			t.Fatalf("up%d: %d calls after another upstream changed, want 2", u, calls)
		}
	}

	// Watchers leave: the query of up0 stops with its last one.
	for _, s := range subs[0] {
		s.Cancel()
	}
	dstest.WaitFor(t, "up0's query to stop", func() bool {
		now, _ := backend.inflight()
		return src.Stats().Queries == upstreams-1 && now == upstreams-1
	})
}

// TestDedupKeepsQuestionsApart: requests that differ in anything that may
// change the answer (token, filter, connect) are separate questions; the
// subset filter is applied here, not sent to the servers.
func TestDedupKeepsQuestionsApart(t *testing.T) {
	backend := newFakeHealth()
	backend.add("api", "v1", map[string]string{"version": "v1"})
	backend.add("api", "v2", map[string]string{"version": "v2"})
	src, err := New(Config{RPC: backend, Datacenter: "dc1", MaxQueryTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()

	plain := dstest.Watch(t, "plain", healthNotify(src, healthReq("api", "")))
	token := dstest.Watch(t, "token", healthNotify(src, healthReq("api", "secret")))
	subsetReq := healthReq("api", "")
	subsetReq.Filter = `Service.Meta.version == "v2"`
	subset := dstest.Watch(t, "subset", healthNotify(src, subsetReq))

	if n := plain.Next(t).(*structs.IndexedCheckServiceNodes).Nodes; len(n) != 2 {
		t.Fatalf("plain: %d instances", len(n))
	}
	token.Next(t)
	if n := subset.Next(t).(*structs.IndexedCheckServiceNodes).Nodes; len(n) != 1 || n[0].Service.ID != "v2" {
		t.Fatalf("subset: %+v", n)
	}
	if st := src.Stats(); st.Queries != 3 {
		t.Fatalf("queries = %d, want 3", st.Queries)
	}
	// An instance outside the subset: the plain watchers see it, the
	// subset's does not (its filtered answer did not change).
	backend.add("api", "v1b", map[string]string{"version": "v1"})
	plain.Next(t)
	subset.None(t, 150*time.Millisecond)
}

// nextAll receives the next result of every watch concurrently, as the
// state machines of many proxies would: the source sends to one watcher
// after the other, so reading them in order would wait on the source's
// order.
func nextAll(t *testing.T, subs []*dstest.Sub) []any {
	t.Helper()
	out := make([]any, len(subs))
	errs := make(chan error, len(subs))
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case ev := <-s.Ch:
				if ev.Err != nil || ev.Result == nil {
					errs <- fmt.Errorf("%s: event %+v", s.Corr, ev)
				}
				out[i] = ev.Result
			case <-time.After(dstest.Timeout):
				errs <- fmt.Errorf("%s: no result", s.Corr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}
