package checks

import (
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
//
// A waiting TTL costs a runtime timer, not a goroutine: an agent with
// thousands of TTL checks (one per sidecar, say) keeps no goroutine stack
// per check. The expiry runs in the goroutine the runtime starts when the
// timer fires; Stop waits for one under way.
type TTLCheck struct {
	checkID string
	ttl     time.Duration
	maxOut  int
	notify  Notifier
	logger  *slog.Logger

	// mu orders SetStatus against expiry so that a late-firing timer can
	// never overwrite a fresher status, and so that nothing is reported
	// after Stop.
	mu sync.Mutex
	// Guarded by mu:
	timer      *time.Timer // nil until Start
	deadline   time.Time
	lastOutput string
	stopped    bool

	// pending counts the expiries armed or running, so that Stop can wait
	// until none is left. It is only added to under mu, before stopped.
	pending sync.WaitGroup
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
	defer c.mu.Unlock()
	if c.timer == nil && !c.stopped {
		c.armLocked()
	}
}

// Stop disarms the timer and waits for an expiry under way; SetStatus
// fails with ErrStopped afterwards.
func (c *TTLCheck) Stop() {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil && c.timer.Stop() {
		c.pending.Done()
	}
	c.mu.Unlock()
	c.pending.Wait()
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
		c.armLocked()
	}
	return output, nil
}

// armLocked (re)starts the timer for a full TTL from now.
func (c *TTLCheck) armLocked() {
	c.deadline = time.Now().Add(c.ttl)
	if c.timer == nil {
		c.pending.Add(1)
		c.timer = time.AfterFunc(c.ttl, c.expire)
		return
	}
	// A timer stopped before it fired keeps its pending count; one that
	// fired has released (or will release) its own.
	if !c.timer.Stop() {
		c.pending.Add(1)
	}
	c.timer.Reset(c.ttl)
}

// expire reports the check critical unless a SetStatus moved the deadline
// between the timer firing and this call taking the lock.
func (c *TTLCheck) expire() {
	defer c.pending.Done()
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
