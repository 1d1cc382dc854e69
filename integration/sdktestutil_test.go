package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/consul/sdk/testutil"
)

// consulOnPath puts the trellis binary on PATH under the name consul, as
// a project whose tests start Consul through sdk/testutil would.
func consulOnPath(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(requireBinary(t), filepath.Join(dir, "consul")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// TestSDKTestutil: Consul's own test harness (consul/sdk/testutil) starts
// trellis as consul with the config it writes: the server has a leader and
// an active CA root, its node's serfHealth check passes, the official
// client works against it, and it stops cleanly.
func TestSDKTestutil(t *testing.T) {
	consulOnPath(t)
	srv, err := testutil.NewTestServerConfigT(t, func(c *testutil.TestServerConfig) {
		c.LogLevel = "warn"
		c.Stdout, c.Stderr = testWriter{t}, testWriter{t}
	})
	if err != nil {
		t.Fatalf("NewTestServerConfigT: %v", err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = srv.Stop()
		}
	}()
	srv.WaitForLeader(t)
	srv.WaitForActiveCARoot(t)
	srv.WaitForSerfCheck(t)

	client, err := api.NewClient(&api.Config{Address: srv.HTTPAddr})
	if err != nil {
		t.Fatal(err)
	}
	checks, _, err := client.Health().Node(srv.Config.NodeName, nil)
	if err != nil {
		t.Fatal(err)
	}
	passing := false
	for _, c := range checks {
		passing = passing || (c.CheckID == "serfHealth" && c.Status == api.HealthPassing)
	}
	if !passing {
		t.Fatalf("serfHealth of %s not passing: %+v", srv.Config.NodeName, checks)
	}
	srv.SetKVString(t, "sdk/key", "value")
	if got := srv.GetKVString(t, "sdk/key"); got != "value" {
		t.Fatalf("GetKVString = %q", got)
	}
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// testWriter sends a process's output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Logf("%s", p)
	return len(p), nil
}
