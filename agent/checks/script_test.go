package checks

import (
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestScriptCheck runs real processes: the exit status decides the
// status (0 passing, 1 warning, others critical), stdout and stderr are
// the output, kept to its last OutputMaxSize bytes with Consul's note, and
// a run past its timeout is killed and critical.
func TestScriptCheck(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		timeout    time.Duration
		maxOut     int
		wantStatus string
		wantOutput string // exact when set
		contains   []string
	}{
		{name: "exit 0", args: []string{"sh", "-c", "echo fine"}, wantStatus: structs.HealthPassing, wantOutput: "fine\n"},
		{name: "exit 1", args: []string{"sh", "-c", "echo degraded >&2; exit 1"}, wantStatus: structs.HealthWarning, wantOutput: "degraded\n"},
		{name: "exit 2", args: []string{"sh", "-c", "echo down; exit 2"}, wantStatus: structs.HealthCritical, wantOutput: "down\n"},
		{name: "killed by a signal", args: []string{"sh", "-c", "kill -9 $$"}, wantStatus: structs.HealthCritical},
		{name: "no such command", args: []string{"/nonexistent/trellis-check"}, wantStatus: structs.HealthCritical,
			contains: []string{"Failed to run check", "/nonexistent/trellis-check"}},
		{name: "timeout", args: []string{"sleep", "30"}, timeout: 200 * time.Millisecond, wantStatus: structs.HealthCritical,
			wantOutput: "Timed out (200ms) running check"},
		{name: "output truncated to its tail", args: []string{"sh", "-c", "printf 'aaaaaaaaaa'; printf 'bbbbb'"}, maxOut: 8,
			wantStatus: structs.HealthPassing, wantOutput: "Captured 8 of 15 bytes\n...\naaabbbbb"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			c := NewScriptCheck(ScriptCheckConfig{CheckID: "s", Args: tc.args, Interval: testInterval,
				Timeout: tc.timeout, OutputMaxSize: tc.maxOut, Notifier: rec})
			c.Start()
			defer c.Stop()
			u := rec.waitFor(t, "s", "a result", func(update) bool { return true })
			if u.status != tc.wantStatus {
				t.Fatalf("status %q (output %q), want %q", u.status, u.output, tc.wantStatus)
			}
			if tc.wantOutput != "" && u.output != tc.wantOutput {
				t.Fatalf("output %q, want %q", u.output, tc.wantOutput)
			}
			for _, s := range tc.contains {
				if !strings.Contains(u.output, s) {
					t.Fatalf("output %q lacks %q", u.output, s)
				}
			}
		})
	}
}

// TestDockerCheckWithoutDocker: a docker check on an agent whose PATH has
// no docker CLI is critical and says why.
func TestDockerCheckWithoutDocker(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	rec := newRecorder()
	c := NewScriptCheck(ScriptCheckConfig{CheckID: "d", Args: []string{"/bin/true"}, DockerContainerID: "f972c95ebf0e",
		Interval: testInterval, Notifier: rec})
	c.Start()
	defer c.Stop()
	u := rec.waitStatus(t, "d", structs.HealthCritical)
	if !strings.Contains(u.output, "docker CLI is not on the agent's PATH") {
		t.Fatalf("output %q", u.output)
	}
}
