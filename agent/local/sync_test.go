package local

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/structs"
)

const waitLimit = 5 * time.Second

func newTestSyncer(t *testing.T, s *State, rpc structs.Caller, mod func(*SyncerConfig)) *Syncer {
	t.Helper()
	cfg := SyncerConfig{State: s, RPC: rpc, Interval: time.Hour, RetryMin: 10 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		ServerUpStagger: 10 * time.Millisecond, RPCTimeout: 5 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	sy, err := NewSyncer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sy.Stop)
	return sy
}

func TestNewSyncerValidates(t *testing.T) {
	s := newTestState(t, func(c *Config) { c.AdvertiseAddr = "" })
	if _, err := NewSyncer(SyncerConfig{State: s, RPC: newFakeCatalog()}); err == nil {
		t.Fatal("no error without an advertise address")
	}
	if _, err := NewSyncer(SyncerConfig{RPC: newFakeCatalog()}); err == nil {
		t.Fatal("no error without a state")
	}
}

func TestSyncerPushesChangesAtOnce(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	s := newTestState(t, func(c *Config) { c.NodeMeta = map[string]string{"rack": "r1"} })
	sy := newTestSyncer(t, s, cat, nil)
	sy.Start()

	// The first full sync registers the node itself.
	waitFor(t, waitLimit, "node registration", func() bool { return cat.node("node1") != nil })
	n := cat.node("node1")
	wantTagged := map[string]string{"lan": "127.0.0.1", "lan_ipv4": "127.0.0.1", "wan": "127.0.0.1", "wan_ipv4": "127.0.0.1"}
	if n.ID != "11111111-2222-3333-4444-555555555555" || n.Address != "127.0.0.1" || !reflect.DeepEqual(n.TaggedAddresses, wantTagged) ||
		!reflect.DeepEqual(n.Meta, map[string]string{"rack": "r1"}) {
		t.Fatalf("node %+v", n)
	}

	mark := cat.numCalls()
	if _, err := s.RegisterService(webWithSidecar(), "tok", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLimit, "service, sidecar and checks in the catalog", func() bool {
		return slices.Equal(cat.serviceIDs("node1"), []string{"web1", "web1-sidecar-proxy"}) && len(cat.checkIDs("node1")) == 3
	})
	// Two registrations (one per service, checks riding along), with the
	// node record skipped, and no reads: a change does not need a full sync.
	calls := cat.callsSince(mark)
	if len(calls) != 2 {
		t.Fatalf("calls: %s", describeCalls(calls))
	}
	for _, c := range calls {
		if c.method != structs.MethodCatalogRegister.Name() || c.reg.Service == nil || !c.reg.SkipNodeUpdate || c.reg.Token != "tok" {
			t.Fatalf("unexpected call %s %+v", c.method, c.reg)
		}
	}
	if got := cat.service("node1", "web1-sidecar-proxy"); got.Port != 21000 || got.Proxy.DestinationServiceID != "web1" {
		t.Fatalf("sidecar in catalog %+v", got)
	}

	s.UpdateCheck("service:web1", structs.HealthPassing, "ok")
	waitFor(t, waitLimit, "check status in the catalog", func() bool {
		c := cat.check("node1", "service:web1")
		return c != nil && c.Status == structs.HealthPassing && c.Output == "ok"
	})

	if _, err := s.RemoveService("web1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLimit, "deregistration", func() bool {
		return len(cat.serviceIDs("node1")) == 0 && len(cat.checkIDs("node1")) == 0
	})
	waitFor(t, waitLimit, "tombstones to be dropped", func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return len(s.services) == 0 && len(s.checks) == 0
	})
	sy.Stop()
}

func TestSyncFullRepairsDriftBothWays(t *testing.T) {
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	ctx := context.Background()

	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Port: 80, Check: ttlCheck()}, "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "db", Port: 5432}, "", false); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCheck(&structs.HealthCheck{CheckID: "mem", Name: "mem"}, ttlCheck(), ""); err != nil {
		t.Fatal(err)
	}
	if err := sy.SyncFull(ctx); err != nil {
		t.Fatal(err)
	}

	// Drift behind the agent's back: db lost, web changed, a service and
	// checks the agent never had, a check with the wrong status; plus the
	// leader's own records, which must survive.
	cat.deleteService("node1", "db")
	web := cat.service("node1", "web")
	web.Port = 81
	cat.put("node1", web, &structs.HealthCheck{CheckID: "service:web", Name: "Service 'web' check", Status: structs.HealthPassing, ServiceID: "web", ServiceName: "web", Type: "ttl",
		Definition: structs.HealthCheckDefinition{TTL: dur(30 * time.Second)}})
	cat.put("node1", &structs.NodeService{ID: "old", Service: "old"}, &structs.HealthCheck{CheckID: "service:old", ServiceID: "old", ServiceName: "old"})
	cat.put("node1", &structs.NodeService{ID: structs.ConsulServiceID, Service: structs.ConsulServiceName, Port: 8300},
		&structs.HealthCheck{CheckID: structs.SerfCheckID, Name: structs.SerfCheckName, Status: structs.HealthPassing},
		&structs.HealthCheck{CheckID: "stale", Status: structs.HealthPassing})

	if err := sy.SyncFull(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := cat.serviceIDs("node1"), []string{"consul", "db", "web"}; !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	if got, want := cat.checkIDs("node1"), []string{"mem", "serfHealth", "service:web"}; !slices.Equal(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	if cat.service("node1", "web").Port != 80 || cat.check("node1", "service:web").Status != structs.HealthCritical {
		t.Fatal("changed records not repaired")
	}

	// In sync now: another full sync reads but writes nothing.
	before := cat.writes()
	if err := sy.SyncFull(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cat.writes() - before; n != 0 {
		t.Fatalf("full sync of an in-sync node wrote %d times: %s", n, describeCalls(cat.callsSince(cat.numCalls()-n)))
	}
}

func TestSyncFullNodeInfoDrift(t *testing.T) {
	cat := newFakeCatalog()
	s := newTestState(t, func(c *Config) { c.NodeMeta = map[string]string{"a": "b"} })
	sy := newTestSyncer(t, s, cat, nil)
	if err := sy.SyncFull(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The leader rewrote the node without our meta (as a Serf reconcile
	// may): the next full sync puts it back.
	cat.mu.Lock()
	cat.nodes["node1"].Meta = nil
	cat.mu.Unlock()
	if err := sy.SyncFull(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := cat.node("node1").Meta; !reflect.DeepEqual(got, map[string]string{"a": "b"}) {
		t.Fatalf("node meta %v", got)
	}
}

func TestSyncerPeriodicFullSync(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, func(c *SyncerConfig) { c.Interval = 50 * time.Millisecond })
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); err != nil {
		t.Fatal(err)
	}
	sy.Start()
	waitFor(t, waitLimit, "initial sync", func() bool { return cat.service("node1", "web") != nil })
	cat.deleteService("node1", "web")
	cat.put("node1", &structs.NodeService{ID: "rogue", Service: "rogue"})
	waitFor(t, waitLimit, "anti-entropy repair", func() bool {
		return slices.Equal(cat.serviceIDs("node1"), []string{"web"})
	})
	sy.Stop()
}

func TestSyncerRetriesAfterFailures(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	cat.setFail(structs.ErrNoLeader)
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	sy.Start()
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, waitLimit, "several attempts", func() bool { return cat.numCalls() >= 4 })
	if cat.service("node1", "web") != nil {
		t.Fatal("registered while failing")
	}
	// The leader is back: the pending registration goes through.
	cat.setFail(nil)
	waitFor(t, waitLimit, "registration after recovery", func() bool { return cat.service("node1", "web") != nil })

	// A change made while the servers are unreachable is also retried.
	cat.setFail(errors.New("connection refused"))
	if _, err := s.RemoveService("web"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	cat.setFail(nil)
	waitFor(t, waitLimit, "deregistration after recovery", func() bool { return cat.service("node1", "web") == nil })
	sy.Stop()
}

func TestSyncerBacksOff(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	cat.setFail(structs.ErrNoLeader)
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, func(c *SyncerConfig) { c.RetryMin, c.RetryMax = 100*time.Millisecond, 200*time.Millisecond })
	sy.Start()
	time.Sleep(500 * time.Millisecond)
	// Each failed full sync is one call (the first read fails); with waits
	// of at least 50ms (half of RetryMin) there are at most ~10 in 500ms,
	// where a hot loop would make thousands.
	if n := cat.numCalls(); n < 2 || n > 12 {
		t.Fatalf("%d calls in 500ms", n)
	}
	sy.Stop()
}

func TestSyncerOutputRateLimit(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	s := newTestState(t, func(c *Config) { c.CheckUpdateInterval = 2 * time.Second })
	sy := newTestSyncer(t, s, cat, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Check: ttlCheck()}, "", false); err != nil {
		t.Fatal(err)
	}
	sy.Start()
	waitFor(t, waitLimit, "initial sync", func() bool { return cat.check("node1", "service:web") != nil })

	// Output only: deferred by 1s..2s.
	start := time.Now()
	s.UpdateCheck("service:web", structs.HealthCritical, "output 1")
	time.Sleep(300 * time.Millisecond)
	if got := cat.check("node1", "service:web").Output; got != "" {
		t.Fatalf("output-only change synced at once: %q", got)
	}
	waitFor(t, waitLimit, "deferred output", func() bool { return cat.check("node1", "service:web").Output == "output 1" })
	if d := time.Since(start); d < time.Second {
		t.Fatalf("deferred output synced after %s, want >= 1s", d)
	}

	// A status change goes at once, output included.
	start = time.Now()
	s.UpdateCheck("service:web", structs.HealthPassing, "output 2")
	waitFor(t, waitLimit, "status change", func() bool {
		c := cat.check("node1", "service:web")
		return c.Status == structs.HealthPassing && c.Output == "output 2"
	})
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("status change took %s", d)
	}
	sy.Stop()
}

func TestFullSyncLeavesDeferredOutputAlone(t *testing.T) {
	cat := newFakeCatalog()
	s := newTestState(t, func(c *Config) { c.CheckUpdateInterval = time.Hour })
	sy := newTestSyncer(t, s, cat, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Check: ttlCheck()}, "", false); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sy.SyncFull(ctx); err != nil {
		t.Fatal(err)
	}
	s.UpdateCheck("service:web", structs.HealthCritical, "chatty")
	before := cat.writes()
	if err := sy.SyncFull(ctx); err != nil {
		t.Fatal(err)
	}
	if cat.writes() != before || cat.check("node1", "service:web").Output != "" {
		t.Fatal("full sync pushed a deferred output")
	}
}

func TestSyncerPauseResume(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	sy.Pause()
	sy.Start()
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if n := cat.numCalls(); n != 0 || !sy.Paused() {
		t.Fatalf("paused syncer made %d calls", n)
	}
	sy.Pause()
	sy.Resume()
	if !sy.Paused() {
		t.Fatal("nested pause lifted by one Resume")
	}
	sy.Resume()
	waitFor(t, waitLimit, "sync after Resume", func() bool { return cat.service("node1", "web") != nil })
	sy.Stop()
	defer func() {
		if recover() == nil {
			t.Fatal("unbalanced Resume did not panic")
		}
	}()
	sy.Resume()
}

func TestSyncerTriggerFullSync(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); err != nil {
		t.Fatal(err)
	}
	sy.Start()
	waitFor(t, waitLimit, "initial sync", func() bool { return cat.service("node1", "web") != nil })
	cat.deleteService("node1", "web")
	time.Sleep(50 * time.Millisecond)
	if cat.service("node1", "web") != nil {
		t.Fatal("repaired without a full sync")
	}
	sy.TriggerFullSync()
	waitFor(t, waitLimit, "triggered full sync", func() bool { return cat.service("node1", "web") != nil })
	sy.Stop()
}

func TestSyncChangeDuringRPCIsNotLost(t *testing.T) {
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Check: ttlCheck()}, "", false); err != nil {
		t.Fatal(err)
	}
	// While the registration is in flight, the check turns passing.
	once := false
	cat.setOnWrite(func(string, any) {
		if !once {
			once = true
			s.UpdateCheck("service:web", structs.HealthPassing, "")
		}
	})
	ctx := context.Background()
	if err := sy.SyncChanges(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cat.check("node1", "service:web").Status; got != structs.HealthCritical {
		t.Fatalf("catalog status %s before the second round", got)
	}
	if err := sy.SyncChanges(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cat.check("node1", "service:web").Status; got != structs.HealthPassing {
		t.Fatalf("change made during the RPC was lost: catalog status %s", got)
	}
}

func TestSyncPermissionDeniedIsNotRetried(t *testing.T) {
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	if err := sy.SyncChanges(context.Background()); err != nil { // node info
		t.Fatal(err)
	}
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); err != nil {
		t.Fatal(err)
	}
	cat.setFail(structs.ErrPermissionDenied)
	if err := sy.SyncChanges(context.Background()); err != nil {
		t.Fatalf("ACL denial reported as a failure: %v", err)
	}
	n := cat.numCalls()
	if err := sy.SyncChanges(context.Background()); err != nil || cat.numCalls() != n {
		t.Fatalf("denied registration retried (%v)", err)
	}
}

func TestSyncRoundContinuesPastOneBadItem(t *testing.T) {
	cat := newFakeCatalog()
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, nil)
	for _, name := range []string{"a", "b", "c"} {
		if _, err := s.RegisterService(&structs.ServiceDefinition{Name: name}, "", false); err != nil {
			t.Fatal(err)
		}
	}
	cat.setOnWrite(func(_ string, args any) {
		if r, ok := args.(*structs.RegisterRequest); ok && r.Service != nil && r.Service.ID == "b" {
			cat.setFail(errors.New("b is cursed"))
		} else {
			cat.setFail(nil)
		}
	})
	err := sy.SyncChanges(context.Background())
	if err == nil {
		t.Fatal("no error for the failed item")
	}
	if got := cat.serviceIDs("node1"); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("services %v: one bad item stopped the round", got)
	}
}

func TestSyncerStopCancelsRPC(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cat := newFakeCatalog()
	cat.setBlock(true)
	s := newTestState(t, nil)
	sy := newTestSyncer(t, s, cat, func(c *SyncerConfig) { c.RPCTimeout = time.Hour })
	sy.Start()
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		sy.Stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("Stop did not return while an RPC was in flight")
	}
	sy.Stop() // idempotent
}

func TestAEScale(t *testing.T) {
	cases := []struct {
		nodes int
		want  time.Duration
	}{
		{1, time.Minute}, {128, time.Minute}, {129, 2 * time.Minute}, {256, 2 * time.Minute},
		{257, 3 * time.Minute}, {512, 3 * time.Minute}, {8192, 7 * time.Minute},
	}
	for _, tc := range cases {
		if got := AEScale(time.Minute, tc.nodes); got != tc.want {
			t.Errorf("AEScale(1m, %d) = %s, want %s", tc.nodes, got, tc.want)
		}
	}
	// The full-sync delay lies in [scaled, 2*scaled).
	sy := &Syncer{cfg: SyncerConfig{Interval: time.Second, ClusterSize: func() int { return 300 }}}
	for i := 0; i < 100; i++ {
		if d := sy.fullSyncDelay(); d < 3*time.Second || d >= 6*time.Second {
			t.Fatalf("delay %s outside [3s, 6s)", d)
		}
	}
}
