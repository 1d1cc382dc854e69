package server

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running: every
// server goroutine (the leader loop's, the read lease's, Raft's) must stop
// with Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
