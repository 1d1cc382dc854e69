package structs

import "time"

// AutopilotServer is one server of the autopilot state, as Consul's
// /v1/operator/autopilot/state shows it.
type AutopilotServer struct {
	ID      string
	Name    string
	Address string
	// NodeStatus is the server's gossip status: alive, left, failed or
	// unknown.
	NodeStatus string
	Version    string
	// LastContact is how long ago the server last heard from the leader
	// (0 for the leader, negative when never or unknown).
	LastContact time.Duration
	LastTerm    uint64
	LastIndex   uint64
	Healthy     bool
	StableSince time.Time
	ReadReplica bool
	// Status is the server's Raft role: leader, voter or non-voter.
	Status string
	// Meta is the server's catalog node metadata.
	Meta map[string]string
	// NodeType is "voter": Consul's other types are Enterprise zones.
	NodeType string
}

// Autopilot server statuses and node types, Consul's names.
const (
	AutopilotStatusLeader   = "leader"
	AutopilotStatusVoter    = "voter"
	AutopilotStatusNonVoter = "non-voter"
	AutopilotTypeVoter      = "voter"
)

// AutopilotState is the leader's autopilot view of the cluster: the
// servers by ID, the leader's ID and the voters' IDs. Without Consul
// Enterprise's redundancy zones and read replicas, the optimistic failure
// tolerance is the failure tolerance.
type AutopilotState struct {
	Healthy                    bool
	FailureTolerance           int
	OptimisticFailureTolerance int
	Servers                    map[string]AutopilotServer
	Leader                     string
	Voters                     []string
}

// ServiceUsage counts what the catalog of one datacenter holds, as
// Consul's /v1/operator/usage shows it.
type ServiceUsage struct {
	Nodes int
	// Services counts distinct service names, ServiceInstances every
	// instance (the servers' consul service included in both).
	Services         int
	ServiceInstances int
	// ConnectServiceInstances counts instances by mesh kind: each
	// gateway and proxy kind, and connect-native services.
	ConnectServiceInstances map[string]int
	// BillableServiceInstances counts typical and connect-native
	// instances, not the consul service.
	BillableServiceInstances int
}

// UsageResponse is the catalog usage of this datacenter.
type UsageResponse struct {
	Usage ServiceUsage
	QueryMeta
}

// RaftTransferLeaderRequest asks the leader to hand its leadership to
// the voter ID, or to any other voter when ID is empty.
type RaftTransferLeaderRequest struct {
	ID string
	WriteRequest
}
