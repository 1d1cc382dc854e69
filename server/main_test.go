package server

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine running: every
// server goroutine (the leader loop's, the read lease's, Raft's) must stop
// with Shutdown. memberlist's Shutdown does not wait for a probe it has in
// flight (its timer goroutine); that one ends by itself within the probe
// timeout, so it is not counted.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).triggerFunc"))
}
