package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/version"
)

// Agent is what `trellis agent` runs; *agent.Agent satisfies it.
type Agent interface {
	// Start brings the agent up and returns once it serves. Its context
	// is cancelled only if a signal arrives before Start returns, and
	// otherwise after Shutdown.
	Start(ctx context.Context) error
	// Leave gracefully leaves the cluster (Serf leave) within ctx.
	Leave(ctx context.Context) error
	// Shutdown stops everything and waits for it. It is also called after
	// Start failed or was interrupted, so it must cope with a partly
	// started agent.
	Shutdown() error
	// Failed, called once Start has returned, is closed if the agent can
	// no longer do its job (nil: it cannot fail so); the process then
	// shuts down and exits non-zero, naming Failure.
	Failed() <-chan struct{}
	// Failure is why the agent failed, once Failed is closed.
	Failure() error
	// ReloadConfig applies a configuration re-read from the same flags
	// and files: the services and checks of the config files.
	ReloadConfig(rc *config.RuntimeConfig) error
}

// AgentFactory builds the Agent from the loaded configuration. reload
// re-reads the configuration and applies it (to the agent and to the log
// level); the agent serves it at PUT /v1/agent/reload, and SIGHUP runs it
// too.
type AgentFactory func(rc *config.RuntimeConfig, logger *slog.Logger, reload func() error) (Agent, error)

// Shutdown timing. sdk/testutil sends SIGINT and waits 10 s before it
// kills the process, so the whole graceful path must fit well within that.
const (
	defaultLeaveTimeout     = 5 * time.Second
	defaultShutdownDeadline = 9 * time.Second
)

// agentCommand runs the agent; the timeouts are fields so tests can
// shorten them.
type agentCommand struct {
	leaveTimeout     time.Duration
	shutdownDeadline time.Duration
}

func runAgent(args []string, env *Env) int {
	return agentCommand{leaveTimeout: defaultLeaveTimeout, shutdownDeadline: defaultShutdownDeadline}.run(args, env)
}

func (c agentCommand) run(args []string, env *Env) int {
	rc, warnings, err := config.Load(config.LoadOptions{
		Args:       args,
		FlagOutput: env.Stderr,
		Logger:     slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	switch {
	case errors.Is(err, config.ErrHelp):
		return 0
	case errors.Is(err, config.ErrInvalidFlag):
		// The flag package has already printed the error and usage.
		fmt.Fprintf(env.Stderr, "==> %v\n", err)
		return 1
	case err != nil:
		fmt.Fprintf(env.Stderr, "==> Error loading configuration:\n%v\n", err)
		return 1
	}
	logger, level := newLeveledLogger(env.Stderr, rc.Logging)
	for _, w := range warnings {
		logger.Warn(w)
	}
	if env.NewAgent == nil {
		logger.Error("this binary was built without the agent")
		return 1
	}
	if rc.PidFile != "" {
		if err := writePidFile(rc.PidFile); err != nil {
			logger.Error("cannot write the PID file", "error", err)
			return 1
		}
		defer func() {
			if err := os.Remove(rc.PidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
				logger.Warn("cannot remove the PID file", "error", err)
			}
		}()
	}

	// Subscribe before starting so that a signal during start-up is seen.
	sigs, stop := env.Signals()
	defer stop()

	var a Agent
	reload := reloader(args, logger, level, func(rc *config.RuntimeConfig) error { return a.ReloadConfig(rc) })
	a, err = env.NewAgent(rc, logger, reload)
	if err != nil {
		logger.Error("cannot create agent", "error", err)
		return 1
	}
	logger.Info("starting Trellis agent",
		"version", version.Human(), "node", rc.NodeName, "node_id", rc.NodeID,
		"datacenter", rc.Datacenter, "server", rc.ServerMode, "dev", rc.DevMode,
		"http", rc.HTTPListenAddrs(), "grpc", rc.GRPCListenAddrs())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // after Shutdown: the agent's lifetime context

	startErr := make(chan error, 1)
	go func() { startErr <- a.Start(ctx) }()
	var pending os.Signal // a signal that raced with Start's return
	for started := false; !started; {
		select {
		case err := <-startErr:
			if err != nil {
				return c.failedStart(a, logger, err)
			}
			started = true
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				logger.Warn("SIGHUP during start-up: the configuration is not reloaded")
				continue
			}
			// If Start has returned meanwhile, the agent runs: handle the
			// signal as any later one.
			select {
			case err := <-startErr:
				if err != nil {
					return c.failedStart(a, logger, err)
				}
				started, pending = true, sig
				continue
			default:
			}
			logger.Warn("signal received during start-up; shutting down", "signal", sig.String())
			cancel()
			return c.stop(a, logger, sigs, false, startErr)
		}
	}
	logger.Info("Trellis agent running")

	for {
		sig := pending
		pending = nil
		if sig == nil {
			var ok bool
			select {
			case sig, ok = <-sigs:
				if !ok {
					return 1 // the signal channel closed: nothing left to wait for
				}
			case <-a.Failed():
				// No graceful leave: the server keeps its Raft seat, to
				// take it up again once restarted on a working disk.
				logger.Error("agent failed; shutting down", "error", a.Failure())
				c.stop(a, logger, sigs, false, nil)
				return 1
			}
		}
		if sig == syscall.SIGHUP {
			logger.Info("caught signal", "signal", sig.String())
			if err := reload(); err != nil {
				logger.Error("configuration reload failed", "error", err)
			}
			continue
		}
		// Consul's keys decide; Trellis defaults both to "leave".
		leave := (sig == syscall.SIGINT && !rc.SkipLeaveOnInterrupt) ||
			(sig == syscall.SIGTERM && rc.LeaveOnTerminate)
		logger.Info("caught signal", "signal", sig.String(), "leave", leave)
		return c.stop(a, logger, sigs, leave, nil)
	}
}

// failedStart cleans up after Start returned an error.
func (c agentCommand) failedStart(a Agent, logger *slog.Logger, err error) int {
	logger.Error("agent failed to start", "error", err)
	if serr := a.Shutdown(); serr != nil {
		logger.Error("shutdown after failed start", "error", serr)
	}
	return 1
}

// stop leaves (if asked) and shuts the agent down, giving up at the
// deadline or on a second signal so the process always exits promptly.
// pendingStart, when not nil, is Start's result channel: Start was
// interrupted and must return before Shutdown.
func (c agentCommand) stop(a Agent, logger *slog.Logger, sigs <-chan os.Signal, leave bool, pendingStart <-chan error) int {
	done := make(chan int, 1)
	// This goroutine is abandoned only when the deadline passes or a
	// second signal arrives; the process exits right after in both cases.
	go func() {
		code := 0
		if pendingStart != nil {
			<-pendingStart //nolint:errcheck // the agent is stopping: how Start ended no longer matters
		}
		if leave {
			logger.Info("gracefully leaving the cluster")
			ctx, cancel := context.WithTimeout(context.Background(), c.leaveTimeout)
			err := a.Leave(ctx)
			cancel()
			if err != nil {
				logger.Error("graceful leave failed", "error", err)
				code = 1
			}
		}
		if err := a.Shutdown(); err != nil {
			logger.Error("shutdown failed", "error", err)
			code = 1
		}
		if pendingStart != nil {
			code = 1 // the agent never ran
		}
		done <- code
	}()
	deadline := time.NewTimer(c.shutdownDeadline)
	defer deadline.Stop()
	for {
		select {
		case code := <-done:
			if code == 0 {
				logger.Info("agent stopped")
			}
			return code
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				continue
			}
			logger.Warn("second signal received; exiting without waiting", "signal", sig.String())
			return 1
		case <-deadline.C:
			logger.Error("agent did not stop in time; exiting", "deadline", c.shutdownDeadline)
			return 1
		}
	}
}

// reloader returns the agent command's reload: it loads the configuration
// again from the same arguments and, if it is valid, hands it to apply and
// sets the log level it names. Reloads run one at a time.
func reloader(args []string, logger *slog.Logger, level *slog.LevelVar, apply func(*config.RuntimeConfig) error) func() error {
	var mu sync.Mutex
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		logger.Info("reloading configuration")
		rc, warnings, err := config.Load(config.LoadOptions{Args: args, ReadOnly: true})
		if err != nil {
			return fmt.Errorf("failed to load the configuration: %w", err)
		}
		for _, w := range warnings {
			logger.Warn(w)
		}
		if err := apply(rc); err != nil {
			return err
		}
		if lv, err := config.ParseLogLevel(rc.Logging.Level); err == nil {
			level.Set(lv)
		}
		logger.Info("configuration reloaded", "log_level", rc.Logging.Level)
		return nil
	}
}

// NewLogger returns the agent's logger: text (or JSON) lines on w at the
// configured level, with Consul's TRACE level named as such.
func NewLogger(w io.Writer, l config.Logging) *slog.Logger {
	logger, _ := newLeveledLogger(w, l)
	return logger
}

// newLeveledLogger is NewLogger with the level it can be moved to later.
func newLeveledLogger(w io.Writer, l config.Logging) (*slog.Logger, *slog.LevelVar) {
	lv, err := config.ParseLogLevel(l.Level)
	if err != nil {
		lv = slog.LevelInfo
	}
	level := &slog.LevelVar{}
	level.Set(lv)
	opts := &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.LevelKey && len(groups) == 0 {
				if lv, ok := a.Value.Any().(slog.Level); ok && lv <= config.LevelTrace {
					a.Value = slog.StringValue("TRACE")
				}
			}
			return a
		},
	}
	if l.JSON {
		return slog.New(slog.NewJSONHandler(w, opts)), level
	}
	return slog.New(slog.NewTextHandler(w, opts)), level
}

// writePidFile writes the process ID to path (pid_file, -pid-file),
// replacing what it held, as Consul's agent does.
func writePidFile(path string) error {
	//nolint:gosec // a PID file is read by other tools (init scripts, monitors): world-readable as Consul's
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("pid_file %s: %w", path, err)
	}
	return nil
}
