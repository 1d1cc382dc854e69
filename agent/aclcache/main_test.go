package aclcache

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine running: the
// cache's background refreshes must end with Close, and the servers the
// tests start with their Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
