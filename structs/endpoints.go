package structs

// The internal RPC methods a server answers, as descriptors: every caller
// (the HTTP API, a client agent, a follower forwarding to the leader) calls
// through one (MethodKVSGet.Call(ctx, c, &args, &reply)) and the server
// registers its handler from the same one, so both use the types the
// descriptor names. The names, like the Raft command numbers, are part of
// the wire protocol between versions. Every descriptor is listed in Methods.
var (
	// Writes (go through Raft on the leader).
	MethodCatalogRegister   = writeMethod[RegisterRequest, struct{}]("Catalog.Register")
	MethodCatalogDeregister = writeMethod[DeregisterRequest, struct{}]("Catalog.Deregister")
	MethodKVSApply          = writeMethod[KVSRequest, bool]("KVS.Apply")
	MethodSessionApply      = writeMethod[SessionRequest, string]("Session.Apply") // the reply is the session ID
	MethodTxnApply          = writeMethod[TxnRequest, TxnResponse]("Txn.Apply")

	// Reads (blocking, with consistency modes).
	MethodCatalogListNodes    = readMethod[DCSpecificRequest, IndexedNodes]("Catalog.ListNodes")
	MethodCatalogListServices = readMethod[DCSpecificRequest, IndexedServices]("Catalog.ListServices")
	MethodCatalogServiceNodes = readMethod[ServiceSpecificRequest, IndexedServiceNodes]("Catalog.ServiceNodes")
	MethodCatalogNodeServices = readMethod[NodeSpecificRequest, IndexedNodeServices]("Catalog.NodeServices")
	MethodHealthServiceNodes  = readMethod[ServiceSpecificRequest, IndexedCheckServiceNodes]("Health.ServiceNodes")
	MethodHealthServiceChecks = readMethod[ServiceSpecificRequest, IndexedHealthChecks]("Health.ServiceChecks")
	MethodHealthNodeChecks    = readMethod[NodeSpecificRequest, IndexedHealthChecks]("Health.NodeChecks")
	MethodHealthChecksInState = readMethod[ChecksInStateRequest, IndexedHealthChecks]("Health.ChecksInState")
	MethodKVSGet              = readMethod[KeyRequest, IndexedDirEntries]("KVS.Get") // 0 or 1 entry
	MethodKVSList             = readMethod[KeyListRequest, IndexedDirEntries]("KVS.List")
	MethodKVSListKeys         = readMethod[KeyListRequest, IndexedKeyList]("KVS.ListKeys")
	MethodTxnRead             = readMethod[TxnReadRequest, TxnResponse]("Txn.Read")
	MethodSessionGet          = readMethod[SessionSpecificRequest, IndexedSessions]("Session.Get")
	MethodSessionList         = readMethod[DCSpecificRequest, IndexedSessions]("Session.List")
	MethodSessionNodeSessions = readMethod[NodeSpecificRequest, IndexedSessions]("Session.NodeSessions")
	// MethodSessionRenew resets a session's TTL timer on the leader; the
	// reply holds the session, or none when it does not exist.
	MethodSessionRenew = writeMethod[SessionSpecificRequest, IndexedSessions]("Session.Renew")

	// Cluster status.
	MethodStatusLeader       = readMethod[DCSpecificRequest, string]("Status.Leader") // "ip:port", or "" for none
	MethodStatusPeers        = readMethod[DCSpecificRequest, []string]("Status.Peers")
	MethodOperatorRaftConfig = readMethod[DCSpecificRequest, RaftConfigurationResponse]("Operator.RaftGetConfiguration")
	// MethodOperatorRaftRemovePeer removes a server from the Raft
	// configuration by Address or ID (exactly one).
	MethodOperatorRaftRemovePeer = writeMethod[RaftRemovePeerRequest, struct{}]("Operator.RaftRemovePeerByAddress")
	// MethodStatusRaftStats is answered by the server it is sent to, about
	// itself; the leader asks every server for its health view.
	MethodStatusRaftStats = readMethod[DCSpecificRequest, RaftStats]("Status.RaftStats")
	// MethodOperatorServerHealth is the leader's latest health view of
	// every server (/v1/operator/autopilot/health).
	MethodOperatorServerHealth = readMethod[DCSpecificRequest, OperatorHealthReply]("Operator.ServerHealth")
	// MethodOperatorAutopilotState is the leader's autopilot state
	// (/v1/operator/autopilot/state).
	MethodOperatorAutopilotState = readMethod[DCSpecificRequest, AutopilotState]("Operator.AutopilotState")
	// MethodOperatorAutopilotGetConfiguration reads the replicated
	// autopilot configuration.
	MethodOperatorAutopilotGetConfiguration = readMethod[DCSpecificRequest, AutopilotConfigResponse]("Operator.AutopilotGetConfiguration")
	// MethodOperatorAutopilotSetConfiguration replaces it; the reply is
	// false when a check-and-set lost.
	MethodOperatorAutopilotSetConfiguration = writeMethod[AutopilotSetConfigRequest, bool]("Operator.AutopilotSetConfiguration")
	// MethodOperatorRaftTransferLeader makes the leader hand its
	// leadership to another voter; the reply is true once it did.
	MethodOperatorRaftTransferLeader = writeMethod[RaftTransferLeaderRequest, bool]("Operator.RaftTransferLeader")
	// MethodOperatorUsage counts the catalog's nodes, services and
	// instances (/v1/operator/usage).
	MethodOperatorUsage = readMethod[DCSpecificRequest, UsageResponse]("Operator.Usage")

	// Network coordinates.
	//
	// MethodCoordinateUpdate queues an agent's coordinate on the leader,
	// which commits the queue in batches; the call returns once queued.
	MethodCoordinateUpdate = writeMethod[CoordinateUpdateRequest, struct{}]("Coordinate.Update")
	// MethodCoordinateListNodes lists every stored node coordinate.
	MethodCoordinateListNodes = readMethod[DCSpecificRequest, IndexedCoordinates]("Coordinate.ListNodes")
	// MethodCoordinateNode lists one node's coordinates (none when it has
	// not reported any).
	MethodCoordinateNode = readMethod[NodeSpecificRequest, IndexedCoordinates]("Coordinate.Node")
	// MethodCoordinateListDatacenters is answered by the server it is sent
	// to, from its own gossip view of the datacenter's servers.
	MethodCoordinateListDatacenters = readMethod[DCSpecificRequest, []DatacenterMap]("Coordinate.ListDatacenters")
	// MethodCatalogListDatacenters is answered by the server it is sent
	// to: the datacenters its WAN pool knows, nearest first.
	MethodCatalogListDatacenters = readMethod[DCSpecificRequest, []string]("Catalog.ListDatacenters")
)

// RaftRemovePeerRequest removes a server from the Raft configuration by
// address or ID.
type RaftRemovePeerRequest struct {
	Address string
	ID      string
	WriteRequest
}

// Methods lists every method descriptor, for code that needs them all
// (the server checks that it has one handler for each).
func Methods() []MethodInfo {
	return append(aclMethods(),
		MethodCatalogRegister,
		MethodCatalogDeregister,
		MethodKVSApply,
		MethodSessionApply,
		MethodTxnApply,
		MethodCatalogListNodes,
		MethodCatalogListServices,
		MethodCatalogServiceNodes,
		MethodCatalogNodeServices,
		MethodHealthServiceNodes,
		MethodHealthServiceChecks,
		MethodHealthNodeChecks,
		MethodHealthChecksInState,
		MethodKVSGet,
		MethodKVSList,
		MethodKVSListKeys,
		MethodTxnRead,
		MethodSessionGet,
		MethodSessionList,
		MethodSessionNodeSessions,
		MethodSessionRenew,
		MethodStatusLeader,
		MethodStatusPeers,
		MethodOperatorRaftConfig,
		MethodOperatorRaftRemovePeer,
		MethodStatusRaftStats,
		MethodOperatorServerHealth,
		MethodOperatorAutopilotState,
		MethodOperatorAutopilotGetConfiguration,
		MethodOperatorAutopilotSetConfiguration,
		MethodOperatorRaftTransferLeader,
		MethodOperatorUsage,
		MethodCoordinateUpdate,
		MethodCoordinateListNodes,
		MethodCoordinateNode,
		MethodCoordinateListDatacenters,
		MethodCatalogListDatacenters,
		MethodConfigEntryApply,
		MethodConfigEntryDelete,
		MethodConfigEntryGet,
		MethodConfigEntryList,
		MethodExportedServicesList,
		MethodIntentionApply,
		MethodIntentionGet,
		MethodIntentionList,
		MethodIntentionMatch,
		MethodIntentionCheck,
		MethodDiscoveryChainGet,
		MethodConnectCARoots,
		MethodConnectCAConfigurationGet,
		MethodConnectCAConfigurationSet,
		MethodConnectCASign,
		MethodAutoEncryptSign,
		MethodResolveServiceConfig,
		MethodIntentionUpstreams,
		MethodGatewayServices,
		MethodServicesByKind,
		MethodSnapshotSave,
		MethodSnapshotRestore,
		MethodInternalKeyringOperation,
		MethodPreparedQueryApply,
		MethodPreparedQueryGet,
		MethodPreparedQueryList,
		MethodPreparedQueryExecute,
		MethodPreparedQueryExplain,
		MethodInternalAssignManualServiceVIPs,
		MethodCatalogVirtualIPForService,
	)
}
