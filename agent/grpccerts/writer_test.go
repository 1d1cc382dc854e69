package grpccerts

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/agent/local"
	"github.com/trellis-mesh/trellis/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeCA stands in for the leaf manager and its roots watch: the CA is
// what the test controls (renewals and rotations on demand), while the
// services come from a real local state.
type fakeCA struct {
	mu sync.Mutex
	// Guarded by mu:
	serial  int
	leaves  map[string]*structs.IssuedCert
	roots   *structs.IndexedCARoots
	changed chan struct{}
}

func newFakeCA() *fakeCA {
	return &fakeCA{leaves: map[string]*structs.IssuedCert{}, changed: make(chan struct{}),
		roots: &structs.IndexedCARoots{ActiveRootID: "r1", Roots: structs.CARoots{{ID: "r1", RootCert: "ROOT-1"}}, QueryMeta: structs.QueryMeta{Index: 1}}}
}

func (f *fakeCA) bumpLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// renew issues a new leaf for service.
func (f *fakeCA) renew(service string) *structs.IssuedCert {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serial++
	n := strconv.Itoa(f.serial)
	c := &structs.IssuedCert{Service: service, CertPEM: "CERT-" + service + "-" + n, PrivateKeyPEM: "KEY-" + service + "-" + n, RaftIndex: structs.RaftIndex{ModifyIndex: uint64(f.serial)}}
	f.leaves[service] = c
	f.bumpLocked()
	return c
}

// rotate adds a root and makes it the active one.
func (f *fakeCA) rotate(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := *f.roots
	r.ActiveRootID = id
	r.Roots = append(append(structs.CARoots{}, r.Roots...), &structs.CARoot{ID: id, RootCert: "ROOT-" + id})
	r.Index++
	f.roots = &r
	f.bumpLocked()
}

// errWrongToken is fakeCA's answer to a leaf asked for with another token
// than the service's registration token (register's "tok-<name>").
var errWrongToken = errors.New("leaf asked for with the wrong token")

func (f *fakeCA) Get(ctx context.Context, service, token string, minIndex uint64, _ time.Duration) (*structs.IssuedCert, error) {
	if token != "tok-"+service {
		return nil, fmt.Errorf("%w: %q for %s", errWrongToken, token, service)
	}
	for {
		f.mu.Lock()
		c, ch := f.leaves[service], f.changed
		f.mu.Unlock()
		if c != nil && c.ModifyIndex > minIndex {
			cp := *c
			return &cp, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

func (f *fakeCA) WatchRoots() (*structs.IndexedCARoots, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.roots, f.changed
}

func newState(t *testing.T) *local.State {
	t.Helper()
	st, err := local.NewState(local.Config{NodeName: "n1", Datacenter: "dc1", AdvertiseAddr: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func register(t *testing.T, st *local.State, id, name string, native bool) {
	t.Helper()
	def := &structs.ServiceDefinition{ID: id, Name: name, Port: 8080}
	if native {
		def.Connect = &structs.ServiceDefinitionConnect{Native: true}
	}
	if _, err := st.RegisterService(def, "tok-"+name, false); err != nil {
		t.Fatal(err)
	}
}

func startWriter(t *testing.T, dir string, st *local.State, ca *fakeCA) *Writer {
	t.Helper()
	w, err := New(Config{Dir: dir, Leaves: ca, Roots: ca, Services: st, Changes: st, RetryMin: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	t.Cleanup(w.Stop)
	return w
}

func waitFile(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got %q (%v), want %q", path, b, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitGone(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readyFiles(t *testing.T, w *Writer, id string) Files {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := w.Files(ctx, id)
	if err != nil || !f.Ready {
		t.Fatalf("Files(%s): %+v %v", id, f, err)
	}
	return f
}

func TestWriterKeepsFilesOfNativeServices(t *testing.T) {
	dir := t.TempDir()
	st, ca := newState(t), newFakeCA()
	ca.renew("api")
	register(t, st, "api-1", "api", true)
	register(t, st, "web", "web", false)
	w := startWriter(t, dir, st, ca)

	f := readyFiles(t, w, "api-1")
	if f.Dir != filepath.Join(dir, "api-1") || f.CertFile != filepath.Join(dir, "api-1", "cert.pem") || f.Service != "api" {
		t.Fatalf("layout: %+v", f)
	}
	waitFile(t, f.CertFile, "CERT-api-1")
	waitFile(t, f.KeyFile, "KEY-api-1")
	waitFile(t, f.CAFile, "ROOT-1\n")
	if fi, err := os.Stat(f.KeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode: %v %v", fi.Mode(), err)
	}

	for _, tc := range []struct {
		id   string
		want error
	}{{"web", ErrNotConnectNative}, {"nope", ErrUnknownService}} {
		if _, err := w.Files(context.Background(), tc.id); !errors.Is(err, tc.want) {
			t.Errorf("Files(%s): %v, want %v", tc.id, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "web")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a service that is not Connect-native got a directory: %v", err)
	}

	// A renewal and a rotation replace the files; nothing else is left in
	// the directory (no temporary files).
	ca.renew("api")
	waitFile(t, f.CertFile, "CERT-api-2")
	waitFile(t, f.KeyFile, "KEY-api-2")
	ca.rotate("r2")
	waitFile(t, f.CAFile, "ROOT-1\nROOT-r2\n")
	entries, _ := os.ReadDir(f.Dir)
	if len(entries) != 3 {
		t.Errorf("directory holds %d entries, want 3", len(entries))
	}

	// A second instance of the same service shares the leaf; deregistering
	// one removes only its directory.
	register(t, st, "api/2", "api", true)
	f2 := readyFiles(t, w, "api/2")
	if filepath.Dir(f2.Dir) != dir || f2.Dir == filepath.Join(dir, "api") {
		t.Fatalf("an ID with a slash must stay one directory under the root: %s", f2.Dir)
	}
	waitFile(t, f2.CertFile, "CERT-api-2")
	if _, err := st.RemoveService("api-1"); err != nil {
		t.Fatal(err)
	}
	waitGone(t, f.Dir)
	waitFile(t, f2.CAFile, "ROOT-1\nROOT-r2\n")

	// A service that leaves Connect-native loses its files.
	register(t, st, "api/2", "api", false)
	waitGone(t, f2.Dir)
}

func TestWriterStartAndStop(t *testing.T) {
	tests := []struct {
		name      string
		ownDir    bool
		wantAfter bool // files still there after Stop
	}{
		{name: "data dir keeps the files across a restart", wantAfter: true},
		{name: "temporary dir is removed", ownDir: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := ""
			if !tc.ownDir {
				dir = t.TempDir()
				// Left by a service deregistered while the agent was down.
				if err := os.MkdirAll(filepath.Join(dir, "gone"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			st, ca := newState(t), newFakeCA()
			ca.renew("api")
			register(t, st, "api-1", "api", true)
			w, err := New(Config{Dir: dir, Leaves: ca, Roots: ca, Services: st, Changes: st})
			if err != nil {
				t.Fatal(err)
			}
			w.Start()
			f := readyFiles(t, w, "api-1")
			if !tc.ownDir {
				waitGone(t, filepath.Join(dir, "gone"))
			}
			w.Stop()
			w.Stop()
			_, err = os.Stat(f.CertFile)
			if got := err == nil; got != tc.wantAfter {
				t.Fatalf("cert file after Stop: %v, want present=%v", err, tc.wantAfter)
			}
			if _, err := w.Files(context.Background(), "api-1"); !errors.Is(err, ErrStopped) {
				t.Fatalf("Files after Stop: %v", err)
			}
		})
	}
}

func TestDirName(t *testing.T) {
	for _, tc := range []struct {
		id    string
		plain bool
	}{
		{"api-1", true}, {"api_v2.blue", true}, {"..", false}, {".hidden", false},
		{"a/b", false}, {"a\\b", false}, {"", false}, {"caf\u00e9", false},
	} {
		got := dirName(tc.id)
		if (got == tc.id) != tc.plain || filepath.Base(got) != got || got == ".." || got == "." {
			t.Errorf("dirName(%q) = %q", tc.id, got)
		}
	}
}
