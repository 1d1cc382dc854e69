package server

import "github.com/trellis-mesh/trellis/structs"

// endpointTable lists every internal RPC method this server answers.
func (s *Server) endpointTable() map[string]endpoint {
	t := make(map[string]endpoint)

	handle(t, structs.MethodCatalogRegister, s.catalogRegister)
	handle(t, structs.MethodCatalogDeregister, s.catalogDeregister)
	handle(t, structs.MethodCatalogListNodes, s.catalogListNodes)
	handle(t, structs.MethodCatalogListServices, s.catalogListServices)
	filtersItself(t, structs.MethodCatalogListServices)
	handle(t, structs.MethodCatalogServiceNodes, s.catalogServiceNodes)
	handle(t, structs.MethodCatalogNodeServices, s.catalogNodeServices)

	handle(t, structs.MethodHealthServiceNodes, s.healthServiceNodes)
	handle(t, structs.MethodHealthServiceChecks, s.healthServiceChecks)
	handle(t, structs.MethodHealthNodeChecks, s.healthNodeChecks)
	handle(t, structs.MethodHealthChecksInState, s.healthChecksInState)

	handle(t, structs.MethodKVSApply, s.kvsApply)
	handle(t, structs.MethodKVSGet, s.kvsGet)
	handle(t, structs.MethodKVSList, s.kvsList)
	handle(t, structs.MethodKVSListKeys, s.kvsListKeys)
	handle(t, structs.MethodTxnApply, s.txnApply)
	handle(t, structs.MethodTxnRead, s.txnRead)

	handle(t, structs.MethodSessionApply, s.sessionApply)
	handle(t, structs.MethodSessionGet, s.sessionGet)
	handle(t, structs.MethodSessionList, s.sessionList)
	handle(t, structs.MethodSessionNodeSessions, s.sessionNodeSessions)
	// Renew must reach the leader, which owns the TTL timers.
	handle(t, structs.MethodSessionRenew, s.sessionRenew)

	handle(t, structs.MethodStatusLeader, s.statusLeader)
	handle(t, structs.MethodStatusPeers, s.statusPeers)
	handle(t, structs.MethodOperatorRaftConfig, s.operatorRaftConfig)
	handle(t, structs.MethodOperatorRaftRemovePeer, s.operatorRaftRemovePeer)
	handle(t, structs.MethodStatusRaftStats, s.statusRaftStats)
	// The Raft configuration is the leader's (Consul forwards it unless
	// ?stale): a follower that has not heard from a new leader yet would
	// report none.
	for _, m := range []structs.MethodInfo{structs.MethodStatusLeader, structs.MethodStatusPeers, structs.MethodStatusRaftStats} {
		servedHere(t, m)
	}
	handle(t, structs.MethodOperatorServerHealth, s.operatorServerHealth)
	handle(t, structs.MethodOperatorAutopilotState, s.operatorAutopilotState)

	// Operator endpoints (operator_endpoint.go).
	handle(t, structs.MethodOperatorAutopilotGetConfiguration, s.operatorAutopilotGetConfiguration)
	handle(t, structs.MethodOperatorAutopilotSetConfiguration, s.operatorAutopilotSetConfiguration)
	handle(t, structs.MethodOperatorRaftTransferLeader, s.operatorRaftTransferLeader)
	handle(t, structs.MethodOperatorUsage, s.operatorUsage)

	// Network coordinates (coordinate_endpoint.go).
	handle(t, structs.MethodCoordinateUpdate, s.coordinateUpdate)
	handle(t, structs.MethodCoordinateListNodes, s.coordinateListNodes)
	handle(t, structs.MethodCoordinateNode, s.coordinateNode)
	handle(t, structs.MethodCoordinateListDatacenters, s.coordinateListDatacenters)
	// The datacenter map is this server's own gossip view.
	servedHere(t, structs.MethodCoordinateListDatacenters)
	handle(t, structs.MethodCatalogListDatacenters, s.catalogListDatacenters)
	servedHere(t, structs.MethodCatalogListDatacenters)

	// Gossip keyrings are each member's own: any server runs the
	// operation across its pools (keyring_endpoint.go).
	handle(t, structs.MethodInternalKeyringOperation, s.keyringOperation)
	servedHere(t, structs.MethodInternalKeyringOperation)

	handle(t, structs.MethodConnectCARoots, requireConnect(s, s.connectCARoots))
	handle(t, structs.MethodConnectCAConfigurationGet, requireConnect(s, s.connectCAConfigurationGet))
	handle(t, structs.MethodConnectCAConfigurationSet, requireConnect(s, s.connectCAConfigurationSet))
	handle(t, structs.MethodConnectCASign, requireConnect(s, s.connectCASign))
	handle(t, structs.MethodAutoEncryptSign, requireConnect(s, s.autoEncryptSign))

	// Config entries, intentions and discovery chains.
	handle(t, structs.MethodConfigEntryApply, s.configEntryApply)
	handle(t, structs.MethodConfigEntryDelete, s.configEntryDelete)
	handle(t, structs.MethodConfigEntryGet, s.configEntryGet)
	handle(t, structs.MethodConfigEntryList, s.configEntryList)
	filtersItself(t, structs.MethodConfigEntryList)
	handle(t, structs.MethodExportedServicesList, s.exportedServicesList)
	handle(t, structs.MethodIntentionApply, s.intentionApply)
	handle(t, structs.MethodIntentionGet, s.intentionGet)
	handle(t, structs.MethodIntentionList, s.intentionList)
	handle(t, structs.MethodIntentionMatch, s.intentionMatch)
	handle(t, structs.MethodIntentionCheck, s.intentionCheck)
	handle(t, structs.MethodDiscoveryChainGet, s.discoveryChainGet)

	// Prepared queries (prepared_query_endpoint.go).
	handle(t, structs.MethodPreparedQueryApply, s.preparedQueryApply)
	handle(t, structs.MethodPreparedQueryGet, s.preparedQueryGet)
	handle(t, structs.MethodPreparedQueryList, s.preparedQueryList)
	handle(t, structs.MethodPreparedQueryExecute, s.preparedQueryExecute)
	handle(t, structs.MethodPreparedQueryExplain, s.preparedQueryExplain)

	// Virtual IPs (virtual_ip_endpoint.go).
	handle(t, structs.MethodInternalAssignManualServiceVIPs, s.internalAssignManualServiceVIPs)
	handle(t, structs.MethodCatalogVirtualIPForService, s.catalogVirtualIPForService)

	// ACLs (acl_endpoint.go, acl_policy_endpoint.go, acl_resolve_endpoint.go).
	handle(t, structs.MethodACLBootstrap, s.aclBootstrap)
	handle(t, structs.MethodACLTokenSet, s.aclTokenSet)
	handle(t, structs.MethodACLTokenClone, s.aclTokenClone)
	handle(t, structs.MethodACLTokenDelete, s.aclTokenDelete)
	handle(t, structs.MethodACLTokenRead, s.aclTokenRead)
	handle(t, structs.MethodACLTokenList, s.aclTokenList)
	handle(t, structs.MethodACLPolicySet, s.aclPolicySet)
	handle(t, structs.MethodACLPolicyDelete, s.aclPolicyDelete)
	handle(t, structs.MethodACLPolicyRead, s.aclPolicyRead)
	handle(t, structs.MethodACLPolicyList, s.aclPolicyList)
	handle(t, structs.MethodACLRoleSet, s.aclRoleSet)
	handle(t, structs.MethodACLRoleDelete, s.aclRoleDelete)
	handle(t, structs.MethodACLRoleRead, s.aclRoleRead)
	handle(t, structs.MethodACLRoleList, s.aclRoleList)
	handle(t, structs.MethodACLAuthorize, s.aclAuthorizeRequests)
	handle(t, structs.MethodACLTokenResolve, s.aclTokenResolve)
	handle(t, structs.MethodACLPolicyResolve, s.aclPolicyResolve)
	handle(t, structs.MethodACLRoleResolve, s.aclRoleResolve)

	// Snapshots (snapshot_endpoint.go).
	handle(t, structs.MethodSnapshotSave, s.snapshotSave)
	handle(t, structs.MethodSnapshotRestore, s.snapshotRestore)
	streamed(t, structs.MethodSnapshotSave, structs.MethodSnapshotRestore)

	// The reads behind client agents' proxy configuration.
	s.proxycfgEndpoints(t)

	// Writes a server may send again after an attempt whose outcome it
	// could not learn (see retrySafe in rpc.go).
	retrySafe(t, structs.MethodKVSApply, structs.MethodTxnApply,
		structs.MethodCatalogRegister, structs.MethodCatalogDeregister,
		structs.MethodSessionApply, structs.MethodConfigEntryApply, structs.MethodConfigEntryDelete,
		// Checks only its input before proposing.
		structs.MethodInternalAssignManualServiceVIPs,
		// Queuing the same report twice keeps the latest once.
		structs.MethodCoordinateUpdate)
	aclRules(t) // acl_rules.go
	return t
}
