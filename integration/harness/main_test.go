package harness

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv, when set in the environment, turns the test binary into one of
// the child programs of fake_agent_test.go instead of running tests. The
// harness tests re-execute themselves this way, so the process mechanics are
// tested on real processes without the trellis binary.
const childEnv = "TRELLIS_HARNESS_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode, os.Args[1:]))
	}
	// Every waiter goroutine the harness starts must end once the processes
	// are killed; goleak fails the package run if one survives.
	goleak.VerifyTestMain(m)
}

// selfAndPorts returns this test binary, which runs as a fake agent under
// childEnv, and a fresh port allocator.
func selfAndPorts(t *testing.T) (string, *PortAllocator) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ports, err := NewPortAllocator(PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return self, ports
}
