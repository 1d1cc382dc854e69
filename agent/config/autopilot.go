package config

import "time"

// Consul's autopilot block: the configuration the servers' leader stores
// when the cluster has none yet. Once stored, the replicated copy (changed
// through /v1/operator/autopilot/configuration) wins over every agent's
// file, as in Consul.

// Autopilot is the autopilot block (Consul's defaults: cleanup on, 200ms,
// 250 entries, 10s).
type Autopilot struct {
	CleanupDeadServers      bool
	LastContactThreshold    time.Duration
	MaxTrailingLogs         uint64
	MinQuorum               uint
	ServerStabilizationTime time.Duration
}

// autopilotSource is the autopilot block of one layer.
type autopilotSource struct {
	CleanupDeadServers      *bool   `json:"cleanup_dead_servers"`
	LastContactThreshold    *string `json:"last_contact_threshold"`
	MaxTrailingLogs         *uint64 `json:"max_trailing_logs"`
	MinQuorum               *uint   `json:"min_quorum"`
	ServerStabilizationTime *string `json:"server_stabilization_time"`
}

// defaultAutopilotSource is Consul's autopilot defaults.
func defaultAutopilotSource() autopilotSource {
	return autopilotSource{
		CleanupDeadServers:      ptr(true),
		LastContactThreshold:    ptr("200ms"),
		MaxTrailingLogs:         ptr(uint64(250)),
		MinQuorum:               ptr(uint(0)),
		ServerStabilizationTime: ptr("10s"),
	}
}

// buildAutopilot checks the merged block: durations must parse and must
// not be negative.
func buildAutopilot(s autopilotSource, p *problems) Autopilot {
	return Autopilot{
		CleanupDeadServers:      *s.CleanupDeadServers,
		LastContactThreshold:    duration("autopilot.last_contact_threshold", s.LastContactThreshold, false, p),
		MaxTrailingLogs:         *s.MaxTrailingLogs,
		MinQuorum:               *s.MinQuorum,
		ServerStabilizationTime: duration("autopilot.server_stabilization_time", s.ServerStabilizationTime, false, p),
	}
}
