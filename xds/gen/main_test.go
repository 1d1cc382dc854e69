package gen

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (the
// proxycfg managers and fake data sources the tests start).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
