package structs

import "time"

// RaftStats is what one server reports of its own Raft log and its last
// contact with the leader, for the leader's health view of every server.
type RaftStats struct {
	// LastContact is raft's "last_contact" stat: "0" on the leader,
	// "never" before any contact, otherwise a Go duration.
	LastContact string
	LastTerm    uint64
	LastIndex   uint64
}

// ServerHealth is the leader's view of one server in the Raft
// configuration (Consul's autopilot server health).
type ServerHealth struct {
	ID      string
	Name    string
	Address string
	// SerfStatus is the server's gossip status: alive, leaving, left,
	// failed, or none when gossip does not know it.
	SerfStatus string
	Version    string
	Leader     bool
	// LastContact is how long ago the server last heard from the leader
	// (0 for the leader, negative when never or unknown).
	LastContact time.Duration
	LastTerm    uint64
	LastIndex   uint64
	Healthy     bool
	Voter       bool
	// StableSince is when the server's health last changed, as the leader
	// saw it.
	StableSince time.Time
}

// OperatorHealthReply is the cluster's health: Healthy when every server
// is, and how many voters may fail before the cluster loses its quorum.
type OperatorHealthReply struct {
	Healthy          bool
	FailureTolerance int
	Servers          []ServerHealth
}

// AutopilotConfig is the replicated autopilot configuration (Consul's
// /v1/operator/autopilot/configuration). The leader judges server health
// with LastContactThreshold and MaxTrailingLogs, waits
// ServerStabilizationTime before it calls a new server stable, and, with
// CleanupDeadServers, removes failed servers from the Raft configuration
// while at least MinQuorum servers remain. The redundancy-zone and upgrade
// settings are Consul Enterprise's: kept and shown, never acted on.
type AutopilotConfig struct {
	CleanupDeadServers      bool
	LastContactThreshold    time.Duration
	MaxTrailingLogs         uint64
	MinQuorum               uint
	ServerStabilizationTime time.Duration
	RedundancyZoneTag       string
	DisableUpgradeMigration bool
	UpgradeVersionTag       string
	RaftIndex
}

// DefaultAutopilotConfig is Consul's default autopilot configuration, which
// the agent config's autopilot block overrides key by key.
func DefaultAutopilotConfig() AutopilotConfig {
	return AutopilotConfig{
		CleanupDeadServers:      true,
		LastContactThreshold:    200 * time.Millisecond,
		MaxTrailingLogs:         250,
		ServerStabilizationTime: 10 * time.Second,
	}
}

// AutopilotSetConfigRequest replaces the autopilot configuration; with
// CAS, only while the stored configuration's ModifyIndex is
// Config.ModifyIndex (0: only when none is stored).
type AutopilotSetConfigRequest struct {
	Config AutopilotConfig
	CAS    bool
	WriteRequest
}

// AutopilotConfigResponse is the stored autopilot configuration.
type AutopilotConfigResponse struct {
	Config AutopilotConfig
	QueryMeta
}
