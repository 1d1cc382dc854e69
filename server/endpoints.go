package server

import (
	"context"

	"github.com/trellis-mesh/trellis/structs"
)

// endpointTable lists every internal RPC method this server answers.
func (s *Server) endpointTable() map[string]endpoint {
	t := make(map[string]endpoint)
	const write, read = true, false

	handle(t, structs.MethodCatalogRegister, write, s.catalogRegister)
	handle(t, structs.MethodCatalogDeregister, write, s.catalogDeregister)
	handle(t, structs.MethodCatalogListNodes, read, s.catalogListNodes)
	handle(t, structs.MethodCatalogListServices, read, s.catalogListServices)
	filtersItself(t, structs.MethodCatalogListServices)
	handle(t, structs.MethodCatalogServiceNodes, read, s.catalogServiceNodes)
	handle(t, structs.MethodCatalogNodeServices, read, s.catalogNodeServices)

	handle(t, structs.MethodHealthServiceNodes, read, s.healthServiceNodes)
	handle(t, structs.MethodHealthServiceChecks, read, s.healthServiceChecks)
	handle(t, structs.MethodHealthNodeChecks, read, s.healthNodeChecks)
	handle(t, structs.MethodHealthChecksInState, read, s.healthChecksInState)

	handle(t, structs.MethodKVSApply, write, s.kvsApply)
	handle(t, structs.MethodKVSGet, read, s.kvsGet)
	handle(t, structs.MethodKVSList, read, s.kvsList)
	handle(t, structs.MethodKVSListKeys, read, s.kvsListKeys)
	handle(t, structs.MethodTxnApply, write, s.txnApply)
	handle(t, structs.MethodTxnRead, read, s.txnRead)

	handle(t, structs.MethodSessionApply, write, s.sessionApply)
	handle(t, structs.MethodSessionGet, read, s.sessionGet)
	handle(t, structs.MethodSessionList, read, s.sessionList)
	handle(t, structs.MethodSessionNodeSessions, read, s.sessionNodeSessions)
	// Renew must reach the leader, which owns the TTL timers.
	handle(t, structs.MethodSessionRenew, write, s.sessionRenew)

	handle(t, structs.MethodStatusLeader, read, s.statusLeader)
	handle(t, structs.MethodStatusPeers, read, s.statusPeers)
	handle(t, structs.MethodOperatorRaftConfig, read, s.operatorRaftConfig)
	handle(t, structs.MethodOperatorRaftRemovePeer, write, s.operatorRaftRemovePeer)
	handle(t, structs.MethodStatusRaftStats, read, s.statusRaftStats)
	for _, m := range []string{structs.MethodStatusLeader, structs.MethodStatusPeers, structs.MethodOperatorRaftConfig, structs.MethodStatusRaftStats} {
		servedHere(t, m)
	}
	handle(t, structs.MethodOperatorServerHealth, read, s.operatorServerHealth)

	handle(t, structs.MethodConnectCARoots, read, s.connectCARoots)
	handle(t, structs.MethodConnectCAConfigurationGet, read, s.connectCAConfigurationGet)
	handle(t, structs.MethodConnectCAConfigurationSet, write, s.connectCAConfigurationSet)
	handle(t, structs.MethodConnectCASign, write, s.connectCASign)

	// Config entries, intentions and discovery chains.
	handle(t, structs.MethodConfigEntryApply, write, s.configEntryApply)
	handle(t, structs.MethodConfigEntryDelete, write, s.configEntryDelete)
	handle(t, structs.MethodConfigEntryGet, read, s.configEntryGet)
	handle(t, structs.MethodConfigEntryList, read, s.configEntryList)
	handle(t, structs.MethodIntentionApply, write, s.intentionApply)
	handle(t, structs.MethodIntentionGet, read, s.intentionGet)
	handle(t, structs.MethodIntentionList, read, s.intentionList)
	handle(t, structs.MethodIntentionMatch, read, s.intentionMatch)
	handle(t, structs.MethodIntentionCheck, read, s.intentionCheck)
	handle(t, structs.MethodDiscoveryChainGet, read, s.discoveryChainGet)

	// The reads behind client agents' proxy configuration.
	s.proxycfgEndpoints(t)

	// Writes a server may send again after an attempt whose outcome it
	// could not learn (see retrySafe in rpc.go).
	retrySafe(t, structs.MethodKVSApply, structs.MethodTxnApply,
		structs.MethodCatalogRegister, structs.MethodCatalogDeregister,
		structs.MethodSessionApply, structs.MethodConfigEntryApply, structs.MethodConfigEntryDelete)
	return t
}

// Compile-time check that handlers keep the shape handle expects.
var _ = func(s *Server) func(context.Context, *structs.DCSpecificRequest, *string) error {
	return s.statusLeader
}
