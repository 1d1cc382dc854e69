package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// DefaultStopTimeout is how long Stop waits after SIGINT before it falls back
// to SIGKILL. Consul's sdk/testutil expects an agent to exit within 10 s.
const DefaultStopTimeout = 10 * time.Second

// reapTimeout bounds the wait for a process after SIGKILL. SIGKILL cannot be
// ignored; the bound only keeps a test from hanging forever on a process stuck
// in uninterruptible I/O.
const reapTimeout = 30 * time.Second

// ProcessConfig describes a child process. Every start (the first and each
// restart) runs the same command line in the same directory.
type ProcessConfig struct {
	// Name labels the process in log headers and error messages.
	Name string
	// Path is the executable.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env is appended to the test process's environment.
	Env []string
	// Dir is the working directory; empty means the test's.
	Dir string
	// LogPath receives stdout and stderr. The file is appended to on every
	// start, after a header line, so a restarted process keeps its history.
	LogPath string
	// StopTimeout is how long Stop waits after SIGINT; 0 means
	// DefaultStopTimeout.
	StopTimeout time.Duration
}

// Process is a child process that can be killed, stopped and started again
// with the same command line. Each start is an "incarnation" with its own
// waiter goroutine, which ends when the child exits; Kill and Stop wait for
// it, so a test that kills every process it started leaks no goroutine.
//
// Methods are safe for concurrent use, but Start racing Kill or Stop on the
// same process gives no useful ordering: drive one process from one goroutine.
type Process struct {
	cfg ProcessConfig

	mu     sync.Mutex
	cur    *incarnation // nil before the first start
	starts int
}

// incarnation is one run of the child. err and state are written by the
// waiter goroutine before it closes done and are read only after done.
type incarnation struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// wanted is false once the harness asked the process to end (Kill or
	// Stop), so an exit is expected rather than a crash. Guarded by
	// Process.mu.
	wanted bool
	// paused is true between Pause and Resume. Guarded by Process.mu.
	paused bool
}

// StartProcess validates cfg and starts the process. The caller owns it:
// Kill or Stop it (from t.Cleanup) so the child and its waiter goroutine end.
func StartProcess(cfg ProcessConfig) (*Process, error) {
	p, err := NewProcess(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// NewProcess validates cfg and returns a process that has not started yet.
func NewProcess(cfg ProcessConfig) (*Process, error) {
	if cfg.Path == "" || cfg.LogPath == "" {
		return nil, fmt.Errorf("%w: process %q needs Path and LogPath", ErrInvalidConfig, cfg.Name)
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Path
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	cfg.Args = append([]string(nil), cfg.Args...)
	cfg.Env = append([]string(nil), cfg.Env...)
	return &Process{cfg: cfg}, nil
}

// Name returns the label given in the config.
func (p *Process) Name() string { return p.cfg.Name }

// Args returns a copy of the command-line arguments (without the program).
func (p *Process) Args() []string { return append([]string(nil), p.cfg.Args...) }

// LogPath returns the file that holds the process's stdout and stderr.
func (p *Process) LogPath() string { return p.cfg.LogPath }

// Starts returns how many times the process has been started.
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Start starts the process if it is not running. It returns ErrRunning if
// the current incarnation has not exited.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && !isClosed(p.cur.done) {
		return fmt.Errorf("%w: %s (pid %d)", ErrRunning, p.cfg.Name, p.cur.cmd.Process.Pid)
	}
	f, err := os.OpenFile(p.cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("harness: open log of %s: %w", p.cfg.Name, err)
	}
	// The child inherits the file descriptor itself, so no goroutine copies
	// output and our copy can be closed as soon as the child has it.
	defer func() { _ = f.Close() }()
	_, _ = fmt.Fprintf(f, "==== harness: start #%d of %s at %s: %s %s ====\n",
		p.starts+1, p.cfg.Name, time.Now().Format(time.RFC3339Nano), p.cfg.Path, strings.Join(p.cfg.Args, " "))

	cmd := exec.Command(p.cfg.Path, p.cfg.Args...)
	cmd.Dir = p.cfg.Dir
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	cmd.Stdout = f
	cmd.Stderr = f
	setSysProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness: start %s: %w", p.cfg.Name, err)
	}
	inc := &incarnation{cmd: cmd, done: make(chan struct{}), wanted: true}
	go func() {
		inc.err = cmd.Wait()
		p.appendLog(fmt.Sprintf("==== harness: %s (pid %d) exited: %s ====\n",
			p.cfg.Name, cmd.Process.Pid, exitDescription(inc.err)))
		close(inc.done)
	}()
	p.cur = inc
	p.starts++
	return nil
}

// PID returns the process id of the current (or last) incarnation, 0 if the
// process was never started.
func (p *Process) PID() int {
	inc := p.current()
	if inc == nil {
		return 0
	}
	return inc.cmd.Process.Pid
}

// Running reports whether the current incarnation has started and not exited.
func (p *Process) Running() bool {
	inc := p.current()
	return inc != nil && !isClosed(inc.done)
}

// Done returns a channel closed when the current incarnation exits. A
// process that was never started returns a closed channel.
func (p *Process) Done() <-chan struct{} {
	inc := p.current()
	if inc == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return inc.done
}

// ExitError returns cmd.Wait's error for the last incarnation: nil while it
// runs or if it exited with status 0, an *exec.ExitError otherwise.
func (p *Process) ExitError() error {
	inc := p.current()
	if inc == nil || !isClosed(inc.done) {
		return nil
	}
	return inc.err
}

// UnexpectedExit returns an error wrapping ErrUnexpectedExit if the current
// incarnation exited without Kill or Stop having been called, nil otherwise.
// Waiting loops use it to fail fast when a process crashed.
func (p *Process) UnexpectedExit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	inc := p.cur
	if inc == nil || !inc.wanted || !isClosed(inc.done) {
		return nil
	}
	return fmt.Errorf("%w: %s (pid %d): %s", ErrUnexpectedExit, p.cfg.Name, inc.cmd.Process.Pid, exitDescription(inc.err))
}

// Kill sends SIGKILL to the process (by PID) and waits until it is reaped.
// Killing a process that already exited is not an error.
func (p *Process) Kill() error {
	inc, err := p.release()
	if err != nil {
		return err
	}
	return p.killAndReap(inc)
}

// Stop sends SIGINT and waits up to the stop timeout for the process to
// exit; if it does not, it is killed with SIGKILL and Stop returns an error
// wrapping ErrStopTimeout. Any exit status after SIGINT counts as stopped;
// ExitError tells which one it was. A SIGINT that arrives before the program
// installed its handler takes the default action (exit by signal), so stop a
// process only once it is up (WaitForLeader, a log line).
func (p *Process) Stop() error {
	inc, err := p.release()
	if err != nil {
		return err
	}
	if isClosed(inc.done) {
		return nil
	}
	// A stopped process would hold SIGINT pending until the stop timeout
	// and then be killed, so it is woken first and can shut down cleanly.
	if err := p.resume(inc); err != nil {
		return err
	}
	if err := inc.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: interrupt %s: %w", p.cfg.Name, err)
	}
	timer := time.NewTimer(p.cfg.StopTimeout)
	defer timer.Stop()
	select {
	case <-inc.done:
		return nil
	case <-timer.C:
	}
	if err := p.killAndReap(inc); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s within %s; killed", ErrStopTimeout, p.cfg.Name, p.cfg.StopTimeout)
}

// Restart stops the process if it is running (as Stop does; a Stop error
// aborts the restart) and starts it again with the same command line, so an
// agent comes back with the same flags, ports and data dir.
func (p *Process) Restart() error {
	if p.Running() {
		if err := p.Stop(); err != nil {
			return err
		}
	}
	return p.Start()
}

// Pause sends SIGSTOP to the current incarnation: it keeps its sockets and
// memory but runs no code, as a machine frozen by a long GC pause or a VM
// migration. Peers see it stop answering, not go away; connections to it
// stay open and requests queue up until Resume (SIGCONT). Pausing a paused
// process is a no-op. Kill ends a paused process too (SIGKILL needs no
// SIGCONT), and Stop resumes it before its SIGINT, so the t.Cleanup of
// StartCluster, which kills by PID, never leaves a stopped process behind.
func (p *Process) Pause() error {
	stop, _, err := pauseSignals()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	inc := p.cur
	if inc == nil {
		return fmt.Errorf("%w: %s", ErrNotStarted, p.cfg.Name)
	}
	if inc.paused {
		return nil
	}
	if isClosed(inc.done) {
		return fmt.Errorf("%w: pause %s (pid %d)", ErrNotRunning, p.cfg.Name, inc.cmd.Process.Pid)
	}
	if err := inc.cmd.Process.Signal(stop); err != nil {
		return fmt.Errorf("harness: pause %s: %w", p.cfg.Name, err)
	}
	inc.paused = true
	return nil
}

// Resume sends SIGCONT to a process paused by Pause. Resuming a process that
// is not paused, or that exited, is a no-op.
func (p *Process) Resume() error {
	inc := p.current()
	if inc == nil {
		return fmt.Errorf("%w: %s", ErrNotStarted, p.cfg.Name)
	}
	return p.resume(inc)
}

// Paused reports whether the current incarnation is paused.
func (p *Process) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil && p.cur.paused && !isClosed(p.cur.done)
}

func (p *Process) resume(inc *incarnation) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !inc.paused {
		return nil
	}
	inc.paused = false
	if isClosed(inc.done) {
		return nil
	}
	_, cont, err := pauseSignals()
	if err != nil {
		return err
	}
	if err := inc.cmd.Process.Signal(cont); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: resume %s: %w", p.cfg.Name, err)
	}
	return nil
}

// Logs returns everything the process wrote so far, across all starts.
func (p *Process) Logs() (string, error) {
	b, err := os.ReadFile(p.cfg.LogPath)
	if err != nil {
		return "", fmt.Errorf("harness: read log of %s: %w", p.cfg.Name, err)
	}
	return string(b), nil
}

// LogTail returns the last n lines of the log.
func (p *Process) LogTail(n int) (string, error) {
	s, err := p.Logs()
	if err != nil {
		return "", err
	}
	return tailLines(s, n), nil
}

// current returns the current incarnation under the lock.
func (p *Process) current() *incarnation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// release marks the current incarnation's exit as expected and returns it.
func (p *Process) release() (*incarnation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return nil, fmt.Errorf("%w: %s", ErrNotStarted, p.cfg.Name)
	}
	p.cur.wanted = false
	return p.cur, nil
}

func (p *Process) killAndReap(inc *incarnation) error {
	if isClosed(inc.done) {
		return nil
	}
	if err := inc.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("harness: kill %s: %w", p.cfg.Name, err)
	}
	timer := time.NewTimer(reapTimeout)
	defer timer.Stop()
	select {
	case <-inc.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("%w: %s (pid %d)", ErrWaitTimeout, p.cfg.Name, inc.cmd.Process.Pid)
	}
}

// appendLog adds a harness line to the process log; failures are ignored
// because the log is diagnostic only.
func (p *Process) appendLog(line string) {
	f, err := os.OpenFile(p.cfg.LogPath, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	_, _ = f.WriteString(line)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func exitDescription(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// tailLines returns the last n lines of s (all of s if it has fewer).
func tailLines(s string, n int) string {
	if n <= 0 {
		return ""
	}
	trimmed := strings.TrimSuffix(s, "\n")
	if trimmed == "" {
		return ""
	}
	lines := strings.Split(trimmed, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
