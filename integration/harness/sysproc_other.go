//go:build !linux

package harness

import "os/exec"

// setSysProcAttr has no portable parent-death signal outside Linux; there the
// harness relies on t.Cleanup alone.
func setSysProcAttr(*exec.Cmd) {}
