//go:build !linux

package harness

import (
	"errors"
	"os"
	"os/exec"
)

// setSysProcAttr has no portable parent-death signal outside Linux; there the
// harness relies on t.Cleanup alone.
func setSysProcAttr(*exec.Cmd) {}

// pauseSignals: Pause and Resume are only supported where the harness
// tests run (Linux).
func pauseSignals() (stop, cont os.Signal, err error) {
	return nil, nil, errors.ErrUnsupported
}
