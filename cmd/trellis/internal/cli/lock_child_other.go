//go:build !unix

package cli

import (
	"os"
	"os/exec"
)

// inOwnProcessGroup has no process groups to use here: Cancel kills the
// child itself.
func inOwnProcessGroup(cmd *exec.Cmd) {
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Kill) }
}
