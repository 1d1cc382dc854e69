package local

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// fakeClock is a settable clock for State.Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTestState(t *testing.T, mod func(*Config)) *State {
	t.Helper()
	cfg := Config{NodeName: "node1", NodeID: "11111111-2222-3333-4444-555555555555", Datacenter: "dc1", AdvertiseAddr: "127.0.0.1"}
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewState(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func webWithSidecar() *structs.ServiceDefinition {
	return &structs.ServiceDefinition{
		Name: "web", ID: "web1", Port: 8080, Check: ttlCheck(),
		Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}},
	}
}

func checkIDs(hcs structs.HealthChecks) []string {
	var out []string
	for _, h := range hcs {
		out = append(out, h.CheckID)
	}
	return out
}

func TestRegisterServiceStoresParentAndSidecar(t *testing.T) {
	s := newTestState(t, nil)
	res, err := s.RegisterService(webWithSidecar(), "tok", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Service.ID != "web1" || res.Sidecar == nil || res.Sidecar.ID != "web1-sidecar-proxy" || len(res.Checks) != 3 {
		t.Fatalf("result %+v", res)
	}
	if got := s.Services(); len(got) != 2 || got["web1-sidecar-proxy"].Port != 21000 || !got["web1-sidecar-proxy"].LocallyRegisteredAsSidecar {
		t.Fatalf("services %+v", got)
	}
	want := []string{"service:web1", "service:web1-sidecar-proxy:1", "service:web1-sidecar-proxy:2"}
	if got := checkIDs(s.Checks()); !slices.Equal(got, want) {
		t.Fatalf("checks %v, want %v", got, want)
	}
	if s.ServiceToken("web1") != "tok" || s.CheckState("service:web1").Token != "tok" {
		t.Fatalf("tokens not kept")
	}
	if got := checkIDs(s.ChecksForService("web1")); !slices.Equal(got, []string{"service:web1"}) {
		t.Fatalf("checks of web1: %v", got)
	}
	// What callers get are copies.
	svc := s.Service("web1")
	svc.Tags = append(svc.Tags, "mutated")
	if len(s.Service("web1").Tags) != 0 {
		t.Fatal("Service returned the stored object")
	}
}

func TestRegisterServiceInvalidLeavesStateUnchanged(t *testing.T) {
	s := newTestState(t, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "db", Port: 21000}, "", false); err != nil {
		t.Fatal(err)
	}
	before, beforeChecks := s.Services(), s.Checks()
	bad := []*structs.ServiceDefinition{
		{ID: "x"},
		{Name: "web", Port: 70000},
		{Name: "web", Check: &structs.CheckType{Name: "?"}},
		{Name: "web", Check: &structs.CheckType{HTTP: "http://x/", Interval: dur(-time.Second)}},
		{Name: "web", Port: 1, Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{Port: 21000}}},
	}
	for _, def := range bad {
		if _, err := s.RegisterService(def, "", false); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: err = %v", def, err)
		}
	}
	if !reflect.DeepEqual(before, s.Services()) || !reflect.DeepEqual(beforeChecks, s.Checks()) {
		t.Fatal("a refused registration changed the state")
	}
}

func TestReRegistrationKeepsSidecarPortAndCheckStatus(t *testing.T) {
	s := newTestState(t, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "other", Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}}, "", false); err != nil {
		t.Fatal(err)
	}
	res, err := s.RegisterService(webWithSidecar(), "", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sidecar.Port != 21001 {
		t.Fatalf("second sidecar port = %d, want 21001", res.Sidecar.Port)
	}
	s.UpdateCheck("service:web1", structs.HealthPassing, "ok")
	// Free 21000, then register web again: its sidecar keeps 21001.
	if _, err := s.RemoveService("other"); err != nil {
		t.Fatal(err)
	}
	def := webWithSidecar()
	def.Tags = []string{"v2"}
	res, err = s.RegisterService(def, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sidecar.Port != 21001 {
		t.Fatalf("re-registered sidecar port = %d, want 21001", res.Sidecar.Port)
	}
	if c := s.Check("service:web1"); c.Status != structs.HealthPassing || c.Output != "ok" || !slices.Equal(c.ServiceTags, []string{"v2"}) {
		t.Fatalf("re-registered check %+v", c)
	}
	// A new sidecar now gets the freed 21000.
	res, err = s.RegisterService(&structs.ServiceDefinition{Name: "third", Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}}, "", false)
	if err != nil || res.Sidecar.Port != 21000 {
		t.Fatalf("third sidecar: %v %+v", err, res)
	}
}

func TestReplaceExistingChecks(t *testing.T) {
	for _, replace := range []bool{false, true} {
		s := newTestState(t, nil)
		def := &structs.ServiceDefinition{Name: "web", Checks: structs.CheckTypes{{CheckID: "a", TTL: dur(time.Minute)}, {CheckID: "b", TTL: dur(time.Minute)}}}
		if _, err := s.RegisterService(def, "", false); err != nil {
			t.Fatal(err)
		}
		def.Checks = def.Checks[:1]
		res, err := s.RegisterService(def, "", replace)
		if err != nil {
			t.Fatal(err)
		}
		got := checkIDs(s.Checks())
		if replace {
			if !slices.Equal(got, []string{"a"}) || !slices.Equal(res.RemovedChecks, []string{"b"}) {
				t.Fatalf("replace: checks %v, removed %v", got, res.RemovedChecks)
			}
		} else if !slices.Equal(got, []string{"a", "b"}) || len(res.RemovedChecks) != 0 {
			t.Fatalf("no replace: checks %v, removed %v", got, res.RemovedChecks)
		}
	}
}

func TestRemoveService(t *testing.T) {
	s := newTestState(t, nil)
	if _, err := s.RegisterService(webWithSidecar(), "", false); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCheck(&structs.HealthCheck{CheckID: "mem"}, ttlCheck(), ""); err != nil {
		t.Fatal(err)
	}
	removed, err := s.RemoveService("web1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"service:web1", "service:web1-sidecar-proxy:1", "service:web1-sidecar-proxy:2"}
	if !slices.Equal(removed, want) {
		t.Fatalf("removed %v, want %v", removed, want)
	}
	if len(s.Services()) != 0 || !slices.Equal(checkIDs(s.Checks()), []string{"mem"}) {
		t.Fatalf("left: %v %v", s.Services(), checkIDs(s.Checks()))
	}
	_, err = s.RemoveService("web1")
	if !errors.Is(err, ErrServiceNotFound) || err.Error() != `Unknown service ID "web1". Ensure that the service ID is passed, not the service name.` {
		t.Fatalf("second removal: %v", err)
	}
}

func TestRemoveServiceKeepsForeignSidecarLookalike(t *testing.T) {
	s := newTestState(t, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); err != nil {
		t.Fatal(err)
	}
	// Registered by itself, not expanded from web: not web's to remove.
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web-sidecar-proxy", Kind: structs.ServiceKindConnectProxy, Port: 21000,
		Proxy: &structs.ConnectProxyConfig{DestinationServiceName: "web"}}, "", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveService("web"); err != nil {
		t.Fatal(err)
	}
	if !s.ServiceExists("web-sidecar-proxy") {
		t.Fatal("a directly registered proxy was removed with its destination")
	}
}

func TestChecks(t *testing.T) {
	clock := newFakeClock()
	s := newTestState(t, func(c *Config) { c.Now = clock.Now })
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Tags: []string{"t"}}, "", false); err != nil {
		t.Fatal(err)
	}

	err := s.AddCheck(&structs.HealthCheck{CheckID: "c", ServiceID: "nope"}, ttlCheck(), "")
	if !errors.Is(err, ErrServiceNotFound) || err.Error() != `ServiceID "nope" does not exist` {
		t.Fatalf("check of a missing service: %v", err)
	}
	if _, err := s.RegisterCheck(&structs.CheckDefinition{}, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("missing name: %v", err)
	}
	st, err := s.RegisterCheck(&structs.CheckDefinition{ServiceID: "web", CheckType: structs.CheckType{Name: "mem", TTL: dur(time.Minute)}}, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Check.CheckID != "mem" || st.Check.ServiceName != "web" || !slices.Equal(st.Check.ServiceTags, []string{"t"}) ||
		st.Check.Node != "node1" || st.Check.Status != structs.HealthCritical || !st.CriticalSince.Equal(clock.Now()) {
		t.Fatalf("registered %+v since %v", st.Check, st.CriticalSince)
	}

	// Status changes move CriticalSince; repeated critical keeps it.
	clock.Add(time.Minute)
	s.UpdateCheck("mem", structs.HealthPassing, "ok")
	if cs := s.CheckState("mem"); cs.Critical() || cs.Check.Status != structs.HealthPassing || cs.Check.Output != "ok" {
		t.Fatalf("after pass: %+v", cs)
	}
	clock.Add(time.Minute)
	s.UpdateCheck("mem", structs.HealthCritical, "bad")
	turned := clock.Now()
	clock.Add(time.Minute)
	s.UpdateCheck("mem", structs.HealthCritical, "still bad")
	if cs := s.CheckState("mem"); !cs.CriticalSince.Equal(turned) || cs.CriticalFor(clock.Now()) != time.Minute {
		t.Fatalf("critical since %v, want %v", cs.CriticalSince, turned)
	}
	// Re-registering the check keeps status and output.
	if _, err := s.RegisterCheck(&structs.CheckDefinition{ServiceID: "web", CheckType: structs.CheckType{Name: "mem", TTL: dur(time.Minute), Status: "passing"}}, ""); err != nil {
		t.Fatal(err)
	}
	if c := s.Check("mem"); c.Status != structs.HealthCritical || c.Output != "still bad" {
		t.Fatalf("re-registered %+v", c)
	}

	s.UpdateCheck("unknown", structs.HealthPassing, "") // ignored, no panic
	if err := s.SetCheckStatus("unknown", structs.HealthPassing, ""); !errors.Is(err, ErrCheckNotFound) ||
		err.Error() != `Unknown check ID "unknown". Ensure that the check ID is passed, not the check name.` {
		t.Fatalf("SetCheckStatus unknown: %v", err)
	}
	if err := s.SetCheckStatus("mem", "great", ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("SetCheckStatus bad status: %v", err)
	}
	if err := s.SetCheckStatus("mem", structs.HealthWarning, "w"); err != nil || s.Check("mem").Status != structs.HealthWarning {
		t.Fatalf("SetCheckStatus: %v", err)
	}

	if err := s.RemoveCheck("mem"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveCheck("mem"); !errors.Is(err, ErrCheckNotFound) {
		t.Fatalf("second removal: %v", err)
	}
	if s.Check("mem") != nil || s.CheckState("mem") != nil {
		t.Fatal("removed check still visible")
	}
}

func TestMaintenance(t *testing.T) {
	s := newTestState(t, nil)
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); err != nil {
		t.Fatal(err)
	}
	if err := s.EnableNodeMaintenance("upgrading"); err != nil {
		t.Fatal(err)
	}
	c := s.Check(NodeMaintCheckID)
	if c == nil || c.Status != structs.HealthCritical || c.Notes != "upgrading" || c.Name != "Node Maintenance Mode" || c.Type != "maintenance" || c.ServiceID != "" {
		t.Fatalf("node maintenance check %+v", c)
	}
	if err := s.EnableNodeMaintenance("again"); err != nil || s.Check(NodeMaintCheckID).Notes != "upgrading" {
		t.Fatalf("second enable changed the check: %v", err)
	}
	if err := s.DisableNodeMaintenance(); err != nil || s.Check(NodeMaintCheckID) != nil {
		t.Fatalf("disable: %v", err)
	}
	if err := s.DisableNodeMaintenance(); err != nil {
		t.Fatalf("disable when off: %v", err)
	}

	if err := s.EnableServiceMaintenance("web", ""); err != nil {
		t.Fatal(err)
	}
	c = s.Check("_service_maintenance:web")
	if c == nil || c.ServiceID != "web" || c.ServiceName != "web" || c.Status != structs.HealthCritical ||
		c.Notes != "Maintenance mode is enabled for this service, but no reason was provided. This is a default message." {
		t.Fatalf("service maintenance check %+v", c)
	}
	if err := s.DisableServiceMaintenance("web"); err != nil || s.Check("_service_maintenance:web") != nil {
		t.Fatalf("disable service maintenance: %v", err)
	}
	for _, err := range []error{s.EnableServiceMaintenance("nope", "r"), s.DisableServiceMaintenance("nope")} {
		if !errors.Is(err, ErrServiceNotFound) || err.Error() != `No service registered with ID "nope"` {
			t.Fatalf("unknown service: %v", err)
		}
	}
}

func received(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestNotify(t *testing.T) {
	s := newTestState(t, func(c *Config) { c.CheckUpdateInterval = time.Hour })
	ch := make(chan struct{}, 1)
	s.Notify(ch)
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"register", func() {
			_, _ = s.RegisterService(&structs.ServiceDefinition{Name: "web", Check: ttlCheck()}, "", false)
		}, true},
		{"status change", func() { s.UpdateCheck("service:web", structs.HealthPassing, "") }, true},
		{"output only", func() { s.UpdateCheck("service:web", structs.HealthPassing, "new output") }, false},
		{"same result", func() { s.UpdateCheck("service:web", structs.HealthPassing, "new output") }, false},
		{"node check added", func() { _ = s.AddCheck(&structs.HealthCheck{CheckID: "n"}, ttlCheck(), "") }, true},
		{"check removed", func() { _ = s.RemoveCheck("n") }, true},
		{"service removed", func() { _, _ = s.RemoveService("web") }, true},
	}
	for _, st := range steps {
		st.do()
		if got := received(ch); got != st.want {
			t.Fatalf("%s: notified = %v, want %v", st.name, got, st.want)
		}
	}
	// Coalescing: many changes, one buffered signal, no blocking.
	for i := 0; i < 10; i++ {
		_ = s.EnableNodeMaintenance("")
		_ = s.DisableNodeMaintenance()
	}
	if !received(ch) || received(ch) {
		t.Fatal("signals did not coalesce into one")
	}
	s.StopNotify(ch)
	_ = s.EnableNodeMaintenance("")
	if received(ch) {
		t.Fatal("signalled after StopNotify")
	}
}

func TestWatchService(t *testing.T) {
	s := newTestState(t, nil)
	svc, hash, watch := s.WatchService("web")
	if svc != nil || hash != "" {
		t.Fatalf("absent service: %v %q", svc, hash)
	}
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Port: 1}, "", false); err != nil {
		t.Fatal(err)
	}
	if !closed(watch) {
		t.Fatal("watch of an absent service not closed by its registration")
	}
	svc, h1, watch := s.WatchService("web")
	if svc == nil || h1 == "" || h1 != HashService(s.Service("web")) {
		t.Fatalf("service %v hash %q", svc, h1)
	}
	// Check changes are not service changes.
	s.UpdateCheck("x", structs.HealthPassing, "")
	_ = s.EnableNodeMaintenance("")
	if closed(watch) {
		t.Fatal("watch closed by an unrelated change")
	}
	// Identical re-registration closes the watch but keeps the hash.
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Port: 1}, "", false); err != nil {
		t.Fatal(err)
	}
	_, h2, watch2 := s.WatchService("web")
	if !closed(watch) || h2 != h1 {
		t.Fatalf("identical re-registration: closed=%v hash %q vs %q", closed(watch), h2, h1)
	}
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Port: 2}, "", false); err != nil {
		t.Fatal(err)
	}
	_, h3, watch3 := s.WatchService("web")
	if !closed(watch2) || h3 == h1 {
		t.Fatalf("changed service: closed=%v hash unchanged=%v", closed(watch2), h3 == h1)
	}
	if _, err := s.RemoveService("web"); err != nil {
		t.Fatal(err)
	}
	if !closed(watch3) {
		t.Fatal("watch not closed by removal")
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAliasSource(t *testing.T) {
	s := newTestState(t, func(c *Config) { c.CheckUpdateInterval = time.Hour })
	ch := make(chan struct{}, 1)
	s.AddAliasCheck("alias1", "db", ch)
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"other service", func() {
			_, _ = s.RegisterService(&structs.ServiceDefinition{Name: "web", Check: ttlCheck()}, "", false)
		}, false},
		{"other service's check", func() { s.UpdateCheck("service:web", structs.HealthPassing, "") }, false},
		{"aliased service added", func() { _, _ = s.RegisterService(&structs.ServiceDefinition{Name: "db", Check: ttlCheck()}, "", false) }, true},
		{"status", func() { s.UpdateCheck("service:db", structs.HealthPassing, "") }, true},
		{"output only (deferred for the catalog, not for aliases)", func() { s.UpdateCheck("service:db", structs.HealthPassing, "o") }, true},
		{"check added", func() { _ = s.AddCheck(&structs.HealthCheck{CheckID: "db2", ServiceID: "db"}, ttlCheck(), "") }, true},
		{"check removed", func() { _ = s.RemoveCheck("db2") }, true},
		{"service removed", func() { _, _ = s.RemoveService("db") }, true},
	}
	for _, st := range steps {
		st.do()
		if got := received(ch); got != st.want {
			t.Fatalf("%s: notified = %v, want %v", st.name, got, st.want)
		}
	}
	if s.ServiceExists("db") || !s.ServiceExists("web") {
		t.Fatal("ServiceExists")
	}
	if got := checkIDs(s.Checks()); !slices.Equal(got, []string{"service:web"}) {
		t.Fatalf("Checks() = %v", got)
	}
	s.RemoveAliasCheck("alias1", "db")
	_, _ = s.RegisterService(&structs.ServiceDefinition{Name: "db"}, "", false)
	if received(ch) {
		t.Fatal("signalled after RemoveAliasCheck")
	}
}

func TestConcurrentUse(t *testing.T) {
	s := newTestState(t, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				def := webWithSidecar()
				if _, err := s.RegisterService(def, "", j%2 == 0); err != nil {
					t.Error(err)
					return
				}
				s.UpdateCheck("service:web1", structs.HealthPassing, "")
				_ = s.Services()
				_ = s.Checks()
				_, _, _ = s.WatchService("web1")
				_, _ = s.RemoveService("web1")
			}
		}()
	}
	wg.Wait()
}

func BenchmarkRegisterService(b *testing.B) {
	for _, tc := range []struct {
		name    string
		dataDir bool
	}{{"memory", false}, {"datadir", true}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := Config{NodeName: "node1", AdvertiseAddr: "127.0.0.1"}
			if tc.dataDir {
				cfg.DataDir = b.TempDir()
			}
			s, err := NewState(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				def := &structs.ServiceDefinition{Name: "web", ID: "web" + strconv.Itoa(i%200), Port: 8080, Check: ttlCheck(),
					Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}}
				if _, err := s.RegisterService(def, "", false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
