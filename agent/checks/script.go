package checks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// DefaultScriptTimeout bounds one run of a script or docker check whose
// definition has no Timeout (Consul's 30s).
const DefaultScriptTimeout = 30 * time.Second

// scriptWaitDelay is how long a run waits, once its process has exited or
// been killed, for children that inherited its output to let go of it.
const scriptWaitDelay = time.Second

// ScriptCheckConfig configures a script check, or a docker check when
// DockerContainerID is set.
type ScriptCheckConfig struct {
	CheckID string
	// Args is the command and its arguments, run without a shell.
	Args []string
	// DockerContainerID, when set, runs Args inside that container with
	// `docker exec`, through the docker CLI found on PATH.
	DockerContainerID string
	// Interval between runs; Timeout bounds one run (default 30s): the
	// process is killed and the check is critical.
	Interval time.Duration
	Timeout  time.Duration
	// OutputMaxSize caps the output kept (default 4 KiB): its last bytes.
	OutputMaxSize int
	// Notifier receives results, normally through a StatusHandler.
	Notifier Notifier
	Logger   *slog.Logger
}

// ScriptCheck runs a command periodically, as Consul's script and docker
// checks: exit status 0 is passing, 1 warning, anything else (or a
// command that cannot start, or a timeout) critical; the output is the
// command's stdout and stderr together.
type ScriptCheck struct {
	periodic
	args    []string
	docker  string
	timeout time.Duration
	maxOut  int
}

// NewScriptCheck builds a script (or docker) check; Start begins running it.
func NewScriptCheck(cfg ScriptCheckConfig) *ScriptCheck {
	c := &ScriptCheck{
		args:    append([]string(nil), cfg.Args...),
		docker:  cfg.DockerContainerID,
		timeout: positiveOr(cfg.Timeout, DefaultScriptTimeout),
		maxOut:  cfg.OutputMaxSize,
	}
	if c.maxOut <= 0 {
		c.maxOut = DefaultOutputMaxSize
	}
	c.periodic = periodic{
		checkID:  cfg.CheckID,
		interval: cfg.Interval,
		notify:   cfg.Notifier,
		logger:   orDiscard(cfg.Logger),
		probe:    c.runOnce,
	}
	return c
}

// Start begins running after a random stagger within one interval.
func (c *ScriptCheck) Start() { c.lc.start(c.run) }

// Stop kills a run in flight and waits for the check's goroutine.
func (c *ScriptCheck) Stop() { c.lc.stop() }

// command is what one run executes: Args, or `docker exec` of them.
func (c *ScriptCheck) command() ([]string, error) {
	if c.docker == "" {
		return c.args, nil
	}
	docker, err := exec.LookPath("docker")
	if err != nil {
		return nil, fmt.Errorf("docker check: the docker CLI is not on the agent's PATH: %w", err)
	}
	return append([]string{docker, "exec", c.docker}, c.args...), nil
}

func (c *ScriptCheck) runOnce(ctx context.Context) (string, string) {
	argv, err := c.command()
	if err != nil {
		return structs.HealthCritical, err.Error()
	}
	if len(argv) == 0 {
		return structs.HealthCritical, "no command to run"
	}
	runCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	out := newTailBuffer(c.maxOut)
	cmd := exec.CommandContext(runCtx, argv[0], argv[1:]...) //nolint:gosec // the command the check was registered with, allowed by enable_script_checks
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = scriptWaitDelay
	err = cmd.Run()
	output := out.String()
	if out.total > c.maxOut {
		output = fmt.Sprintf("Captured %d of %d bytes\n...\n%s", c.maxOut, out.total, output)
	}
	if errors.Is(runCtx.Err(), context.DeadlineExceeded) {
		c.logger.Warn("check timed out", "check", c.checkID, "timeout", c.timeout)
		return structs.HealthCritical, fmt.Sprintf("Timed out (%s) running check", c.timeout)
	}
	var exit *exec.ExitError
	switch {
	case err == nil:
		return structs.HealthPassing, output
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return structs.HealthWarning, output
	case errors.As(err, &exit):
		return structs.HealthCritical, output
	default:
		c.logger.Warn("check failed to run", "check", c.checkID, "error", err)
		return structs.HealthCritical, fmt.Sprintf("Failed to run check: %v", err)
	}
}
