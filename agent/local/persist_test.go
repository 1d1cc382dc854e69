package local

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func sha(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

func TestPersistenceRoundTrip(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock()
	mod := func(c *Config) { c.DataDir = dir; c.Now = clock.Now }
	s1 := newTestState(t, mod)

	def := webWithSidecar()
	def.Tags = []string{"v1"}
	def.Meta = map[string]string{"k": "v"}
	def.Checks = structs.CheckTypes{{CheckID: "http", HTTP: "http://127.0.0.1:8080/", Interval: dur(10 * time.Second), Status: "passing"}}
	if _, err := s1.RegisterService(def, "svc-token", false); err != nil {
		t.Fatal(err)
	}
	if err := s1.AddCheck(&structs.HealthCheck{CheckID: "node-ttl", Name: "node ttl"}, &structs.CheckType{TTL: dur(time.Hour)}, "chk-token"); err != nil {
		t.Fatal(err)
	}
	if err := s1.EnableServiceMaintenance("web1", "moving"); err != nil {
		t.Fatal(err)
	}
	// TTL results are kept until the TTL runs out.
	s1.UpdateCheck("node-ttl", structs.HealthPassing, "fine")
	s1.UpdateCheck("service:web1:1", structs.HealthWarning, "meh")

	// Consul's layout: one file per ID, named by the SHA-256 of the ID.
	if got, want := listDir(t, filepath.Join(dir, "services")), sorted(sha("web1"), sha("web1-sidecar-proxy")); !slices.Equal(got, want) {
		t.Fatalf("services/ = %v, want %v", got, want)
	}
	wantChecks := sorted(sha("service:web1:1"), sha("http"), sha("service:web1-sidecar-proxy:1"),
		sha("service:web1-sidecar-proxy:2"), sha("node-ttl"), sha("_service_maintenance:web1"))
	if got := listDir(t, filepath.Join(dir, "checks")); !slices.Equal(got, wantChecks) {
		t.Fatalf("checks/ = %v, want %v", got, wantChecks)
	}
	if got, want := listDir(t, filepath.Join(dir, "checks", "state")), sorted(sha("node-ttl"), sha("service:web1:1")); !slices.Equal(got, want) {
		t.Fatalf("checks/state/ = %v, want %v", got, want)
	}

	// A stray temp file from a crash is ignored.
	if err := os.WriteFile(filepath.Join(dir, "services", "junk-123.tmp"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	clock.Add(10 * time.Second) // within the 30s TTL
	s2 := newTestState(t, mod)
	if err := s2.Load(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s1.Services(), s2.Services()) {
		t.Fatalf("services differ after load:\n%+v\n%+v", s1.Services(), s2.Services())
	}
	if !s2.Service("web1-sidecar-proxy").LocallyRegisteredAsSidecar || s2.ServiceToken("web1") != "svc-token" {
		t.Fatal("sidecar flag or token lost")
	}
	want := map[string]string{
		"service:web1:1":               "warning", // TTL result restored
		"node-ttl":                     "passing", // TTL result restored
		"http":                         "critical",
		"service:web1-sidecar-proxy:1": "critical",
		"service:web1-sidecar-proxy:2": "critical",
		"_service_maintenance:web1":    "critical",
	}
	states := s2.CheckStates()
	if len(states) != len(want) {
		t.Fatalf("loaded %d checks, want %d", len(states), len(want))
	}
	for id, status := range want {
		cs := states[id]
		if cs == nil || cs.Check.Status != status {
			t.Fatalf("check %s: %+v, want %s", id, cs, status)
		}
		old := s1.CheckState(id)
		if !reflect.DeepEqual(cs.Type, old.Type) || cs.Token != old.Token || cs.Check.Name != old.Check.Name ||
			cs.Check.ServiceName != old.Check.ServiceName || !reflect.DeepEqual(cs.Check.Definition, old.Check.Definition) {
			t.Fatalf("check %s differs:\n%+v\n%+v", id, cs, old)
		}
	}
	if states["node-ttl"].Check.Output != "fine" || states["http"].CriticalSince.IsZero() {
		t.Fatalf("restored state %+v", states["node-ttl"].Check)
	}

	// Deregistration removes the files.
	if _, err := s2.RemoveService("web1"); err != nil {
		t.Fatal(err)
	}
	if err := s2.RemoveCheck("node-ttl"); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, filepath.Join(dir, "services")); !slices.Equal(got, []string{"junk-123.tmp"}) {
		t.Fatalf("services/ after removal = %v", got)
	}
	if got := listDir(t, filepath.Join(dir, "checks")); len(got) != 0 {
		t.Fatalf("checks/ after removal = %v", got)
	}
	if got := listDir(t, filepath.Join(dir, "checks", "state")); len(got) != 0 {
		t.Fatalf("checks/state/ after removal = %v", got)
	}
}

func TestPersistedTTLStateExpires(t *testing.T) {
	dir := t.TempDir()
	clock := newFakeClock()
	mod := func(c *Config) { c.DataDir = dir; c.Now = clock.Now }
	s1 := newTestState(t, mod)
	if err := s1.AddCheck(&structs.HealthCheck{CheckID: "ttl"}, &structs.CheckType{TTL: dur(10 * time.Second)}, ""); err != nil {
		t.Fatal(err)
	}
	s1.UpdateCheck("ttl", structs.HealthPassing, "ok")
	clock.Add(11 * time.Second)
	s2 := newTestState(t, mod)
	if err := s2.Load(); err != nil {
		t.Fatal(err)
	}
	if c := s2.Check("ttl"); c.Status != structs.HealthCritical || c.Output != "" {
		t.Fatalf("expired TTL state restored: %+v", c)
	}
	if got := listDir(t, filepath.Join(dir, "checks", "state")); len(got) != 0 {
		t.Fatalf("expired state file kept: %v", got)
	}
}

func TestLoadSkipsBadFiles(t *testing.T) {
	dir := t.TempDir()
	s1 := newTestState(t, func(c *Config) { c.DataDir = dir })
	if _, err := s1.RegisterService(&structs.ServiceDefinition{Name: "web", Check: ttlCheck()}, "", false); err != nil {
		t.Fatal(err)
	}
	// A corrupt service file, and a check whose service file is gone.
	if err := os.WriteFile(filepath.Join(dir, "services", sha("broken")), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s1.AddCheck(&structs.HealthCheck{CheckID: "orphan", ServiceID: "web"}, ttlCheck(), ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "services", sha("web"))); err != nil {
		t.Fatal(err)
	}
	s2 := newTestState(t, func(c *Config) { c.DataDir = dir })
	if err := s2.Load(); err != nil {
		t.Fatal(err)
	}
	if len(s2.Services()) != 0 || len(s2.Checks()) != 0 {
		t.Fatalf("loaded %v %v", s2.Services(), s2.Checks())
	}
	if _, err := os.Stat(filepath.Join(dir, "checks", sha("orphan"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan check file not purged: %v", err)
	}
}

func TestDevModePersistsNothing(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := newTestState(t, nil)
	if _, err := s.RegisterService(webWithSidecar(), "", false); err != nil {
		t.Fatal(err)
	}
	s.UpdateCheck("service:web1", structs.HealthPassing, "")
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 0 {
		t.Fatalf("dev mode wrote %v (%v)", entries, err)
	}
}

func TestPersistFailureRollsBack(t *testing.T) {
	dir := t.TempDir()
	s := newTestState(t, func(c *Config) { c.DataDir = dir })
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Port: 1}, "", false); err != nil {
		t.Fatal(err)
	}
	// A file where checks/ should be: the service file is written first,
	// then the check file fails, and the service file must be restored.
	if err := os.WriteFile(filepath.Join(dir, "checks"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	before := s.Services()
	_, err := s.RegisterService(&structs.ServiceDefinition{Name: "web", Port: 2, Check: ttlCheck()}, "", false)
	if !errors.Is(err, ErrPersist) {
		t.Fatalf("err = %v, want ErrPersist", err)
	}
	if !reflect.DeepEqual(before, s.Services()) || s.Check("service:web") != nil {
		t.Fatal("failed registration changed the state")
	}
	_, err = s.RegisterService(&structs.ServiceDefinition{Name: "new", Check: ttlCheck()}, "", false)
	if !errors.Is(err, ErrPersist) || s.ServiceExists("new") {
		t.Fatalf("err = %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "checks")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "services", sha("new"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("service file of the failed registration left behind: %v", err)
	}
	s2 := newTestState(t, func(c *Config) { c.DataDir = dir })
	if err := s2.Load(); err != nil {
		t.Fatal(err)
	}
	if got := s2.Service("web"); got == nil || got.Port != 1 {
		t.Fatalf("persisted service after rollback: %+v", got)
	}
}

func TestPersistFailureOnFileInPlaceOfDir(t *testing.T) {
	// Works as root too: a file where the services directory should be.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "services"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := newTestState(t, func(c *Config) { c.DataDir = dir })
	if _, err := s.RegisterService(&structs.ServiceDefinition{Name: "web"}, "", false); !errors.Is(err, ErrPersist) {
		t.Fatalf("err = %v, want ErrPersist", err)
	}
	if len(s.Services()) != 0 {
		t.Fatal("failed registration stored")
	}
	if err := s.Load(); err == nil {
		t.Fatal("Load of an unreadable services dir succeeded")
	}
}

// TestConfigRegistrationsAreNotPersisted: definitions from the config
// files leave nothing in the data dir, and purge what an HTTP
// registration of the same IDs left there, so that the config is the one
// record and a service dropped from it does not come back on restart.
func TestConfigRegistrationsAreNotPersisted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		httpFirst bool
	}{
		{"config only", false},
		{"config replaces an HTTP registration", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mod := func(c *Config) { c.DataDir = dir }
			s1 := newTestState(t, mod)
			def := webWithSidecar()
			def.Checks = structs.CheckTypes{{CheckID: "web-ttl", TTL: dur(time.Minute)}}
			chk := &structs.CheckDefinition{ID: "node-ttl", CheckType: structs.CheckType{Name: "node", TTL: dur(time.Minute)}}
			if tc.httpFirst {
				if _, err := s1.RegisterService(def, "", false); err != nil {
					t.Fatal(err)
				}
				if _, err := s1.RegisterCheck(chk, ""); err != nil {
					t.Fatal(err)
				}
				if got := listDir(t, filepath.Join(dir, servicesDir)); len(got) != 2 {
					t.Fatalf("HTTP registration persisted %q", got)
				}
			}
			res, err := s1.RegisterConfigService(def, "")
			if err != nil {
				t.Fatal(err)
			}
			if res.Sidecar == nil || len(res.Checks) < 3 { // web-ttl, the sidecar's two, webWithSidecar's own
				t.Fatalf("registered %+v", res)
			}
			if _, err := s1.RegisterConfigCheck(chk, ""); err != nil {
				t.Fatal(err)
			}
			if s1.Service("web1") == nil || s1.Service("web1-sidecar-proxy") == nil || s1.Check("node-ttl") == nil {
				t.Fatalf("services %v checks %v", s1.Services(), s1.Checks())
			}
			if got := listDir(t, filepath.Join(dir, servicesDir)); len(got) != 0 {
				t.Errorf("services dir holds %q", got)
			}
			if got := listDir(t, filepath.Join(dir, checksDir)); len(got) != 0 {
				t.Errorf("checks dir holds %q", got)
			}
			s2 := newTestState(t, mod)
			if err := s2.Load(); err != nil {
				t.Fatal(err)
			}
			if len(s2.Services()) != 0 || len(s2.Checks()) != 0 {
				t.Errorf("a restart restored %v and %v", s2.Services(), s2.Checks())
			}
		})
	}
}
