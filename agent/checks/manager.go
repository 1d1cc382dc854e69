package checks

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Config holds the Manager's dependencies.
type Config struct {
	// Notifier receives every check result (the agent's local state).
	// Required.
	Notifier Notifier
	// AliasSource serves alias checks of local services; without it such
	// checks are refused with ErrInvalidCheck.
	AliasSource AliasSource
	// RPC and Datacenter serve alias checks with AliasNode; without RPC
	// such checks are refused with ErrInvalidCheck.
	RPC        structs.Caller
	Datacenter string
	// TLSConfig builds the client TLS configuration of an HTTP check (and
	// of a gRPC check with GRPCUseTLS) from the definition's TLSSkipVerify
	// and TLSServerName. The agent passes one that adds its CA roots, as
	// Consul's OutgoingTLSConfigForCheck does; nil uses the system roots.
	TLSConfig func(skipVerify bool, serverName string) *tls.Config
	// OutputMaxSize is the agent-wide cap on check output
	// (check_output_max_size); a definition may only lower it. Zero means
	// DefaultOutputMaxSize.
	OutputMaxSize int
	// MinInterval is the smallest interval an HTTP, TCP or gRPC check runs
	// at; shorter ones are raised with a warning. Zero means MinInterval
	// (1s, Consul's). Tests lower it.
	MinInterval time.Duration
	Logger      *slog.Logger
}

// Manager owns the check runners of one agent, keyed by check ID.
type Manager struct {
	cfg    Config
	logger *slog.Logger

	// opMu serialises Add, Remove and Stop, so that an old runner is fully
	// stopped before its replacement starts; mu guards the map only, so a
	// TTL update never waits for a runner to stop.
	opMu    sync.Mutex
	mu      sync.Mutex
	runners map[string]*entry
	stopped bool
}

type entry struct {
	runner Runner
	ttl    *TTLCheck // set for TTL checks only
	kind   string
}

// NewManager checks the configuration; runners start as checks are added.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Notifier == nil {
		return nil, errors.New("checks: Config.Notifier is required")
	}
	if cfg.OutputMaxSize < 1 {
		cfg.OutputMaxSize = DefaultOutputMaxSize
	}
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = MinInterval
	}
	if cfg.TLSConfig == nil {
		cfg.TLSConfig = func(skipVerify bool, serverName string) *tls.Config {
			return &tls.Config{InsecureSkipVerify: skipVerify, ServerName: serverName} //nolint:gosec // the definition asks for it
		}
	}
	logger := orDiscard(cfg.Logger)
	return &Manager{cfg: cfg, logger: logger, runners: make(map[string]*entry)}, nil
}

// Add starts the runner def describes under checkID, replacing (stopping
// first) any runner already registered under that ID. serviceID is the
// service the check belongs to ("" for a node check); it is only logged.
// def is read, never kept or modified. When def is refused, a runner
// already registered under checkID keeps running. The check's initial
// status is not reported: the agent stores it (InitialStatus) before
// calling Add.
func (m *Manager) Add(checkID string, def *structs.CheckType, serviceID string) error {
	if checkID == "" {
		return fmt.Errorf("%w: missing check ID", ErrInvalidCheck)
	}
	e, err := m.build(checkID, def)
	if err != nil {
		return err
	}

	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		return ErrStopped
	}
	old := m.runners[checkID]
	delete(m.runners, checkID)
	m.mu.Unlock()
	if old != nil {
		old.runner.Stop()
	}
	m.mu.Lock()
	m.runners[checkID] = e
	m.mu.Unlock()
	e.runner.Start()
	m.logger.Debug("check started", "check", checkID, "type", e.kind, "service", serviceID)
	return nil
}

// Remove stops and forgets the runner of checkID; it reports whether there
// was one.
func (m *Manager) Remove(checkID string) bool {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	e := m.runners[checkID]
	delete(m.runners, checkID)
	m.mu.Unlock()
	if e == nil {
		return false
	}
	e.runner.Stop()
	return true
}

// UpdateTTL sets the status of a TTL check (the agent API's pass, warn,
// fail and update) and restarts its TTL. It fails with ErrInvalidStatus,
// ErrCheckNotFound or ErrNotTTL; the latter's text is Consul's.
func (m *Manager) UpdateTTL(checkID, status, output string) error {
	switch status {
	case structs.HealthPassing, structs.HealthWarning, structs.HealthCritical:
	default:
		return &checkError{msg: fmt.Sprintf("Invalid check status: %q", status), sentinel: ErrInvalidStatus}
	}
	m.mu.Lock()
	e := m.runners[checkID]
	m.mu.Unlock()
	if e == nil {
		return &checkError{msg: fmt.Sprintf("Unknown check ID %q", checkID), sentinel: ErrCheckNotFound}
	}
	if e.ttl == nil {
		return &checkError{msg: fmt.Sprintf("CheckID %q does not have associated TTL", checkID), sentinel: ErrNotTTL}
	}
	if _, err := e.ttl.SetStatus(status, output); err != nil {
		// Removed between the lookup and the update.
		return &checkError{msg: fmt.Sprintf("Unknown check ID %q", checkID), sentinel: ErrCheckNotFound}
	}
	return nil
}

// Has reports whether a runner is registered under checkID.
func (m *Manager) Has(checkID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.runners[checkID]
	return ok
}

// Stop stops every runner (in parallel) and waits for them; later Adds
// fail with ErrStopped. It is idempotent.
func (m *Manager) Stop() {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	m.mu.Lock()
	m.stopped = true
	all := m.runners
	m.runners = make(map[string]*entry)
	m.mu.Unlock()

	var wg sync.WaitGroup
	for _, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.runner.Stop()
		}()
	}
	wg.Wait()
}

// build turns a definition into a (not yet started) runner.
func (m *Manager) build(checkID string, def *structs.CheckType) (*entry, error) {
	if def == nil {
		return nil, fmt.Errorf("%w: check %q has no definition", ErrInvalidCheck, checkID)
	}
	// Runners tag their own log lines with the check ID.
	logger := m.logger
	maxOut := m.cfg.OutputMaxSize
	if def.OutputMaxSize > 0 && def.OutputMaxSize < maxOut {
		maxOut = def.OutputMaxSize
	}
	e := &entry{kind: def.Type()}

	switch e.kind {
	case "ttl":
		e.ttl = NewTTLCheck(TTLCheckConfig{
			CheckID: checkID, TTL: def.TTL.Duration(), OutputMaxSize: maxOut,
			Notifier: m.cfg.Notifier, Logger: logger,
		})
		e.runner = e.ttl
	case "http":
		e.runner = NewHTTPCheck(HTTPCheckConfig{
			CheckID: checkID, URL: def.HTTP, Method: def.Method, Header: def.Header, Body: def.Body,
			Interval: m.interval(checkID, def), Timeout: def.Timeout.Duration(),
			TLSConfig:     m.cfg.TLSConfig(def.TLSSkipVerify, def.TLSServerName),
			OutputMaxSize: maxOut, Notifier: m.statusHandler(def, logger), Logger: logger,
		})
	case "tcp":
		e.runner = NewTCPCheck(TCPCheckConfig{
			CheckID: checkID, Address: def.TCP,
			Interval: m.interval(checkID, def), Timeout: def.Timeout.Duration(),
			Notifier: m.statusHandler(def, logger), Logger: logger,
		})
	case "grpc":
		var tlsCfg *tls.Config
		if def.GRPCUseTLS {
			tlsCfg = m.cfg.TLSConfig(def.TLSSkipVerify, def.TLSServerName)
		}
		e.runner = NewGRPCCheck(GRPCCheckConfig{
			CheckID: checkID, Target: def.GRPC,
			Interval: m.interval(checkID, def), Timeout: def.Timeout.Duration(),
			TLSConfig: tlsCfg, Notifier: m.statusHandler(def, logger), Logger: logger,
		})
	case "alias":
		if def.AliasNode != "" && m.cfg.RPC == nil {
			return nil, fmt.Errorf("%w: alias check %q of node %q needs an RPC client", ErrInvalidCheck, checkID, def.AliasNode)
		}
		if def.AliasNode == "" && m.cfg.AliasSource == nil {
			return nil, fmt.Errorf("%w: alias check %q of a local service needs an AliasSource", ErrInvalidCheck, checkID)
		}
		// Alias results are not thresholded: they mirror statuses that
		// were already thresholded where they were produced.
		e.runner = NewAliasCheck(AliasCheckConfig{
			CheckID: checkID, Node: def.AliasNode, ServiceID: def.AliasService,
			Notifier: m.cfg.Notifier, Source: m.cfg.AliasSource,
			RPC: m.cfg.RPC, Datacenter: m.cfg.Datacenter, Logger: logger,
		})
	case "script", "docker":
		// The agent's local state admits only the script checks the
		// agent's enable_script_checks settings allow.
		e.runner = NewScriptCheck(ScriptCheckConfig{
			CheckID: checkID, Args: def.ScriptArgs, DockerContainerID: def.DockerContainerID,
			Interval: m.interval(checkID, def), Timeout: def.Timeout.Duration(),
			OutputMaxSize: maxOut, Notifier: m.statusHandler(def, logger), Logger: logger,
		})
	default:
		return nil, fmt.Errorf("%w: check %q needs a TTL, or HTTP, TCP or GRPC with an Interval, or an alias", ErrInvalidCheck, checkID)
	}
	return e, nil
}

// interval applies the minimum interval the way Consul's agent does: raise
// it and warn, rather than refuse the registration.
func (m *Manager) interval(checkID string, def *structs.CheckType) time.Duration {
	iv := def.Interval.Duration()
	if iv < m.cfg.MinInterval {
		m.logger.Warn("check has interval below minimum",
			"check", checkID, "interval", iv, "minimum_interval", m.cfg.MinInterval)
		iv = m.cfg.MinInterval
	}
	return iv
}

// statusHandler applies the definition's thresholds in front of the
// Notifier. Consul's FailuresBeforeWarning defaults to
// FailuresBeforeCritical; Trellis has no separate field.
func (m *Manager) statusHandler(def *structs.CheckType, logger *slog.Logger) Notifier {
	return NewStatusHandler(m.cfg.Notifier, logger,
		def.SuccessBeforePassing, def.FailuresBeforeCritical, def.FailuresBeforeCritical)
}
