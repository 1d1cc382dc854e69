package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

const lockHelp = `
Usage: trellis lock [options] prefix child...

  Acquires a lock or semaphore at the KV prefix, runs the child while it is
  held and releases it when the child exits. With -n 1 (the default) the
  lock is the key prefix/.lock; with -n N > 1 it is a semaphore of N
  holders under the prefix, and every holder must use the same -n. The
  child sees CONSUL_LOCK_HELD=true; it is terminated if the lock is lost or
  the command is interrupted.`

const (
	// lockKey is where a single-holder lock lives under the prefix.
	lockKey = ".lock"
	// lockMonitorRetryTime spaces the retries of -monitor-retry.
	lockMonitorRetryTime = time.Second
	// lockKillGrace is how long a child has after SIGTERM before SIGKILL.
	lockKillGrace = 5 * time.Second
)

// lockOps is a lock or a semaphore, as api.Lock and api.Semaphore share
// no interface.
type lockOps struct {
	lock    func(stop <-chan struct{}) (<-chan struct{}, error)
	unlock  func() error
	destroy func() error
	// inUse is the error destroy returns while others still hold it.
	inUse error
}

type lockFlags struct {
	limit, monitorRetry    int
	name                   string
	timeout                time.Duration
	passStdin, shell       bool
	verbose, childExitCode bool
}

func runLock(args []string, env *Env) int {
	var hf httpFlags
	var f lockFlags
	fs := newFlagSet("lock", lockHelp, env.Stderr)
	fs.IntVar(&f.limit, "n", 1, "Optional limit on the number of concurrent lock holders.")
	fs.StringVar(&f.name, "name", "", "Optional name to associate with the lock session.")
	fs.DurationVar(&f.timeout, "timeout", 0, "Maximum amount of time to wait to acquire the lock; 0 waits forever.")
	fs.DurationVar(&f.timeout, "try", 0, "DEPRECATED: use -timeout.")
	fs.IntVar(&f.monitorRetry, "monitor-retry", 3, "Number of times to retry if the agent answers 500 while monitoring the lock.")
	fs.BoolVar(&f.passStdin, "pass-stdin", false, "Pass stdin to the child process.")
	fs.BoolVar(&f.shell, "shell", true, "Use a shell to run the command.")
	fs.BoolVar(&f.verbose, "verbose", false, "Enable verbose (debugging) output.")
	fs.BoolVar(&f.childExitCode, "child-exit-code", false, "Exit 2 if the child process exited with an error.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fmt.Fprintln(env.Stderr, "Key prefix and child command must be specified")
		return 1
	}
	prefix := strings.TrimPrefix(rest[0], "/")
	child := rest[1:]
	if f.limit < 1 {
		fmt.Fprintln(env.Stderr, "Lock holder limit must be positive")
		return 1
	}
	if f.timeout < 0 {
		fmt.Fprintln(env.Stderr, "Timeout must be positive")
		return 1
	}
	if f.monitorRetry < 0 {
		fmt.Fprintln(env.Stderr, "Number for 'monitor-retry' must be >= 0")
		return 1
	}
	if f.name == "" {
		f.name = fmt.Sprintf("Consul lock for '%s' at '%s'", strings.Join(child, " "), prefix)
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	client, err := api.NewClient(&api.Config{
		Address: c.base.Host, Scheme: c.base.Scheme, HttpClient: c.http, Token: c.token, Datacenter: c.dc,
	})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return 1
	}
	verbose := func(format string, a ...any) {
		if f.verbose {
			fmt.Fprintf(env.Stdout, format+"\n", a...)
		}
	}
	ops, err := newLockOps(client, prefix, f)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Lock setup failed: %s\n", err)
		return 1
	}
	if f.limit == 1 {
		verbose("Setting up lock at path: %s", path.Join(prefix, lockKey))
	} else {
		verbose("Setting up semaphore (limit %d) at prefix: %s", f.limit, prefix)
	}

	// A signal cancels ctx: it ends the acquisition and the child.
	ctx, release := interruptContext(env)
	defer release()
	// -timeout is LockTryOnce with the api client's own wait; ctx only
	// lets a signal end the wait early.
	verbose("Attempting lock acquisition")
	lost, err := ops.lock(ctx.Done())
	if err != nil {
		fmt.Fprintf(env.Stderr, "Lock acquisition failed: %s\n", err)
		return 1
	}
	if lost == nil {
		fmt.Fprintln(env.Stderr, "Shutdown triggered or timeout during lock acquisition")
		return 1
	}
	childErr := runLockChild(ctx, lost, child, f, env, verbose)
	if err := ops.unlock(); err != nil {
		fmt.Fprintf(env.Stderr, "Lock release failed: %s\n", err)
		return 1
	}
	if err := ops.destroy(); err != nil && !errors.Is(err, ops.inUse) {
		verbose("Cleanup failed: %s", err)
	} else {
		verbose("Cleanup succeeded")
	}
	if childErr != nil && f.childExitCode {
		return 2
	}
	return 0
}

func newLockOps(client *api.Client, prefix string, f lockFlags) (lockOps, error) {
	if f.limit == 1 {
		l, err := client.LockOpts(&api.LockOptions{
			Key: path.Join(prefix, lockKey), SessionName: f.name,
			MonitorRetries: f.monitorRetry, MonitorRetryTime: lockMonitorRetryTime,
			LockTryOnce: f.timeout > 0, LockWaitTime: f.timeout,
		})
		if err != nil {
			return lockOps{}, err
		}
		return lockOps{lock: l.Lock, unlock: l.Unlock, destroy: l.Destroy, inUse: api.ErrLockInUse}, nil
	}
	s, err := client.SemaphoreOpts(&api.SemaphoreOptions{
		Prefix: prefix, Limit: f.limit, SessionName: f.name,
		MonitorRetries: f.monitorRetry, MonitorRetryTime: lockMonitorRetryTime,
		SemaphoreTryOnce: f.timeout > 0, SemaphoreWaitTime: f.timeout,
	})
	if err != nil {
		return lockOps{}, err
	}
	return lockOps{lock: s.Acquire, unlock: s.Release, destroy: s.Destroy, inUse: api.ErrSemaphoreInUse}, nil
}

// runLockChild runs the child until it exits, the lock is lost or ctx
// ends; in the last two cases the child's process group gets SIGTERM, and
// the child SIGKILL after lockKillGrace.
func runLockChild(ctx context.Context, lost <-chan struct{}, child []string, f lockFlags, env *Env, verbose func(string, ...any)) error {
	childCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cmd *exec.Cmd
	if f.shell {
		cmd = exec.CommandContext(childCtx, "/bin/sh", "-c", strings.Join(child, " ")) //nolint:gosec // the child is the command the user asked lock to run
	} else {
		cmd = exec.CommandContext(childCtx, child[0], child[1:]...) //nolint:gosec // as above
	}
	cmd.Env = append(os.Environ(), "CONSUL_LOCK_HELD=true")
	cmd.Stdout, cmd.Stderr = env.Stdout, env.Stderr
	if f.passStdin {
		cmd.Stdin = env.Stdin
	}
	inOwnProcessGroup(cmd)
	cmd.WaitDelay = lockKillGrace
	verbose("Starting handler")
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(env.Stderr, "Error running handler: %s\n", err)
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error running handler: %s\n", err)
		}
		return err
	case <-lost:
		fmt.Fprintln(env.Stderr, "Lock lost, killing child")
	case <-ctx.Done():
		verbose("Shutdown triggered, killing child")
	}
	cancel()
	err := <-done
	if err == nil {
		err = errors.New("child terminated")
	}
	return err
}
