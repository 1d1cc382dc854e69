package local

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// indexesWithoutHeap is the part of the indexes a rebuild recomputes.
func indexesWithoutHeap(ix indexes) indexes {
	ix.outputDue = nil
	return ix
}

// assertIndexesConsistent fails unless the incremental indexes equal the
// ones a rebuild from the maps gives.
func assertIndexesConsistent(t *testing.T, s *State, step string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	got := indexesWithoutHeap(s.ix)
	saved := s.ix
	s.rebuildIndexesLocked()
	want := indexesWithoutHeap(s.ix)
	s.ix = saved
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: indexes drifted:\n got %+v\nwant %+v", step, got, want)
	}
}

func TestIndexesFollowEveryWrite(t *testing.T) {
	ctx := context.Background()
	type step struct {
		name string
		do   func(t *testing.T, s *State, sy *Syncer, cat *fakeCatalog)
	}
	register := func(def *structs.ServiceDefinition, replace bool) func(*testing.T, *State, *Syncer, *fakeCatalog) {
		return func(t *testing.T, s *State, _ *Syncer, _ *fakeCatalog) {
			t.Helper()
			if _, err := s.RegisterService(def, "tok", replace); err != nil {
				t.Fatal(err)
			}
		}
	}
	syncChanges := func(t *testing.T, _ *State, sy *Syncer, _ *fakeCatalog) {
		t.Helper()
		if err := sy.SyncChanges(ctx); err != nil {
			t.Fatal(err)
		}
	}
	syncFull := func(t *testing.T, _ *State, sy *Syncer, _ *fakeCatalog) {
		t.Helper()
		if err := sy.SyncFull(ctx); err != nil {
			t.Fatal(err)
		}
	}
	twoChecks := &structs.ServiceDefinition{Name: "api", Port: 9000, Checks: structs.CheckTypes{ttlCheck(), ttlCheck()}}
	oneCheck := &structs.ServiceDefinition{Name: "api", Port: 9001, Check: ttlCheck()}
	cases := []struct {
		name  string
		steps []step
	}{
		{"register, sync, remove, sync", []step{
			{"register with sidecar", register(webWithSidecar(), false)},
			{"sync", syncChanges},
			{"re-register", register(webWithSidecar(), false)},
			{"remove", func(t *testing.T, s *State, _ *Syncer, _ *fakeCatalog) {
				if _, err := s.RemoveService("web1"); err != nil {
					t.Fatal(err)
				}
			}},
			{"sync the removal", syncChanges},
		}},
		{"replace existing checks and move a check", []step{
			{"two checks", register(twoChecks, false)},
			{"one check, replacing", register(oneCheck, true)},
			{"node check", func(t *testing.T, s *State, _ *Syncer, _ *fakeCatalog) {
				if err := s.AddCheck(&structs.HealthCheck{CheckID: "c1"}, ttlCheck(), ""); err != nil {
					t.Fatal(err)
				}
			}},
			{"same check ID moved to the service", func(t *testing.T, s *State, _ *Syncer, _ *fakeCatalog) {
				if err := s.AddCheck(&structs.HealthCheck{CheckID: "c1", ServiceID: "api"}, ttlCheck(), ""); err != nil {
					t.Fatal(err)
				}
			}},
			{"status change", func(_ *testing.T, s *State, _ *Syncer, _ *fakeCatalog) {
				s.UpdateCheck("c1", structs.HealthPassing, "ok")
			}},
			{"sync", syncChanges},
			{"remove check", func(t *testing.T, s *State, _ *Syncer, _ *fakeCatalog) {
				if err := s.RemoveCheck("c1"); err != nil {
					t.Fatal(err)
				}
			}},
			{"sync", syncChanges},
		}},
		{"full sync repairs drift both ways", []step{
			{"register", register(webWithSidecar(), false)},
			{"sync", syncChanges},
			{"catalog loses one, gains one", func(_ *testing.T, _ *State, _ *Syncer, cat *fakeCatalog) {
				cat.deleteService("node1", "web1-sidecar-proxy")
				cat.put("node1", &structs.NodeService{ID: "stray", Service: "stray", Port: 1},
					&structs.HealthCheck{Node: "node1", CheckID: "stray-check", ServiceID: "stray", Status: structs.HealthPassing})
			}},
			{"full sync", syncFull},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cat := newFakeCatalog()
			s := newTestState(t, nil)
			sy := newTestSyncer(t, s, cat, nil)
			for _, st := range tc.steps {
				st.do(t, s, sy, cat)
				assertIndexesConsistent(t, s, st.name)
			}
		})
	}
}

// TestSyncRoundSendsOnlyWhatChanged: with many services in sync, a round
// plans the one that changed (the plan is built from the dirty sets, not
// by comparing every entry).
func TestSyncRoundSendsOnlyWhatChanged(t *testing.T) {
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	for i := range 50 {
		if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "s" + strconv.Itoa(i), Port: 1000 + i, Check: ttlCheck()}, "", false); err != nil {
			t.Fatal(err)
		}
	}
	if err := sy.SyncFull(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	dirty := len(s.ix.dirtyServices) + len(s.ix.dirtyChecks)
	s.mu.Unlock()
	if dirty != 0 {
		t.Fatalf("%d dirty entries after a full sync", dirty)
	}
	s.UpdateCheck("service:s7", structs.HealthPassing, "")
	p := s.syncPlan()
	if len(p.regServices) != 0 || len(p.regChecks) != 1 || p.regChecks[0].check.CheckID != "service:s7" {
		t.Fatalf("plan: %d services, checks %+v", len(p.regServices), p.regChecks)
	}
}

// TestDeferredOutputsComeDueInOrder: the heap gives the earliest pending
// output, forgets outputs that were sent or superseded, and a round
// promotes exactly the due ones.
func TestDeferredOutputsComeDueInOrder(t *testing.T) {
	clock := newFakeClock()
	s := newTestState(t, func(c *Config) { c.Now = clock.Now; c.CheckUpdateInterval = time.Minute })
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		if err := s.AddCheck(&structs.HealthCheck{CheckID: id, Status: structs.HealthPassing}, ttlCheck(), ""); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		s.checks[id].inSync = true
		s.reindexCheckLocked(id)
		s.mu.Unlock()
	}
	if !s.nextOutputDue().IsZero() {
		t.Fatal("output due with none deferred")
	}
	due := map[string]time.Time{}
	for _, id := range ids {
		s.UpdateCheck(id, structs.HealthPassing, "out "+id) // output only: deferred
		s.mu.Lock()
		due[id] = s.checks[id].outputDue
		s.mu.Unlock()
	}
	// A status change sends "b" at once: its deferred output is moot.
	s.UpdateCheck("b", structs.HealthWarning, "out b")
	delete(due, "b")
	first := slices.MinFunc(slices.Collect(maps.Values(due)), func(a, b time.Time) int { return a.Compare(b) })
	if got := s.nextOutputDue(); !got.Equal(first) {
		t.Fatalf("nextOutputDue = %v, want %v", got, first)
	}
	clock.Add(time.Minute) // every deferral is within the interval
	p := s.syncPlan()
	var got []string
	for _, c := range p.regChecks {
		got = append(got, c.check.CheckID)
	}
	if !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("planned %v", got)
	}
	if !s.nextOutputDue().IsZero() {
		t.Fatal("outputs still pending after promotion")
	}
	s.mu.Lock()
	left := s.ix.outputDue.Len()
	s.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d stale heap entries kept", left)
	}
}
