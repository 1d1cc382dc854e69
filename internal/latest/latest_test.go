package latest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestGet(t *testing.T) {
	var c Cache[string, int]
	builds := 0
	build := func(v int) func() (int, error) {
		return func() (int, error) { builds++; return v, nil }
	}
	is := func(want int) func(int) bool { return func(v int) bool { return v == want } }

	steps := []struct {
		name       string
		key        string
		want       int
		wantBuilds int
	}{
		{"first build", "a", 1, 1},
		{"current value reused", "a", 1, 1},
		{"stale value rebuilt", "a", 2, 2},
		{"other key built", "b", 1, 3},
		{"new value kept", "a", 2, 3},
	}
	for _, st := range steps {
		got, err := c.Get(st.key, is(st.want), build(st.want))
		if err != nil || got != st.want || builds != st.wantBuilds {
			t.Errorf("%s: got %d, %v after %d builds; want %d after %d", st.name, got, err, builds, st.want, st.wantBuilds)
		}
	}
}

func TestBuildErrorStoresNothing(t *testing.T) {
	var c Cache[string, int]
	boom := errors.New("boom")
	if _, err := c.Get("a", func(int) bool { return true }, func() (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if c.Len() != 0 {
		t.Fatalf("a failed build was stored")
	}
}

// TestSweepDropsUnused: once the cache doubles, entries not asked for
// since the last sweep go and those asked for stay.
func TestSweepDropsUnused(t *testing.T) {
	var c Cache[string, int]
	always := func(int) bool { return true }
	one := func() (int, error) { return 1, nil }
	for i := range minSweep - 1 {
		_, _ = c.Get(fmt.Sprint("old", i), always, one)
	}
	_, _ = c.Get("hot", always, one) // reaches minSweep: the first sweep, everything was used
	if c.Len() != minSweep {
		t.Fatalf("len %d after the first sweep, want %d", c.Len(), minSweep)
	}
	// Until the next sweep only "hot" is asked for again.
	for i := 0; c.Len() < 2*minSweep-1; i++ {
		_, _ = c.Get("hot", always, one)
		_, _ = c.Get(fmt.Sprint("new", i), always, one)
	}
	_, _ = c.Get("last", always, one) // reaches 2*minSweep: the second sweep
	built := false
	_, _ = c.Get("hot", always, func() (int, error) { built = true; return 1, nil })
	if built {
		t.Error("an entry asked for between sweeps was dropped")
	}
	built = false
	_, _ = c.Get("old0", always, func() (int, error) { built = true; return 1, nil })
	if !built {
		t.Error("an entry not asked for between sweeps was kept")
	}
	if n := c.Len(); n >= 2*minSweep {
		t.Errorf("len %d: the sweep dropped nothing", n)
	}
}

// TestConcurrentCallersShareOneBuild: callers asking for the same new
// value at once get one build between them.
func TestConcurrentCallersShareOneBuild(t *testing.T) {
	var c Cache[string, *int]
	var builds atomic.Int32
	v := new(int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _ := c.Get("k", func(p *int) bool { return p == v }, func() (*int, error) { builds.Add(1); return v, nil })
			if got != v {
				t.Error("got another value")
			}
		}()
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
}
