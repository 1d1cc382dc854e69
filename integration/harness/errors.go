package harness

import "errors"

// Sentinel errors; callers match them with errors.Is.
var (
	// ErrNoFreePort means the allocator found no port that is both unused by
	// this allocator and bindable for TCP and UDP on 127.0.0.1.
	ErrNoFreePort = errors.New("harness: no free port")
	// ErrInvalidConfig means a Config struct was missing a required field or
	// held an impossible value.
	ErrInvalidConfig = errors.New("harness: invalid config")
	// ErrBuild means `go build` of the binary failed; the error text carries
	// the compiler output.
	ErrBuild = errors.New("harness: build failed")
	// ErrNotStarted means a process operation was asked of a process that
	// has never been started.
	ErrNotStarted = errors.New("harness: process not started")
	// ErrRunning means Start was called on a process that is still running.
	ErrRunning = errors.New("harness: process already running")
	// ErrNotRunning means a process operation needs a running process and
	// the current incarnation has exited.
	ErrNotRunning = errors.New("harness: process not running")
	// ErrStopTimeout means a process did not exit within its stop timeout
	// after SIGINT and had to be killed with SIGKILL.
	ErrStopTimeout = errors.New("harness: process did not exit after SIGINT")
	// ErrWaitTimeout means a killed process was not reaped in time, which
	// only happens when the kernel cannot deliver SIGKILL (stuck in I/O).
	ErrWaitTimeout = errors.New("harness: process not reaped after SIGKILL")
	// ErrUnexpectedExit means a process the harness expected to be running
	// has exited on its own (a crash, a bad flag, a port already in use).
	ErrUnexpectedExit = errors.New("harness: process exited unexpectedly")
	// ErrNoLeader means the servers did not agree on a leader that is one of
	// the running servers before the context ended.
	ErrNoLeader = errors.New("harness: no agreed leader")
	// ErrHTTPStatus means an HTTP status endpoint answered something other
	// than 200.
	ErrHTTPStatus = errors.New("harness: unexpected HTTP status")
)
