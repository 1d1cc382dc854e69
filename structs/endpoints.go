package structs

// The internal RPC methods a server answers. Every caller (the HTTP API, a
// client agent, a follower forwarding to the leader) names one of these and
// passes the argument and reply types given beside it. The names, like the
// Raft command numbers, are part of the wire protocol between versions.
const (
	// Writes (go through Raft on the leader).
	MethodCatalogRegister   = "Catalog.Register"   // *RegisterRequest -> *struct{}
	MethodCatalogDeregister = "Catalog.Deregister" // *DeregisterRequest -> *struct{}
	MethodKVSApply          = "KVS.Apply"          // *KVSRequest -> *bool
	MethodSessionApply      = "Session.Apply"      // *SessionRequest -> *string (the session ID)
	MethodTxnApply          = "Txn.Apply"          // *TxnRequest -> *TxnResponse

	// Reads (blocking, with consistency modes).
	MethodCatalogListNodes    = "Catalog.ListNodes"    // *DCSpecificRequest -> *IndexedNodes
	MethodCatalogListServices = "Catalog.ListServices" // *DCSpecificRequest -> *IndexedServices
	MethodCatalogServiceNodes = "Catalog.ServiceNodes" // *ServiceSpecificRequest -> *IndexedServiceNodes
	MethodCatalogNodeServices = "Catalog.NodeServices" // *NodeSpecificRequest -> *IndexedNodeServices
	MethodHealthServiceNodes  = "Health.ServiceNodes"  // *ServiceSpecificRequest -> *IndexedCheckServiceNodes
	MethodHealthServiceChecks = "Health.ServiceChecks" // *ServiceSpecificRequest -> *IndexedHealthChecks
	MethodHealthNodeChecks    = "Health.NodeChecks"    // *NodeSpecificRequest -> *IndexedHealthChecks
	MethodHealthChecksInState = "Health.ChecksInState" // *ChecksInStateRequest -> *IndexedHealthChecks
	MethodKVSGet              = "KVS.Get"              // *KeyRequest -> *IndexedDirEntries (0 or 1 entry)
	MethodKVSList             = "KVS.List"             // *KeyListRequest -> *IndexedDirEntries
	MethodKVSListKeys         = "KVS.ListKeys"         // *KeyListRequest -> *IndexedKeyList
	MethodTxnRead             = "Txn.Read"             // *TxnReadRequest -> *TxnResponse
	MethodSessionGet          = "Session.Get"          // *SessionSpecificRequest -> *IndexedSessions
	MethodSessionList         = "Session.List"         // *DCSpecificRequest -> *IndexedSessions
	MethodSessionNodeSessions = "Session.NodeSessions" // *NodeSpecificRequest -> *IndexedSessions
	// MethodSessionRenew resets a session's TTL timer on the leader; the
	// reply holds the session, or none when it does not exist.
	MethodSessionRenew = "Session.Renew" // *SessionSpecificRequest -> *IndexedSessions

	// Cluster status.
	MethodStatusLeader       = "Status.Leader"                 // *DCSpecificRequest -> *string ("ip:port" or "")
	MethodStatusPeers        = "Status.Peers"                  // *DCSpecificRequest -> *[]string
	MethodOperatorRaftConfig = "Operator.RaftGetConfiguration" // *DCSpecificRequest -> *RaftConfigurationResponse
	// MethodOperatorRaftRemovePeer removes a server from the Raft
	// configuration by Address or ID (exactly one).
	MethodOperatorRaftRemovePeer = "Operator.RaftRemovePeerByAddress" // *RaftRemovePeerRequest -> *struct{}
	// MethodStatusRaftStats is answered by the server it is sent to, about
	// itself; the leader asks every server for its health view.
	MethodStatusRaftStats = "Status.RaftStats" // *DCSpecificRequest -> *RaftStats
	// MethodOperatorServerHealth is the leader's latest health view of
	// every server (/v1/operator/autopilot/health).
	MethodOperatorServerHealth = "Operator.ServerHealth" // *DCSpecificRequest -> *OperatorHealthReply
)

// RaftRemovePeerRequest removes a server from the Raft configuration by
// address or ID.
type RaftRemovePeerRequest struct {
	Address string
	ID      string
	WriteRequest
}
