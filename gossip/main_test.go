package gossip

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: Shutdown
// must stop the event loop and RetryJoin's goroutine. memberlist's Shutdown
// does not wait for a probe it has in flight (its timer goroutine); that one
// ends by itself within the probe timeout, so it is not counted.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/hashicorp/memberlist.(*Memberlist).triggerFunc"))
}
