package harness

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childProcess prepares the test binary as a fake agent serving HTTP on a
// free port; env adds knobs such as fakeIgnoreSIGINTEnv.
func childProcess(t *testing.T, stopTimeout time.Duration, env ...string) *Process {
	t.Helper()
	self, ports := selfAndPorts(t)
	ap, err := AllocateAgentPorts(ports)
	if err != nil {
		t.Fatal(err)
	}
	cfg := AgentConfig{Mode: ModeDev, Node: "child", Ports: ap}
	p, err := NewProcess(ProcessConfig{
		Name:        "child",
		Path:        self,
		Args:        cfg.Args(),
		Env:         append([]string{childEnv + "=" + childFakeAgent}, env...),
		LogPath:     filepath.Join(t.TempDir(), "child.log"),
		StopTimeout: stopTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil && !errors.Is(err, ErrNotStarted) {
			t.Error(err)
		}
	})
	return p
}

func waitDone(t *testing.T, p *Process, d time.Duration) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s", p.Name(), d)
	}
}

func TestProcessKillRestartStop(t *testing.T) {
	p := childProcess(t, 0)
	if p.Running() || p.PID() != 0 {
		t.Fatalf("fresh process: Running=%v PID=%d", p.Running(), p.PID())
	}
	if err := p.Kill(); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Kill before start = %v, want ErrNotStarted", err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLogCount(t, p, fakeConfigPrefix, 1)
	pid1 := p.PID()
	if !p.Running() || pid1 == 0 {
		t.Fatalf("after Start: Running=%v PID=%d", p.Running(), pid1)
	}
	if err := p.Start(); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Start = %v, want ErrRunning", err)
	}

	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("running after Kill")
	}
	var exitErr *exec.ExitError
	if err := p.ExitError(); !errors.As(err, &exitErr) || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("ExitError after Kill = %v, want signal: killed", err)
	}
	if err := p.UnexpectedExit(); err != nil {
		t.Fatalf("UnexpectedExit after Kill = %v, want nil", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill of an exited process = %v, want nil", err)
	}

	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	// Signals sent before the child installed its handlers would take the
	// default action; wait until it is up, as a test waits for an agent.
	waitForLogCount(t, p, fakeConfigPrefix, 2)
	if !p.Running() || p.PID() == pid1 || p.Starts() != 2 {
		t.Fatalf("after Restart: Running=%v PID=%d (was %d) Starts=%d", p.Running(), p.PID(), pid1, p.Starts())
	}
	// Restart of a running process stops it (SIGINT) first.
	pid2 := p.PID()
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if p.PID() == pid2 || p.Starts() != 3 {
		t.Fatalf("Restart while running: PID %d (was %d) Starts=%d", p.PID(), pid2, p.Starts())
	}
	waitForLogCount(t, p, fakeConfigPrefix, 3)

	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %s for a child that exits on SIGINT", d)
	}
	if err := p.ExitError(); err != nil {
		t.Errorf("ExitError after graceful Stop = %v, want nil (exit 0)", err)
	}

	logs, err := p.Logs()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"start #1 of child", "start #2 of child", "start #3 of child", fakeInterruptLine, "exited: signal: killed", "exited: exit status 0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, fakeConfigPrefix); n != 3 {
		t.Errorf("log has %d config lines, want 3 (one per start)", n)
	}
}

func TestProcessStopFallsBackToKill(t *testing.T) {
	p := childProcess(t, 300*time.Millisecond, fakeIgnoreSIGINTEnv+"=1")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	// Give the child time to install its SIGINT disposition; before that
	// the default action would end it at once and hide the fallback.
	waitForLogCount(t, p, fakeConfigPrefix, 1)
	time.Sleep(200 * time.Millisecond)
	err := p.Stop()
	if !errors.Is(err, ErrStopTimeout) {
		t.Fatalf("Stop = %v, want ErrStopTimeout", err)
	}
	if p.Running() {
		t.Fatal("still running after Stop fell back to SIGKILL")
	}
}

func TestProcessUnexpectedExit(t *testing.T) {
	p := childProcess(t, 0, fakeCrashNodeEnv+"=child")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p, 10*time.Second)
	if err := p.UnexpectedExit(); !errors.Is(err, ErrUnexpectedExit) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("UnexpectedExit = %v, want ErrUnexpectedExit with exit status 3", err)
	}
	tail, err := p.LogTail(2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tail, "crashing as asked") || !strings.Contains(tail, "exit status 3") {
		t.Fatalf("LogTail(2) = %q", tail)
	}
}

func TestNewProcessValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  ProcessConfig
	}{
		{"no path", ProcessConfig{LogPath: "x.log"}},
		{"no log", ProcessConfig{Path: "/bin/true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewProcess(tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := StartProcess(ProcessConfig{Path: filepath.Join(t.TempDir(), "missing"), LogPath: filepath.Join(t.TempDir(), "l")}); err == nil {
		t.Fatal("StartProcess of a missing executable succeeded")
	}
}

func TestTailLines(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc\n"},
		{"a\nb\n", 5, "a\nb\n"},
		{"a\nb\n", 0, ""},
	}
	for _, tt := range tests {
		if got := tailLines(tt.in, tt.n); got != tt.want {
			t.Errorf("tailLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// waitForLogCount polls the process log until it contains s n times.
func waitForLogCount(t *testing.T, p *Process, s string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if logs, _ := p.Logs(); strings.Count(logs, s) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs, _ := p.Logs()
	t.Fatalf("log of %s never contained %q %d times:\n%s", p.Name(), s, n, logs)
}

func TestProcessPauseResume(t *testing.T) {
	p := childProcess(t, 0)
	if err := p.Pause(); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Pause before start = %v, want ErrNotStarted", err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLogCount(t, p, fakeConfigPrefix, 1)

	for range 2 { // the second Pause and Resume of a round are no-ops
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	waitProcState(t, p, true)
	if !p.Paused() || !p.Running() {
		t.Fatalf("after Pause: Paused=%v Running=%v", p.Paused(), p.Running())
	}
	for range 2 {
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	waitProcState(t, p, false)
	if p.Paused() {
		t.Fatal("Paused after Resume")
	}

	// Stop wakes a paused process, which then exits on SIGINT rather than
	// being killed after the stop timeout.
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	waitProcState(t, p, true)
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop of a paused process = %v", err)
	}
	if err := p.ExitError(); err != nil {
		t.Errorf("ExitError after Stop of a paused process = %v, want exit 0", err)
	}
	if err := p.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Pause after exit = %v, want ErrNotRunning", err)
	}

	// SIGKILL ends a stopped process without a SIGCONT.
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLogCount(t, p, fakeConfigPrefix, 2)
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	waitProcState(t, p, true)
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill of a paused process = %v", err)
	}
	if p.Running() || p.Paused() {
		t.Fatalf("after Kill: Running=%v Paused=%v", p.Running(), p.Paused())
	}
}

// waitProcState polls /proc/<pid>/stat until the process is stopped (state
// T) or not, as wanted; signal delivery is asynchronous.
func waitProcState(t *testing.T, p *Process, stopped bool) {
	t.Helper()
	path := filepath.Join("/proc", strconv.Itoa(p.PID()), "stat")
	var state string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// The state follows the command name, which is in parentheses.
		fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		state = fields[0]
		if (state == "T") == stopped {
			return
		}
	}
	t.Fatalf("%s (pid %d) in state %q, want stopped=%v", p.Name(), p.PID(), state, stopped)
}
