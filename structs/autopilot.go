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
