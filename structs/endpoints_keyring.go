package structs

// MethodInternalKeyringOperation runs a gossip keyring operation (list,
// install, use, remove) across the pools of the server the call reaches:
// its WAN pool, when it has one and LocalOnly is not set, then the LAN
// pool of its datacenter, each through Serf's key manager, which asks
// every member. It is not a Raft write: the keyrings are each member's
// own, so any server may run it (a client agent's router picks one), as
// Consul's Internal.KeyringOperation. Per-pool failures are in the
// responses' Error, not in the call's error.
var MethodInternalKeyringOperation = readMethod[KeyringRequest, KeyringResponses]("Internal.KeyringOperation")

// KeyringOp is a keyring operation, with Consul's names.
type KeyringOp string

// The keyring operations.
const (
	KeyringList    KeyringOp = "list"
	KeyringInstall KeyringOp = "install"
	KeyringUse     KeyringOp = "use"
	KeyringRemove  KeyringOp = "remove"
)

// KeyringRequest is one keyring operation; Key is the base64 key (empty
// for list).
type KeyringRequest struct {
	Operation KeyringOp
	Key       string
	// LocalOnly skips the WAN pool (list only, as Consul's local-only).
	LocalOnly bool
	// RelayFactor asks that many extra members to relay each answer (0-5).
	RelayFactor uint8
	QueryOptions
}

// KeyringResponse is one pool's answer, with consul/api's KeyringResponse
// fields: the keys with how many members hold each (and as primary), the
// pool's member count, per-member messages and the pool's error.
type KeyringResponse struct {
	WAN         bool
	Datacenter  string
	Segment     string
	Partition   string            `json:",omitempty"`
	Messages    map[string]string `json:",omitempty"`
	Keys        map[string]int
	PrimaryKeys map[string]int
	NumNodes    int
	Error       string `json:",omitempty"`
}

// KeyringResponses is every pool's answer, WAN first.
type KeyringResponses struct {
	Responses []*KeyringResponse
	QueryMeta
}
