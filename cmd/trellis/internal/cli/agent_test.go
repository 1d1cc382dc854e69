package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/agent/config"
)

// fakeRunner records the agent lifecycle calls the command makes.
type fakeRunner struct {
	mu    sync.Mutex
	calls []string
	rc    *config.RuntimeConfig

	startErr   error
	startBlock bool          // Start waits for its context to end
	leaveBlock chan struct{} // Leave waits for this (or its context) when set
	started    chan struct{}
	failed     chan struct{} // Failed; nil: never fails
	// reloaded is the configuration of the last ReloadConfig.
	reloaded *config.RuntimeConfig
}

func (f *fakeRunner) ReloadConfig(rc *config.RuntimeConfig) error {
	f.record("reload")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloaded = rc
	return nil
}

// failedRunner is an agent whose server failed as soon as it ran.
func failedRunner() *fakeRunner {
	f := &fakeRunner{failed: make(chan struct{})}
	close(f.failed)
	return f
}

func (f *fakeRunner) Failed() <-chan struct{} { return f.failed }

func (f *fakeRunner) Failure() error {
	if f.failed == nil {
		return nil
	}
	return errors.New("raft log write failed: no space left on device")
}

func (f *fakeRunner) record(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeRunner) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeRunner) Start(ctx context.Context) error {
	f.record("start")
	close(f.started)
	if f.startBlock {
		<-ctx.Done()
		return ctx.Err()
	}
	return f.startErr
}

func (f *fakeRunner) Leave(ctx context.Context) error {
	f.record("leave")
	if f.leaveBlock != nil {
		select {
		case <-f.leaveBlock:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (f *fakeRunner) Shutdown() error {
	f.record("shutdown")
	return nil
}

// agentRun starts the agent command in the background and returns a way
// to send signals and to wait for the exit code.
type agentRun struct {
	sigs   chan os.Signal
	done   chan int
	stderr *syncBuffer
	runner *fakeRunner
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startAgentCmd(t *testing.T, cmd agentCommand, args []string, runner *fakeRunner) *agentRun {
	t.Helper()
	r := &agentRun{sigs: make(chan os.Signal, 4), done: make(chan int, 1), stderr: &syncBuffer{}, runner: runner}
	runner.started = make(chan struct{})
	env := &Env{
		Stdout: &bytes.Buffer{}, Stderr: r.stderr,
		Getenv: func(string) string { return "" },
		NewAgent: func(rc *config.RuntimeConfig, _ *slog.Logger, _ func() error) (Agent, error) {
			runner.rc = rc
			return runner, nil
		},
		Signals: func() (<-chan os.Signal, func()) { return r.sigs, func() {} },
	}
	go func() { r.done <- cmd.run(args, env) }()
	t.Cleanup(func() {
		if runner.leaveBlock != nil {
			select {
			case <-runner.leaveBlock:
			default:
				close(runner.leaveBlock)
			}
		}
	})
	return r
}

func (r *agentRun) waitStarted(t *testing.T) {
	t.Helper()
	// Started first: an agent that fails at once has both started and
	// exited by the time this looks.
	select {
	case <-r.runner.started:
		return
	default:
	}
	select {
	case <-r.runner.started:
	case code := <-r.done:
		t.Fatalf("agent command exited with %d before starting: %s", code, r.stderr)
	case <-time.After(5 * time.Second):
		t.Fatal("agent did not start")
	}
}

// waitRunning waits until the command reports the agent running, so that
// a signal sent next is handled as a signal to a running agent.
func (r *agentRun) waitRunning(t *testing.T) {
	t.Helper()
	r.waitStarted(t)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(r.stderr.String(), "Trellis agent running") {
		if time.Now().After(deadline) {
			t.Fatalf("agent not running: %s", r.stderr)
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *agentRun) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case code := <-r.done:
		return code
	case <-time.After(within):
		t.Fatalf("agent command did not exit within %s: %s", within, r.stderr)
		return -1
	}
}

func devArgs(t *testing.T, extra ...string) []string {
	return append([]string{"-dev", "-node", "test-node"}, extra...)
}

// leavingDevArgs is a -dev server configured to leave on both signals
// (servers do not by default, as in Consul).
func leavingDevArgs(t *testing.T) []string {
	cfgFile := filepath.Join(t.TempDir(), "leave.json")
	if err := os.WriteFile(cfgFile, []byte(`{"skip_leave_on_interrupt": false, "leave_on_terminate": true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return devArgs(t, "-config-file", cfgFile)
}

func TestAgentSignals(t *testing.T) {
	fast := agentCommand{leaveTimeout: time.Second, shutdownDeadline: 2 * time.Second}
	for _, tc := range []struct {
		name    string
		args    []string
		signals []os.Signal
		runner  *fakeRunner
		code    int
		calls   []string
	}{
		{"a server keeps its seat on SIGINT by default", devArgs(t), []os.Signal{syscall.SIGINT}, &fakeRunner{}, 0,
			[]string{"start", "shutdown"}},
		{"a server keeps its seat on SIGTERM by default", devArgs(t), []os.Signal{syscall.SIGTERM}, &fakeRunner{}, 0,
			[]string{"start", "shutdown"}},
		{"SIGINT leaves when configured", leavingDevArgs(t), []os.Signal{syscall.SIGINT}, &fakeRunner{}, 0,
			[]string{"start", "leave", "shutdown"}},
		{"SIGTERM leaves when configured", leavingDevArgs(t), []os.Signal{syscall.SIGTERM}, &fakeRunner{}, 0,
			[]string{"start", "leave", "shutdown"}},
		{"SIGHUP reloads", leavingDevArgs(t), []os.Signal{syscall.SIGHUP, syscall.SIGTERM}, &fakeRunner{}, 0,
			[]string{"start", "reload", "leave", "shutdown"}},
		{"leave timing out still shuts down", leavingDevArgs(t), []os.Signal{syscall.SIGINT},
			&fakeRunner{leaveBlock: make(chan struct{})}, 1, []string{"start", "leave", "shutdown"}},
		{"a failed agent shuts down, keeps its seat and exits non-zero", leavingDevArgs(t), nil, failedRunner(), 1,
			[]string{"start", "shutdown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startAgentCmd(t, fast, tc.args, tc.runner)
			r.waitRunning(t)
			for _, s := range tc.signals {
				r.sigs <- s
			}
			if code := r.wait(t, 5*time.Second); code != tc.code {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.code, r.stderr)
			}
			if got := tc.runner.Calls(); strings.Join(got, ",") != strings.Join(tc.calls, ",") {
				t.Errorf("calls %v, want %v", got, tc.calls)
			}
			if err := tc.runner.Failure(); err != nil && !strings.Contains(r.stderr.String(), err.Error()) {
				t.Errorf("the failure is not in the log:\n%s", r.stderr)
			}
		})
	}
}

func TestAgentSkipLeave(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "c.json")
	if err := os.WriteFile(cfgFile, []byte(`{"skip_leave_on_interrupt": true, "leave_on_terminate": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			runner := &fakeRunner{}
			r := startAgentCmd(t, agentCommand{leaveTimeout: time.Second, shutdownDeadline: 2 * time.Second},
				devArgs(t, "-config-file", cfgFile), runner)
			r.waitRunning(t)
			r.sigs <- sig
			if code := r.wait(t, 5*time.Second); code != 0 {
				t.Fatalf("exit code %d: %s", code, r.stderr)
			}
			if got := strings.Join(runner.Calls(), ","); got != "start,shutdown" {
				t.Fatalf("calls %s, want start,shutdown", got)
			}
		})
	}
}

// TestAgentExitsPromptly: whatever the agent does, SIGINT ends the process
// within the deadline (sdk/testutil allows 10 s), and a second signal ends
// it at once.
func TestAgentExitsPromptly(t *testing.T) {
	t.Run("deadline", func(t *testing.T) {
		runner := &fakeRunner{leaveBlock: make(chan struct{})}
		r := startAgentCmd(t, agentCommand{leaveTimeout: time.Hour, shutdownDeadline: 300 * time.Millisecond}, leavingDevArgs(t), runner)
		r.waitRunning(t)
		begin := time.Now()
		r.sigs <- syscall.SIGINT
		if code := r.wait(t, 5*time.Second); code != 1 {
			t.Fatalf("exit code %d", code)
		}
		if d := time.Since(begin); d > 2*time.Second {
			t.Fatalf("took %s", d)
		}
		if !strings.Contains(r.stderr.String(), "did not stop in time") {
			t.Fatalf("stderr: %s", r.stderr)
		}
	})
	t.Run("second signal", func(t *testing.T) {
		runner := &fakeRunner{leaveBlock: make(chan struct{})}
		r := startAgentCmd(t, agentCommand{leaveTimeout: time.Hour, shutdownDeadline: time.Hour}, leavingDevArgs(t), runner)
		r.waitRunning(t)
		r.sigs <- syscall.SIGTERM
		time.Sleep(50 * time.Millisecond)
		r.sigs <- syscall.SIGINT
		if code := r.wait(t, 5*time.Second); code != 1 {
			t.Fatalf("exit code %d", code)
		}
	})
	t.Run("default deadline fits sdk/testutil", func(t *testing.T) {
		if defaultShutdownDeadline >= 10*time.Second || defaultLeaveTimeout >= defaultShutdownDeadline {
			t.Fatalf("leave %s, deadline %s", defaultLeaveTimeout, defaultShutdownDeadline)
		}
	})
}

func TestAgentStartFailures(t *testing.T) {
	t.Run("start error", func(t *testing.T) {
		runner := &fakeRunner{startErr: errors.New("port in use")}
		r := startAgentCmd(t, agentCommand{leaveTimeout: time.Second, shutdownDeadline: time.Second}, devArgs(t), runner)
		if code := r.wait(t, 5*time.Second); code != 1 {
			t.Fatalf("exit code %d", code)
		}
		if got := strings.Join(runner.Calls(), ","); got != "start,shutdown" {
			t.Fatalf("calls %s", got)
		}
		if !strings.Contains(r.stderr.String(), "port in use") {
			t.Fatalf("stderr: %s", r.stderr)
		}
	})
	t.Run("signal during start", func(t *testing.T) {
		runner := &fakeRunner{startBlock: true}
		r := startAgentCmd(t, agentCommand{leaveTimeout: time.Second, shutdownDeadline: 2 * time.Second}, devArgs(t), runner)
		r.waitStarted(t)
		r.sigs <- syscall.SIGINT
		if code := r.wait(t, 5*time.Second); code != 1 {
			t.Fatalf("exit code %d", code)
		}
		if got := strings.Join(runner.Calls(), ","); got != "start,shutdown" {
			t.Fatalf("calls %s (no leave for an agent that never ran)", got)
		}
	})
}

func TestAgentConfigHandling(t *testing.T) {
	t.Run("config passed through and warnings logged once", func(t *testing.T) {
		dir := t.TempDir()
		cfgFile := filepath.Join(dir, "c.json")
		if err := os.WriteFile(cfgFile, []byte(`{"ports": {"http": 18500, "https": 18501}, "telemetry": {"disable_hostname": true}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		runner := &fakeRunner{}
		r := startAgentCmd(t, agentCommand{leaveTimeout: time.Second, shutdownDeadline: time.Second},
			devArgs(t, "-config-file", cfgFile, "-log-level", "info"), runner)
		r.waitRunning(t)
		r.sigs <- syscall.SIGTERM
		if code := r.wait(t, 5*time.Second); code != 0 {
			t.Fatalf("exit %d: %s", code, r.stderr)
		}
		if runner.rc.Ports.HTTP != 18500 || runner.rc.NodeName != "test-node" || !runner.rc.DevMode {
			t.Fatalf("runtime config %+v", runner.rc)
		}
		out := r.stderr.String()
		if n := strings.Count(out, "not implemented by Trellis"); n != 1 {
			t.Fatalf("warning line appears %d times:\n%s", n, out)
		}
		if !strings.Contains(out, "have no effect: telemetry") || !strings.Contains(out, "ports.https is set but tls.https has no cert_file") || !strings.Contains(out, "level=WARN") {
			t.Fatalf("stderr:\n%s", out)
		}
	})
	t.Run("json logs", func(t *testing.T) {
		runner := &fakeRunner{}
		r := startAgentCmd(t, agentCommand{leaveTimeout: time.Second, shutdownDeadline: time.Second}, devArgs(t, "-log-json"), runner)
		r.waitRunning(t)
		r.sigs <- syscall.SIGINT
		r.wait(t, 5*time.Second)
		for _, line := range strings.Split(strings.TrimSpace(r.stderr.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("not a JSON log line: %q", line)
			}
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		code int
		has  string
	}{
		{"bad config", []string{"-server"}, 1, "data_dir cannot be empty"},
		{"bad flag", []string{"-nope"}, 1, "flag provided but not defined: -nope"},
		{"help", []string{"-h"}, 0, "Usage: trellis agent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			created := false
			env := &Env{Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" },
				NewAgent: func(*config.RuntimeConfig, *slog.Logger, func() error) (Agent, error) {
					created = true
					return nil, errors.New("unreachable")
				},
				Signals: func() (<-chan os.Signal, func()) { return make(chan os.Signal), func() {} },
			}
			if code := runAgent(tc.args, env); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			if created {
				t.Fatal("agent created despite the error")
			}
			if !strings.Contains(stderr.String(), tc.has) {
				t.Fatalf("stderr %q lacks %q", stderr.String(), tc.has)
			}
		})
	}
}

func TestNewLoggerTrace(t *testing.T) {
	var b bytes.Buffer
	l := NewLogger(&b, config.Logging{Level: "trace"})
	l.Log(context.Background(), config.LevelTrace, "deep")
	l.Debug("shallow")
	if !strings.Contains(b.String(), "level=TRACE msg=deep") || !strings.Contains(b.String(), "level=DEBUG msg=shallow") {
		t.Fatalf("log: %s", b.String())
	}
	b.Reset()
	NewLogger(&b, config.Logging{Level: "warn"}).Info("hidden")
	if b.Len() != 0 {
		t.Fatalf("info logged at warn: %s", b.String())
	}
}

// TestReloadRereadsFiles: a reload loads the files again from the same
// arguments, hands the new configuration to the agent and moves the log
// level; a configuration that no longer loads changes nothing.
func TestReloadRereadsFiles(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "c.hcl")
	write := func(content string) {
		if err := os.WriteFile(cfgFile, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`log_level = "info"` + "\n" + `service { name = "a" }`)
	args := devArgs(t, "-config-file", cfgFile)
	var out syncBuffer
	logger, level := newLeveledLogger(&out, config.Logging{Level: "info"})
	var got *config.RuntimeConfig
	reload := reloader(args, logger, level, func(rc *config.RuntimeConfig) error { got = rc; return nil })

	write(`log_level = "debug"` + "\n" + `service { name = "a" }` + "\n" + `service { name = "b" }`)
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	if got == nil || len(got.Services) != 2 || level.Level() != slog.LevelDebug {
		t.Fatalf("reloaded %+v, level %v", got, level.Level())
	}

	got = nil
	write(`log_level = "loud"`)
	if err := reload(); err == nil || !strings.Contains(err.Error(), "invalid log level") {
		t.Fatalf("reload of a bad file = %v", err)
	}
	if got != nil || level.Level() != slog.LevelDebug {
		t.Fatalf("a failed reload applied %+v, level %v", got, level.Level())
	}
}

// TestAgentPidFile: -pid-file and pid_file hold the process ID while the
// agent runs and are removed when it exits; a PID file that cannot be
// written stops the start, naming the key.
func TestAgentPidFile(t *testing.T) {
	fast := agentCommand{leaveTimeout: time.Second, shutdownDeadline: 2 * time.Second}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "pid.json")
	fromFile := filepath.Join(dir, "from-config.pid")
	if err := os.WriteFile(cfgFile, []byte(`{"pid_file": "`+fromFile+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		path string
	}{
		{"flag", devArgs(t, "-pid-file", filepath.Join(dir, "flag.pid")), filepath.Join(dir, "flag.pid")},
		{"config key", devArgs(t, "-config-file", cfgFile), fromFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startAgentCmd(t, fast, tc.args, &fakeRunner{})
			r.waitRunning(t)
			if got, err := os.ReadFile(tc.path); err != nil || string(got) != strconv.Itoa(os.Getpid()) {
				t.Fatalf("PID file holds %q (%v), want %d", got, err, os.Getpid())
			}
			r.sigs <- syscall.SIGTERM
			if code := r.wait(t, 5*time.Second); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, r.stderr)
			}
			if _, err := os.Stat(tc.path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("PID file left behind after exit: %v", err)
			}
		})
	}
	t.Run("unwritable", func(t *testing.T) {
		runner := &fakeRunner{}
		r := startAgentCmd(t, fast, devArgs(t, "-pid-file", filepath.Join(dir, "missing", "x.pid")), runner)
		if code := r.wait(t, 5*time.Second); code != 1 {
			t.Fatalf("exit code %d", code)
		}
		if len(runner.Calls()) != 0 || !strings.Contains(r.stderr.String(), "pid_file") {
			t.Fatalf("calls %v, stderr:\n%s", runner.Calls(), r.stderr)
		}
	})
}
