package fanout

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/internal/dstest"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKey(t *testing.T) {
	base := func() *structs.IntentionQueryRequest {
		return &structs.IntentionQueryRequest{
			Match:        &structs.IntentionQueryMatch{Type: structs.IntentionMatchDestination, Names: []string{"api"}},
			QueryOptions: structs.QueryOptions{Datacenter: "dc1", Token: "t"},
		}
	}
	cases := []struct {
		name string
		mod  func(r *structs.IntentionQueryRequest)
		same bool
	}{
		{"equal request, other pointers", func(r *structs.IntentionQueryRequest) {}, true},
		{"blocking parameters ignored", func(r *structs.IntentionQueryRequest) { r.MinQueryIndex, r.MaxQueryTime = 42, time.Minute }, true},
		{"token", func(r *structs.IntentionQueryRequest) { r.Token = "u" }, false},
		{"nested field", func(r *structs.IntentionQueryRequest) { r.Match.Names = []string{"web"} }, false},
		{"nil versus set pointer", func(r *structs.IntentionQueryRequest) { r.Match = nil }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.mod(r)
			if got := Key("m", base()) == Key("m", r); got != tc.same {
				t.Fatalf("same key = %v, want %v", got, tc.same)
			}
		})
	}
	maps := func(m map[string]string) string {
		return Key("m", &structs.DCSpecificRequest{NodeMetaFilters: m})
	}
	if maps(map[string]string{"a": "1", "b": "2", "c": "3"}) != maps(map[string]string{"c": "3", "b": "2", "a": "1"}) {
		t.Fatal("map order changes the key")
	}
	if Key("a", &structs.DCSpecificRequest{}) == Key("b", &structs.DCSpecificRequest{}) {
		t.Fatal("the kind is not part of the key")
	}
}

func TestSameResult(t *testing.T) {
	a := &structs.IndexedServices{Services: map[string][]string{"api": {"x"}}}
	b := &structs.IndexedServices{Services: map[string][]string{"api": {"x"}}}
	b.Index, b.LastContact = 99, time.Second
	c := &structs.IndexedServices{Services: map[string][]string{"api": {"y"}}}
	switch {
	case !SameResult(a, b):
		t.Fatal("results differing only in QueryMeta must be the same")
	case SameResult(a, c):
		t.Fatal("different results reported the same")
	case SameResult(a, &structs.IndexedCARoots{}):
		t.Fatal("different types reported the same")
	case SameResult(a, nil):
		t.Fatal("nil is not a result")
	}
	if b.Index != 99 {
		t.Fatal("SameResult modified its argument")
	}
}

// scripted is a runner driven by the test: it publishes what it is
// given, and reports when it stops.
type scripted struct {
	in      chan any // a value or an error
	stopped chan struct{}
}

func newScripted() *scripted { return &scripted{in: make(chan any), stopped: make(chan struct{})} }

func (s *scripted) runner() Runner {
	return func(ctx context.Context, out Sink) {
		defer close(s.stopped)
		for {
			select {
			case <-ctx.Done():
				return
			case v := <-s.in:
				if err, ok := v.(error); ok {
					out.Error(err)
				} else {
					out.Result(v)
				}
			}
		}
	}
}

func subscribe(g *Group, key string, r *scripted) dstest.NotifyFunc {
	return func(ctx context.Context, corr string, ch chan<- proxycfg.UpdateEvent) error {
		return g.Subscribe(ctx, key, key, corr, ch, r.runner)
	}
}

func TestGroupFanOut(t *testing.T) {
	g := NewGroup(Config{Name: "test"})
	defer g.Close()
	r := newScripted()
	a := dstest.WatchBuffered(t, "a", 4, subscribe(g, "k", r))
	b := dstest.WatchBuffered(t, "b", 4, subscribe(g, "k", r))

	v1 := &structs.IndexedServices{Services: map[string][]string{"x": nil}}
	go func() { r.in <- v1 }()
	if a.Next(t) != v1 || b.Next(t) != v1 {
		t.Fatal("subscribers must share the published value")
	}

	// A late subscriber gets the current value although the runner is
	// idle.
	c := dstest.WatchBuffered(t, "c", 4, subscribe(g, "k", r))
	if c.Next(t) != v1 {
		t.Fatal("late subscriber did not get the current value")
	}

	// An equal value (other index) is not sent again.
	same := &structs.IndexedServices{Services: map[string][]string{"x": nil}}
	same.Index = 7
	r.in <- same
	a.None(t, 50*time.Millisecond)

	// A failure is sent once, however often it repeats; the next success
	// goes out even if it equals the value before the failure.
	boom := errors.New("boom")
	go func() { r.in <- boom; r.in <- boom }()
	for _, s := range []*dstest.Sub{a, b, c} {
		if err := s.NextErr(t); !errors.Is(err, boom) {
			t.Fatalf("%s: %v", s.Corr, err)
		}
	}
	a.None(t, 50*time.Millisecond)
	go func() { r.in <- v1 }()
	for _, s := range []*dstest.Sub{a, b, c} {
		if s.Next(t) != v1 {
			t.Fatalf("%s: recovery value not sent", s.Corr)
		}
	}

	if st := g.Stats(); st.Queries != 1 || st.Subscribers != 3 || st.QueriesStarted != 1 {
		t.Fatalf("stats = %+v", st)
	}
	a.Cancel()
	b.Cancel()
	select {
	case <-r.stopped:
		t.Fatal("the runner stopped while a subscriber remains")
	case <-time.After(50 * time.Millisecond):
	}
	c.Cancel()
	select {
	case <-r.stopped:
	case <-time.After(dstest.Timeout):
		t.Fatal("the runner did not stop with its last subscriber")
	}
	dstest.WaitFor(t, "the query to go", func() bool { return g.Stats().Queries == 0 })

	// A new subscriber starts the question afresh.
	r2 := newScripted()
	d := dstest.WatchBuffered(t, "d", 4, subscribe(g, "k", r2))
	go func() { r2.in <- v1 }()
	d.Next(t)
	if st := g.Stats(); st.QueriesStarted != 2 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestGroupNeverSendsStale: a late subscriber's catch-up delivery racing
// a newer publication never leaves it with the older value last.
func TestGroupNeverSendsStale(t *testing.T) {
	g := NewGroup(Config{})
	defer g.Close()
	r := newScripted()
	// Room for every publication: the fan-out never waits on it.
	first := dstest.WatchBuffered(t, "first", 64, subscribe(g, "k", r))
	go func() { r.in <- 1 }()
	first.Next(t)
	for i := range 50 {
		late := dstest.Watch(t, "late", subscribe(g, "k", r))
		newer := i + 2
		published := make(chan struct{})
		go func() { r.in <- newer; close(published) }()
		var last any
		for last != newer {
			last = late.Next(t)
			if v, ok := last.(int); !ok || v > newer {
				t.Fatalf("late subscriber got %v", last)
			}
		}
		<-published
		late.None(t, 5*time.Millisecond)
		late.Cancel()
	}
}

func TestGroupCloseStopsEverything(t *testing.T) {
	g := NewGroup(Config{})
	r := newScripted()
	sub := dstest.Watch(t, "a", subscribe(g, "k", r))
	go func() { r.in <- 1 }()
	sub.Next(t)
	// A delivery blocked on a subscriber that does not read must not
	// keep Close waiting.
	go func() { r.in <- 2 }()
	time.Sleep(20 * time.Millisecond)
	g.Close()
	<-r.stopped
	if err := g.Subscribe(context.Background(), "k", "k", "x", make(chan proxycfg.UpdateEvent), r.runner); !errors.Is(err, ErrClosed) {
		t.Fatalf("Subscribe after Close = %v", err)
	}
	g.Close()
}
