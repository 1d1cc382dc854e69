package integration

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
	"go.uber.org/goleak"
)

// Environment knobs for TestMain.
const (
	// binaryEnv points at a prebuilt trellis binary; the build is skipped.
	binaryEnv = "TRELLIS_BINARY"
	// raceEnv, when non-empty, builds the binary with -race.
	raceEnv = "TRELLIS_BUILD_RACE"
)

// The binary built once per `go test` process by TestMain, which writes
// these before m.Run and never after; tests only read them.
var (
	trellisBinary string
	buildErr      error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := runMain(m)
	if code == 0 {
		// Writers, blocking readers and lock holders are owned by their
		// tests; none may outlive them.
		// sdk/testutil's port allocator keeps one goroutine for the life
		// of the process, by design (TestSDKTestutil).
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/hashicorp/consul/sdk/freeport.checkFreedPorts")); err != nil {
			fmt.Fprintf(os.Stderr, "integration: leaked goroutines: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runMain is TestMain's body, split out so the deferred cleanup of the build
// directory runs before os.Exit.
func runMain(m *testing.M) int {
	switch {
	case testing.Short():
		// Every scenario skips; do not spend a build on them.
	case os.Getenv(binaryEnv) != "":
		trellisBinary = os.Getenv(binaryEnv)
	default:
		dir, err := os.MkdirTemp("", "trellis-integration-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "integration: temp dir: %v\n", err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		start := time.Now()
		trellisBinary, buildErr = harness.BuildBinary(ctx, harness.BuildConfig{
			OutDir: dir,
			Race:   os.Getenv(raceEnv) != "",
		})
		cancel()
		if buildErr == nil {
			fmt.Fprintf(os.Stderr, "integration: built %s in %s\n", trellisBinary, time.Since(start).Round(time.Millisecond))
		}
	}
	return m.Run()
}

// requireBinary skips the scenario in -short mode and fails it when the
// binary could not be built, so a broken build shows up as red tests with
// the compiler output rather than as silent skips.
func requireBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration scenario: runs real trellis processes")
	}
	if buildErr != nil {
		t.Fatalf("building trellis: %v", buildErr)
	}
	return trellisBinary
}

// Timeouts shared by the scenarios.
const (
	// clusterStartTimeout bounds start-up until every server agrees on a
	// leader.
	clusterStartTimeout = 30 * time.Second
	// electionTimeout is the bound for a new leader after kill -9.
	electionTimeout = 10 * time.Second
	// scenarioTimeout bounds a whole scenario; each must stay well under
	// two minutes.
	scenarioTimeout = 100 * time.Second
)

// newPorts returns a port allocator owned by the test.
func newPorts(t *testing.T) *harness.PortAllocator {
	t.Helper()
	p, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startCluster starts n servers with their default configuration and
// waits until they agree on a leader. serverArgs are appended to every
// server's command line.
func startCluster(t *testing.T, n int, serverArgs ...string) (*harness.Cluster, *harness.Agent) {
	t.Helper()
	c := harness.StartCluster(t, harness.ClusterConfig{
		Binary:     requireBinary(t),
		Ports:      newPorts(t),
		Servers:    n,
		ServerArgs: serverArgs,
	})
	return c, waitLeader(t, c, clusterStartTimeout)
}

// configFile writes v as a JSON config file (Consul's keys) into the test's
// temp dir and returns the -config-file arguments for it.
func configFile(t *testing.T, name string, v any) []string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"-config-file", path}
}

// startDev starts one -dev agent and waits for it to lead itself.
func startDev(t *testing.T) (*harness.Cluster, *harness.Agent) {
	t.Helper()
	c := harness.StartDev(t, harness.DevConfig{
		Binary: requireBinary(t),
		Ports:  newPorts(t),
	})
	return c, waitLeader(t, c, clusterStartTimeout)
}

// waitLeader waits up to d for the running servers to agree on a leader.
func waitLeader(t *testing.T, c *harness.Cluster, d time.Duration) *harness.Agent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	start := time.Now()
	l, err := c.WaitForLeader(ctx)
	if err != nil {
		t.Fatalf("waiting %s for a leader: %v", d, err)
	}
	t.Logf("leader %s (%s) after %s", l.Node(), l.ServerAddr(), time.Since(start).Round(time.Millisecond))
	return l
}

// scenarioContext bounds one scenario.
func scenarioContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), scenarioTimeout)
	t.Cleanup(cancel)
	return ctx
}

// eventually retries check every 100 ms until it returns nil or d passes,
// then fails the test with the last error.
func eventually(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
