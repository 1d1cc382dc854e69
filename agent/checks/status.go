package checks

import (
	"log/slog"
	"sync"

	"github.com/trellis-mesh/trellis/structs"
)

// StatusHandler is a Notifier that sits between a periodic check and the
// real Notifier and applies Consul's success_before_passing and
// failures_before_critical thresholds: a passing (or warning) result is
// forwarded only after that many consecutive successes, a critical one only
// after that many consecutive failures. Between failuresBeforeWarning and
// failuresBeforeCritical consecutive failures the check is reported as
// warning. The counters start at their thresholds, so the very first result
// is forwarded as is.
type StatusHandler struct {
	inner  Notifier
	logger *slog.Logger

	mu                     sync.Mutex
	successBeforePassing   int
	successCounter         int
	failuresBeforeWarning  int
	failuresBeforeCritical int
	failuresCounter        int
}

// NewStatusHandler wraps inner. Consul's agent passes failuresBeforeWarning
// equal to failuresBeforeCritical when the definition does not set it
// (Trellis's CheckType has no separate field, so the Manager always does).
func NewStatusHandler(inner Notifier, logger *slog.Logger, successBeforePassing, failuresBeforeWarning, failuresBeforeCritical int) *StatusHandler {
	return &StatusHandler{
		inner:                  inner,
		logger:                 orDiscard(logger),
		successBeforePassing:   successBeforePassing,
		successCounter:         successBeforePassing,
		failuresBeforeWarning:  failuresBeforeWarning,
		failuresBeforeCritical: failuresBeforeCritical,
		failuresCounter:        failuresBeforeCritical,
	}
}

// UpdateCheck counts the result and forwards it once its threshold is met.
func (s *StatusHandler) UpdateCheck(checkID, status, output string) {
	s.mu.Lock()
	forward, fwdStatus := s.count(checkID, status)
	s.mu.Unlock()
	if forward {
		s.inner.UpdateCheck(checkID, fwdStatus, output)
	}
}

// count updates the counters and says whether (and as what) to forward.
func (s *StatusHandler) count(checkID, status string) (bool, string) {
	if status == structs.HealthPassing || status == structs.HealthWarning {
		s.successCounter++
		s.failuresCounter = 0
		if s.successCounter >= s.successBeforePassing {
			return true, status
		}
		s.logger.Warn("check passed but has not reached success threshold",
			"check", checkID, "status", status,
			"success_count", s.successCounter, "success_threshold", s.successBeforePassing)
		return false, ""
	}
	s.failuresCounter++
	s.successCounter = 0
	if s.failuresCounter >= s.failuresBeforeCritical {
		return true, status
	}
	if s.failuresCounter >= s.failuresBeforeWarning {
		return true, structs.HealthWarning
	}
	s.logger.Warn("check failed but has not reached warning/failure threshold",
		"check", checkID, "status", status, "failure_count", s.failuresCounter,
		"warning_threshold", s.failuresBeforeWarning, "failure_threshold", s.failuresBeforeCritical)
	return false, ""
}
