package checks

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TTLCheckConfig configures a TTL check.
type TTLCheckConfig struct {
	CheckID string
	// TTL is how long a status set through SetStatus stays valid. Required.
	TTL time.Duration
	// OutputMaxSize caps the output kept from SetStatus (default 4 KiB).
	OutputMaxSize int
	Notifier      Notifier
	Logger        *slog.Logger
}

// TTLCheck is a check whose status the application pushes through the
// agent API (pass/warn/fail/update). If no update arrives within TTL the
// check turns critical with output "TTL expired" (followed by the last
// output, when there was one). It does not report an initial status: the
// agent registers the check with InitialStatus.
type TTLCheck struct {
	checkID string
	ttl     time.Duration
	maxOut  int
	notify  Notifier
	logger  *slog.Logger

	// mu orders SetStatus against expiry so that a late-firing timer can
	// never overwrite a fresher status, and so that nothing is reported
	// after Stop.
	mu         sync.Mutex
	timer      *time.Timer
	deadline   time.Time
	lastOutput string
	stopped    bool

	lc lifecycle
}

// NewTTLCheck builds a TTL check; Start arms its timer.
func NewTTLCheck(cfg TTLCheckConfig) *TTLCheck {
	maxOut := cfg.OutputMaxSize
	if maxOut < 1 {
		maxOut = DefaultOutputMaxSize
	}
	return &TTLCheck{
		checkID: cfg.CheckID,
		ttl:     cfg.TTL,
		maxOut:  maxOut,
		notify:  cfg.Notifier,
		logger:  orDiscard(cfg.Logger),
	}
}

// Start arms the TTL timer: without a SetStatus within TTL the check
// expires.
func (c *TTLCheck) Start() {
	c.mu.Lock()
	if c.timer == nil && !c.stopped {
		c.deadline = time.Now().Add(c.ttl)
		c.timer = time.NewTimer(c.ttl)
	}
	c.mu.Unlock()
	c.lc.start(c.run)
}

// Stop disarms the timer; SetStatus fails with ErrStopped afterwards.
func (c *TTLCheck) Stop() {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.lc.stop()
}

// SetStatus reports status with output (truncated to OutputMaxSize, as
// Consul does) and restarts the TTL, also after it expired. It returns the
// output as stored, which the agent may persist so that a restart keeps the
// last state.
func (c *TTLCheck) SetStatus(status, output string) (string, error) {
	output = truncateOutput(output, c.maxOut)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return "", ErrStopped
	}
	c.logger.Debug("check status updated", "check", c.checkID, "status", status)
	c.notify.UpdateCheck(c.checkID, status, output)
	c.lastOutput = output
	c.deadline = time.Now().Add(c.ttl)
	if c.timer != nil {
		// Since Go 1.23 Reset also discards an expiry not yet received.
		c.timer.Reset(c.ttl)
	}
	return output, nil
}

func (c *TTLCheck) run(ctx context.Context) {
	c.mu.Lock()
	timer := c.timer
	c.mu.Unlock()
	if timer == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			c.expire()
		}
	}
}

// expire reports the check critical unless a SetStatus moved the deadline
// between the timer firing and this goroutine taking the lock.
func (c *TTLCheck) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || time.Now().Before(c.deadline) {
		return
	}
	c.logger.Warn("check missed TTL, is now critical", "check", c.checkID)
	out := "TTL expired"
	if c.lastOutput != "" {
		out = fmt.Sprintf("%s (last output before timeout follows): %s", out, c.lastOutput)
	}
	c.notify.UpdateCheck(c.checkID, structs.HealthCritical, out)
}
