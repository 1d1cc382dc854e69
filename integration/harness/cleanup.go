package harness

import (
	"errors"
	"strings"
	"testing"
)

// FailureLogLines is how many trailing log lines per process a failed test
// prints.
const FailureLogLines = 200

// cleanupAgents kills every agent (by PID) and, if the test failed, prints a
// report and the tail of each log. It runs from t.Cleanup, after the test
// body, so the logs are complete.
func cleanupAgents(t testing.TB, agents []*Agent) {
	states := make([]string, len(agents))
	for i, a := range agents {
		states[i] = processState(a.Process)
	}
	for _, a := range agents {
		if err := a.Kill(); err != nil && !errors.Is(err, ErrNotStarted) {
			t.Errorf("harness cleanup: %v", err)
		}
	}
	if !t.Failed() {
		return
	}
	for i, a := range agents {
		t.Logf("%s", failureReport(a.Process, states[i], FailureLogLines))
	}
}

// processState describes a process before cleanup touched it, so the report
// tells a crash apart from a process the cleanup killed.
func processState(p *Process) string {
	switch {
	case p.Starts() == 0:
		return "never started"
	case p.Paused():
		return "paused by the test (killed by cleanup)"
	case p.Running():
		return "running (killed by cleanup)"
	case p.UnexpectedExit() != nil:
		return "CRASHED: " + exitDescription(p.ExitError())
	default:
		return "stopped by the test: " + exitDescription(p.ExitError())
	}
}

// failureReport formats one process's state and log tail.
func failureReport(p *Process, state string, lines int) string {
	var b strings.Builder
	b.WriteString("---- ")
	b.WriteString(p.Name())
	b.WriteString(" [")
	b.WriteString(state)
	b.WriteString("] log ")
	b.WriteString(p.LogPath())
	b.WriteString(" (last lines) ----\n")
	tail, err := p.LogTail(lines)
	if err != nil {
		b.WriteString(err.Error())
		b.WriteString("\n")
	} else {
		b.WriteString(tail)
	}
	b.WriteString("---- end of ")
	b.WriteString(p.Name())
	b.WriteString(" ----")
	return b.String()
}
