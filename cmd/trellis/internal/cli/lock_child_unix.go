//go:build unix

package cli

import (
	"os/exec"
	"syscall"
)

// inOwnProcessGroup makes the child lead a process group and its Cancel
// send SIGTERM to the whole group: a shell's own children (sh -c "sleep
// 60") end with it instead of outliving the lock and holding its output
// open.
func inOwnProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
}
