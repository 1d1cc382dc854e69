package server

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// restartOnDisk starts a one-server cluster on disk, lets prepare write
// to it, stops it, damages its files with corrupt, and starts a server on
// the same data dir again, returning what New said.
func restartOnDisk(t *testing.T, prepare func(s *Server), corrupt func(t *testing.T, raftDir string)) error {
	t.Helper()
	ts := startTestCluster(t, 1, true)[0]
	prepare(ts.srv)
	ts.stop(t)
	corrupt(t, filepath.Join(ts.dataDir, "raft"))
	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	port, err := ports.Port()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{Logger: testLogger(t, "again"), NodeName: ts.name, NodeID: ts.id, DataDir: ts.dataDir,
		Listener: ln, Advertise: ln.Addr().(*net.TCPAddr), Bootstrap: true})
	if err == nil {
		t.Cleanup(func() { _ = srv.Shutdown() })
		waitForLeader(t, []*testServer{{srv: srv}}, 30*time.Second)
		if e := kvGet(t, srv, "k-99", false); e == nil || string(e.Value) != "v-99" {
			t.Fatalf("started on damaged files and serves a wrong state: k-99 = %+v", e)
		}
	} else {
		_ = ln.Close()
	}
	return err
}

func writeKeys(t *testing.T, s *Server) {
	t.Helper()
	for i := range 100 {
		kvPut(t, s, "k-"+strconv.Itoa(i), "v-"+strconv.Itoa(i))
	}
}

// flipBytes overwrites n bytes of path at off (from the end when off < 0).
func flipBytes(t *testing.T, path string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if off < 0 {
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		off += fi.Size()
	}
	junk := make([]byte, n)
	for i := range junk {
		junk[i] = 0xA5
	}
	if _, err := f.WriteAt(junk, off); err != nil {
		t.Fatal(err)
	}
}

// replaceAll replaces every occurrence of old in path by new, of the same
// length, failing the test if there is none.
func replaceAll(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s holds no %q", path, old)
	}
	if err := os.WriteFile(path, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedRaftFilesAreRefused: a server whose newest snapshot fails its
// checksum, or one of whose log entries is not what was written, does not
// start, and the error names the file; damage the log store survives (a
// torn tail) leaves the state intact.
func TestDamagedRaftFilesAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		snapshot bool // take a snapshot before stopping
		corrupt  func(t *testing.T, raftDir string)
		names    string // "" when the server may start with its state intact
	}{
		{"snapshot body", true, func(t *testing.T, dir string) {
			snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
			if len(snaps) == 0 {
				t.Fatal("no snapshot was written")
			}
			flipBytes(t, snaps[len(snaps)-1], 10, 8)
		}, "state.bin"},
		{"entry data", false, func(t *testing.T, dir string) {
			// The value bytes of the last write, in every page that
			// holds a copy: decoded, the entry would set another value.
			replaceAll(t, filepath.Join(dir, "raft.db"), "v-99", "v-98")
		}, "raft.db"},
		{"torn tail", false, func(t *testing.T, dir string) {
			flipBytes(t, filepath.Join(dir, "raft.db"), -4096, 4096)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := restartOnDisk(t, func(s *Server) {
				writeKeys(t, s)
				if tc.snapshot {
					if err := s.raft.Snapshot().Error(); err != nil {
						t.Fatal(err)
					}
				}
			}, tc.corrupt)
			switch {
			case tc.names != "" && (!errors.Is(err, ErrCorruptRaftData) || !strings.Contains(err.Error(), tc.names)):
				t.Fatalf("New = %v, want ErrCorruptRaftData naming %s", err, tc.names)
			case tc.names == "" && err != nil && !errors.Is(err, ErrCorruptRaftData):
				t.Fatalf("New = %v: a refusal must be ErrCorruptRaftData", err)
			}
			t.Logf("New: %v", err)
		})
	}
}
