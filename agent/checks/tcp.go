package checks

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TCPCheckConfig configures a TCP check.
type TCPCheckConfig struct {
	CheckID string
	// Address is host:port.
	Address string
	// Interval between probes; Timeout bounds one connect (default 10s).
	Interval time.Duration
	Timeout  time.Duration
	// Notifier receives results, normally through a StatusHandler.
	Notifier Notifier
	Logger   *slog.Logger
}

// TCPCheck connects to an address periodically: passing with
// "TCP connect <addr>: Success" when the connection opens within the
// timeout, critical with the dial error otherwise.
type TCPCheck struct {
	periodic
	address string
	dialer  net.Dialer
}

// NewTCPCheck builds a TCP check; Start begins probing.
func NewTCPCheck(cfg TCPCheckConfig) *TCPCheck {
	c := &TCPCheck{
		address: cfg.Address,
		dialer:  net.Dialer{Timeout: positiveOr(cfg.Timeout, DefaultTimeout)},
	}
	c.periodic = periodic{
		checkID:  cfg.CheckID,
		interval: cfg.Interval,
		notify:   cfg.Notifier,
		logger:   orDiscard(cfg.Logger),
		probe:    c.probeOnce,
	}
	return c
}

// Start begins probing after a random stagger within one interval.
func (c *TCPCheck) Start() { c.lc.start(c.run) }

// Stop aborts any connect in flight and waits for the check's goroutine.
func (c *TCPCheck) Stop() { c.lc.stop() }

func (c *TCPCheck) probeOnce(ctx context.Context) (string, string) {
	conn, err := c.dialer.DialContext(ctx, "tcp", c.address)
	if err != nil {
		c.logger.Warn("check socket connection failed", "check", c.checkID, "error", err)
		return structs.HealthCritical, err.Error()
	}
	_ = conn.Close()
	return structs.HealthPassing, fmt.Sprintf("TCP connect %s: Success", c.address)
}
