package serverstate

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// TestQuestionsShareReadsAndHoldNoGoroutine is issue 17's fleet in
// small: n sidecars each asking its own intentions and service config
// and all asking the health of one upstream, with two tokens. The health
// question is one query per token (a token's answer is never handed to
// another), the others one per proxy, and none of them holds a goroutine
// while it waits: the goroutines added are the hub's, one per distinct
// watch channel, a handful for the whole fleet. Writes still reach exactly
// the questions they answer, and once every subscriber is gone nothing of
// the queries remains (goleak checks the rest at the end of the package).
func TestQuestionsShareReadsAndHoldNoGoroutine(t *testing.T) {
	const n = 200
	f := newFixture(t, "")
	ds := f.src.DataSources(nil)
	base := runtime.NumGoroutine()

	token := func(i int) string { return fmt.Sprintf("token-%d", i%2) }
	var own, health []*dstest.Sub
	for i := range n {
		opts := structs.QueryOptions{Datacenter: "dc1", Token: token(i)}
		dest := fmt.Sprintf("svc-%d", i)
		own = append(own,
			dstest.WatchBuffered(t, "ixn-"+dest, 4, notify(ds.Intentions, &structs.ServiceSpecificRequest{ServiceName: dest, QueryOptions: opts})),
			dstest.WatchBuffered(t, "cfg-"+dest, 4, notify(ds.ResolvedServiceConfig, &structs.ServiceConfigRequest{Name: dest, Upstreams: []string{"api"}, QueryOptions: opts})))
		health = append(health, dstest.WatchBuffered(t, "api-"+dest, 4, notify(ds.Health, &structs.ServiceSpecificRequest{ServiceName: "api", Connect: true, QueryOptions: opts})))
	}
	for _, s := range own {
		s.Next(t)
	}
	for _, s := range health {
		wantNodes(t, s.Next(t))
	}
	if st := f.src.Stats(); st.Queries != 2*n+2 || st.Subscribers != 3*n || st.QueriesStarted != 2*n+2 {
		t.Fatalf("stats = %+v, want %d queries (one health query per token) for %d subscribers", st, 2*n+2, 3*n)
	}
	// The bound is the hub's goroutines (a few shared channels) and the
	// catch-up deliveries still under way; a goroutine per question would
	// be 2n+2.
	dstest.WaitFor(t, "the queries to settle", func() bool { return runtime.NumGoroutine()-base < n/10 })
	if c := f.src.hub.channels(); c == 0 || c > n/10 {
		t.Fatalf("the hub waits on %d channels for %d questions", c, 2*n+2)
	}

	// One proxy's intentions change: its question answers, no other does.
	f.entry(intentionsEntry("svc-7", "web", structs.IntentionActionDeny))
	if got := own[14].Next(t).(*structs.IndexedIntentions); len(got.Intentions) != 1 {
		t.Fatalf("svc-7 intentions = %v", got.Intentions)
	}
	// The upstream gets an instance: every health subscriber hears of it.
	f.register("n1", sidecar("api", nil))
	for _, s := range health {
		wantNodes(t, s.Next(t), "api-sidecar-proxy")
	}
	for i, s := range own {
		if i != 14 {
			select {
			case ev := <-s.Ch:
				t.Fatalf("%s: event for another proxy's write: %#v", s.Corr, ev)
			default:
			}
		}
	}

	for _, s := range append(own, health...) {
		s.Cancel()
	}
	dstest.WaitFor(t, "every query to stop", func() bool {
		return f.src.Stats().Queries == 0 && f.src.hub.channels() == 0 && runtime.NumGoroutine() <= base
	})
}

// TestLargeReadWaitsOnItsOwn checks the reads that watch more channels
// than the hub takes (here many config entries, each its own channel):
// they wait in a goroutine of their own and still follow the store.
func TestLargeReadWaitsOnItsOwn(t *testing.T) {
	f := newFixture(t, "")
	const entries = 2 * maxHubChans
	for i := range entries {
		f.entry(serviceDefaults(fmt.Sprintf("s%d", i), "tcp", nil))
	}
	read := func(ws memdb.WatchSet, st *state.Store) (any, error) {
		out := &structs.IndexedConfigEntries{Kind: structs.ServiceDefaults}
		for i := range entries {
			_, e, err := st.ConfigEntry(ws, structs.ServiceDefaults, fmt.Sprintf("s%d", i))
			if err != nil {
				return nil, err
			}
			out.Entries = append(out.Entries, e)
		}
		return out, nil
	}
	sub := dstest.Watch(t, "many", func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error {
		return f.src.watch(ctx, "test", &structs.DCSpecificRequest{}, "", "many", corr, ch, read)
	})
	sub.Next(t)
	f.entry(serviceDefaults("s3", "http", nil))
	got := latest(t, sub).(*structs.IndexedConfigEntries)
	if p := got.Entries[3].(*structs.ServiceConfigEntry).Protocol; p != "http" {
		t.Fatalf("s3 protocol after the write = %q", p)
	}
	if c := f.src.hub.channels(); c != 0 {
		t.Fatalf("the hub waits on %d channels of a large read", c)
	}
	sub.Cancel()
	dstest.WaitFor(t, "the query to stop", func() bool { return f.src.Stats().Queries == 0 })
}

// TestFailedReadIsRetried checks the retry timer that replaces the hub
// after a failed read: the failure is sent, the read runs again, and its
// success follows.
func TestFailedReadIsRetried(t *testing.T) {
	f := newFixture(t, "")
	var calls atomic.Int32
	boom := errors.New("boom")
	read := func(ws memdb.WatchSet, st *state.Store) (any, error) {
		if calls.Add(1) <= 2 {
			return nil, boom
		}
		return query0(ws, st)
	}
	sub := dstest.Watch(t, "flaky", func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error {
		return f.src.watch(ctx, "test", &structs.DCSpecificRequest{}, "", "flaky", corr, ch, read)
	})
	if err := sub.NextErr(t); !errors.Is(err, boom) {
		t.Fatalf("first event: %v", err)
	}
	if _, ok := sub.Next(t).(*structs.IndexedServices); !ok || calls.Load() != 3 {
		t.Fatalf("after %d reads: no result", calls.Load())
	}
	sub.Cancel()
	dstest.WaitFor(t, "the query to stop", func() bool { return f.src.Stats().Queries == 0 })
}

// query0 is a read that always succeeds: the service list.
func query0(ws memdb.WatchSet, st *state.Store) (any, error) {
	idx, svcs, err := st.Services(ws, nil)
	if err != nil {
		return nil, err
	}
	out := &structs.IndexedServices{Services: svcs}
	out.Index = idx
	return out, nil
}
