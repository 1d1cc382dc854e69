package structs

// RaftIndex is the Raft log position at which a record was created and last
// modified. Blocking queries compare ModifyIndex against the index a client
// already has.
type RaftIndex struct {
	CreateIndex uint64
	ModifyIndex uint64
}

// MessageType is the first byte of every Raft log entry: it names the command
// the FSM applies. Numbers are fixed forever: a removed command's number is
// never reused, so a log written by any version replays identically.
type MessageType uint8

// The command table. Append only.
const (
	RegisterRequestType   MessageType = 0
	DeregisterRequestType MessageType = 1
	KVSRequestType        MessageType = 2
	SessionRequestType    MessageType = 3
	TxnRequestType        MessageType = 4
	// TombstoneRequestType reaps KV tombstones up to an index.
	TombstoneRequestType MessageType = 5
	// ConfigEntryRequestType upserts or deletes a config entry (also how
	// intentions are stored: service-intentions entries).
	ConfigEntryRequestType MessageType = 6
	// ConnectCARequestType sets the CA configuration and roots (bootstrap
	// and rotation).
	ConnectCARequestType MessageType = 7
	// ConnectCALeafRequestType reserves leaf certificate serial numbers from
	// the replicated counter.
	ConnectCALeafRequestType MessageType = 8
	// DedupRequestType wraps a client write with its request ID, so that a
	// write retried after its first attempt's outcome was lost is applied
	// at most once (DedupRequest). Never flagged ignorable: a server that
	// skipped it would skip the write inside.
	DedupRequestType MessageType = 9
	// CoordinateBatchUpdateType stores a batch of node coordinates the
	// leader collected from Coordinate.Update calls. Updates for nodes not
	// in the catalog are dropped.
	CoordinateBatchUpdateType MessageType = 10
	// PreparedQueryRequestType creates, updates or deletes a prepared
	// query.
	PreparedQueryRequestType MessageType = 11
	// AutopilotRequestType sets the autopilot configuration, or
	// check-and-sets it (AutopilotSetConfigRequest).
	AutopilotRequestType MessageType = 12
	// UpdateVirtualIPRequestType sets the manual virtual IPs of a service
	// (AssignServiceManualVIPsRequest). Automatic virtual IPs need no
	// command: registrations and config entry writes assign them.
	UpdateVirtualIPRequestType MessageType = 13
	// ACLBootstrapRequestType stores the first management token and moves
	// the bootstrap reset index (ACLBootstrapCommand); it fails when the
	// reset index does not match, so that bootstrap succeeds once.
	ACLBootstrapRequestType MessageType = 14
	// ACLTokenSetRequestType creates or replaces tokens
	// (ACLTokenBatchSetRequest).
	ACLTokenSetRequestType MessageType = 15
	// ACLTokenDeleteRequestType deletes tokens by AccessorID
	// (ACLTokenBatchDeleteRequest): client deletes and the leader's reaping
	// of expired tokens.
	ACLTokenDeleteRequestType MessageType = 16
	// ACLPolicySetRequestType creates or replaces policies.
	ACLPolicySetRequestType MessageType = 17
	// ACLPolicyDeleteRequestType deletes policies by ID.
	ACLPolicyDeleteRequestType MessageType = 18
	// ACLRoleSetRequestType creates or replaces roles.
	ACLRoleSetRequestType MessageType = 19
	// ACLRoleDeleteRequestType deletes roles by ID.
	ACLRoleDeleteRequestType MessageType = 20
)

// IgnoreUnknownTypeFlag marks a command that an older FSM that does not know
// it may skip. Without the flag an unknown command stops the FSM, because
// skipping it would silently diverge the replicas.
const IgnoreUnknownTypeFlag MessageType = 128

// String names the command for logs and metrics.
func (t MessageType) String() string {
	switch t &^ IgnoreUnknownTypeFlag {
	case RegisterRequestType:
		return "Register"
	case DeregisterRequestType:
		return "Deregister"
	case KVSRequestType:
		return "KVS"
	case SessionRequestType:
		return "Session"
	case TxnRequestType:
		return "Txn"
	case TombstoneRequestType:
		return "Tombstone"
	case ConfigEntryRequestType:
		return "ConfigEntry"
	case ConnectCARequestType:
		return "ConnectCA"
	case ConnectCALeafRequestType:
		return "ConnectCALeaf"
	case DedupRequestType:
		return "Dedup"
	case CoordinateBatchUpdateType:
		return "CoordinateBatchUpdate"
	case PreparedQueryRequestType:
		return "PreparedQuery"
	case AutopilotRequestType:
		return "Autopilot"
	case UpdateVirtualIPRequestType:
		return "UpdateVirtualIP"
	case ACLBootstrapRequestType:
		return "ACLBootstrap"
	case ACLTokenSetRequestType:
		return "ACLTokenSet"
	case ACLTokenDeleteRequestType:
		return "ACLTokenDelete"
	case ACLPolicySetRequestType:
		return "ACLPolicySet"
	case ACLPolicyDeleteRequestType:
		return "ACLPolicyDelete"
	case ACLRoleSetRequestType:
		return "ACLRoleSet"
	case ACLRoleDeleteRequestType:
		return "ACLRoleDelete"
	}
	return "Unknown"
}
