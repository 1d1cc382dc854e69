package harness

import (
	"os"
	"os/exec"
	"syscall"
)

// setSysProcAttr makes the kernel SIGKILL the child when the test process
// dies (a panic, a `go test -timeout` abort, a kill of `go test`), so no
// server outlives its test holding ports. Pdeathsig fires when the OS thread
// that forked the child exits; the Go runtime only retires threads whose
// goroutine exited while locked to them, which harness callers never do.
func setSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// pauseSignals returns the signals that freeze and thaw a process.
func pauseSignals() (stop, cont os.Signal, err error) {
	return syscall.SIGSTOP, syscall.SIGCONT, nil
}
