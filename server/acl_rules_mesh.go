package server

import (
	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// meshACLRules: config entries, intentions, the Connect CA, discovery
// chains, prepared queries and the reads behind proxy configuration.
func meshACLRules(t map[string]endpoint) {
	configEntryACLRules(t)
	intentionACLRules(t)
	preparedQueryACLRules(t)

	authorizeWith(t, structs.MethodConnectCAConfigurationGet, func(_ *state.Store, a *acl.Authorizer, _ *structs.DCSpecificRequest) error {
		return require(a, acl.ResourceOperator, acl.AccessRead, "")
	})
	authorizeWith(t, structs.MethodConnectCAConfigurationSet, func(_ *state.Store, a *acl.Authorizer, _ *structs.CARequest) error {
		return require(a, acl.ResourceOperator, acl.AccessWrite, "")
	})
	authorizeWith(t, structs.MethodConnectCASign, vetCASign)
	authorizeWith(t, structs.MethodDiscoveryChainGet, func(_ *state.Store, a *acl.Authorizer, args *structs.DiscoveryChainRequest) error {
		return require(a, acl.ResourceService, acl.AccessRead, args.Name)
	})
	authorizeWith(t, structs.MethodResolveServiceConfig, func(_ *state.Store, a *acl.Authorizer, args *structs.ServiceConfigRequest) error {
		return require(a, acl.ResourceService, acl.AccessRead, args.Name)
	})
	filterWith(t, structs.MethodIntentionUpstreams, func(a *acl.Authorizer, _ *structs.ServiceSpecificRequest, r *structs.ServiceNames) (f bool) {
		r.Services, f = keep(r.Services, func(n string) bool { return a.ServiceRead(n) == acl.Allow })
		return f
	})
	authorizeWith(t, structs.MethodGatewayServices, func(_ *state.Store, a *acl.Authorizer, args *structs.ServiceSpecificRequest) error {
		return require(a, acl.ResourceService, acl.AccessRead, args.ServiceName)
	})
	filterWith(t, structs.MethodGatewayServices, func(a *acl.Authorizer, _ *structs.ServiceSpecificRequest, r *structs.IndexedGatewayServices) (f bool) {
		r.Services, f = keep(r.Services, func(g *structs.GatewayService) bool { return a.ServiceRead(g.Service) == acl.Allow })
		return f
	})
}

// vetCASign: a leaf is signed only for an identity the token may write,
// the service named by the CSR's SPIFFE ID, as Consul checks. A CSR that
// names none is left to the handler, which refuses it with Consul's text.
func vetCASign(_ *state.Store, a *acl.Authorizer, args *structs.CASignRequest) error {
	csr, err := ca.ParseCSR(args.CSR)
	if err != nil || len(csr.URIs) != 1 {
		return nil //nolint:nilerr // the handler refuses the CSR with Consul's text
	}
	uri, err := connect.ParseCertURI(csr.URIs[0])
	if err != nil {
		return nil //nolint:nilerr // as above
	}
	if svc, ok := uri.(*connect.SpiffeIDService); ok {
		return require(a, acl.ResourceService, acl.AccessWrite, svc.Service)
	}
	return nil
}

func configEntryACLRules(t map[string]endpoint) {
	vetWrite := func(_ *state.Store, a *acl.Authorizer, args *structs.ConfigEntryRequest) error {
		if args.Entry == nil {
			return nil // refused by the handler
		}
		return configEntryCanWrite(a, args.Entry.GetKind(), args.Entry.GetName())
	}
	authorizeWith(t, structs.MethodConfigEntryApply, vetWrite)
	authorizeWith(t, structs.MethodConfigEntryDelete, vetWrite)
	authorizeWith(t, structs.MethodConfigEntryGet, func(_ *state.Store, a *acl.Authorizer, args *structs.ConfigEntryQuery) error {
		return configEntryCanRead(a, args.Kind, args.Name)
	})
	filterWith(t, structs.MethodConfigEntryList, func(a *acl.Authorizer, _ *structs.ConfigEntryQuery, r *structs.IndexedConfigEntries) (f bool) {
		r.Entries, f = keep(r.Entries, func(e structs.ConfigEntry) bool {
			return configEntryCanRead(a, e.GetKind(), e.GetName()) == nil
		})
		return f
	})
	authorizeWith(t, structs.MethodExportedServicesList, func(_ *state.Store, a *acl.Authorizer, _ *structs.ExportedServicesQuery) error {
		return require(a, acl.ResourceMesh, acl.AccessRead, "")
	})
}

// configEntryCanRead is Consul's per kind: a service's entries need
// service:read on it, its intentions intention:read, proxy-defaults and
// mesh anyone, the rest mesh:read (which operator:read grants).
func configEntryCanRead(a *acl.Authorizer, kind, name string) error {
	switch kind {
	case structs.ServiceDefaults, structs.ServiceRouter, structs.ServiceSplitter, structs.ServiceResolver,
		structs.IngressGateway, structs.TerminatingGateway, structs.APIGateway:
		return require(a, acl.ResourceService, acl.AccessRead, name)
	case structs.ServiceIntentions:
		return require(a, acl.ResourceIntention, acl.AccessRead, name)
	case structs.ProxyDefaults, structs.MeshConfig:
		return nil
	}
	return require(a, acl.ResourceMesh, acl.AccessRead, "")
}

// configEntryCanWrite: a service's entries need service:write on it, its
// intentions intention:write, gateways and mesh-wide kinds mesh:write.
func configEntryCanWrite(a *acl.Authorizer, kind, name string) error {
	switch kind {
	case structs.ServiceDefaults, structs.ServiceRouter, structs.ServiceSplitter, structs.ServiceResolver:
		return require(a, acl.ResourceService, acl.AccessWrite, name)
	case structs.ServiceIntentions:
		return require(a, acl.ResourceIntention, acl.AccessWrite, name)
	}
	return require(a, acl.ResourceMesh, acl.AccessWrite, "")
}

func intentionACLRules(t map[string]endpoint) {
	authorizeWith(t, structs.MethodIntentionApply, func(st *state.Store, a *acl.Authorizer, args *structs.IntentionRequest) error {
		if args.Intention == nil {
			return nil // refused by the handler
		}
		if args.Intention.ID != "" {
			_, _, old, err := st.IntentionGetByID(nil, args.Intention.ID)
			if err != nil {
				return err
			}
			if old != nil {
				if err := require(a, acl.ResourceIntention, acl.AccessWrite, old.DestinationName); err != nil {
					return err
				}
			}
		}
		if args.Op == structs.IntentionOpDelete && args.Intention.DestinationName == "" {
			return nil
		}
		return require(a, acl.ResourceIntention, acl.AccessWrite, args.Intention.DestinationName)
	})
	authorizeWith(t, structs.MethodIntentionGet, func(st *state.Store, a *acl.Authorizer, args *structs.IntentionQueryRequest) error {
		if args.Exact != nil {
			return require(a, acl.ResourceIntention, acl.AccessRead, args.Exact.DestinationName)
		}
		_, _, ixn, err := st.IntentionGetByID(nil, args.IntentionID)
		if err != nil || ixn == nil {
			return err
		}
		return require(a, acl.ResourceIntention, acl.AccessRead, ixn.DestinationName)
	})
	filterWith(t, structs.MethodIntentionList, func(a *acl.Authorizer, _ *structs.DCSpecificRequest, r *structs.IndexedIntentions) (f bool) {
		r.Intentions, f = keep(r.Intentions, func(i *structs.Intention) bool { return a.IntentionRead(i.DestinationName) == acl.Allow })
		return f
	})
	authorizeWith(t, structs.MethodIntentionMatch, func(_ *state.Store, a *acl.Authorizer, args *structs.IntentionQueryRequest) error {
		if args.Match == nil {
			return nil
		}
		for _, n := range args.Match.Names {
			if err := require(a, acl.ResourceIntention, acl.AccessRead, n); err != nil {
				return err
			}
		}
		return nil
	})
	authorizeWith(t, structs.MethodIntentionCheck, func(_ *state.Store, a *acl.Authorizer, args *structs.IntentionQueryRequest) error {
		if args.Check == nil {
			return nil
		}
		return require(a, acl.ResourceService, acl.AccessRead, args.Check.DestinationName)
	})
}

// preparedQueryACLRules: a named query (a template's name is its prefix)
// needs query:write on the name to be created, changed or deleted, and
// query:read to be read; an unnamed one is managed by whoever holds its
// ID, and listed only to tokens that may manage ACLs, as Consul.
func preparedQueryACLRules(t map[string]endpoint) {
	authorizeWith(t, structs.MethodPreparedQueryApply, func(st *state.Store, a *acl.Authorizer, args *structs.PreparedQueryRequest) error {
		if args.Query == nil {
			return nil
		}
		if args.Op != structs.PreparedQueryCreate && args.Query.ID != "" {
			_, old, err := st.PreparedQueryGet(nil, args.Query.ID)
			if err != nil {
				return err
			}
			if old != nil && old.Name != "" {
				if err := require(a, acl.ResourceQuery, acl.AccessWrite, old.Name); err != nil {
					return err
				}
			}
		}
		if args.Op != structs.PreparedQueryDelete && args.Query.Name != "" {
			return require(a, acl.ResourceQuery, acl.AccessWrite, args.Query.Name)
		}
		return nil
	})
	readable := func(a *acl.Authorizer, q *structs.PreparedQuery) bool {
		if q.Name == "" {
			return a.ACLWrite() == acl.Allow
		}
		return a.QueryRead(q.Name) == acl.Allow
	}
	filterQueries := func(a *acl.Authorizer, r *structs.IndexedPreparedQueries) (f bool) {
		r.Queries, f = keep(r.Queries, func(q *structs.PreparedQuery) bool { return readable(a, q) })
		r.Queries = redactQueries(a, r.Queries)
		return f
	}
	filterWith(t, structs.MethodPreparedQueryList, func(a *acl.Authorizer, _ *structs.DCSpecificRequest, r *structs.IndexedPreparedQueries) bool {
		return filterQueries(a, r)
	})
	authorizeWith(t, structs.MethodPreparedQueryGet, func(st *state.Store, a *acl.Authorizer, args *structs.PreparedQuerySpecificRequest) error {
		_, q, err := st.PreparedQueryGet(nil, args.QueryID)
		if err != nil || q == nil || q.Name == "" {
			return err
		}
		return require(a, acl.ResourceQuery, acl.AccessRead, q.Name)
	})
	filterWith(t, structs.MethodPreparedQueryGet, func(a *acl.Authorizer, _ *structs.PreparedQuerySpecificRequest, r *structs.IndexedPreparedQueries) bool {
		r.Queries = redactQueries(a, r.Queries)
		return false
	})
	// Execute decides in its handler, with the query's own token when it
	// has one (preparedQueryExecute).
	aclInHandlers(t, structs.MethodPreparedQueryExecute)
	authorizeWith(t, structs.MethodPreparedQueryExplain, func(st *state.Store, a *acl.Authorizer, args *structs.PreparedQueryExecuteRequest) error {
		name := args.QueryIDOrName
		_, q, err := st.PreparedQueryGet(nil, args.QueryIDOrName)
		if err != nil {
			return err
		}
		if q != nil {
			name = q.Name
		}
		if name == "" {
			return nil
		}
		return require(a, acl.ResourceQuery, acl.AccessRead, name)
	})
	filterWith(t, structs.MethodPreparedQueryExplain, func(a *acl.Authorizer, _ *structs.PreparedQueryExecuteRequest, r *structs.PreparedQueryExplainResponse) bool {
		if a.ACLWrite() != acl.Allow {
			r.Query = *r.Query.Redacted()
		}
		return false
	})
}

// redactQueries hides the queries' tokens from a token that may not
// write ACLs, as Consul does; it never modifies qs, which may be shared
// with the store.
func redactQueries(a *acl.Authorizer, qs structs.PreparedQueries) structs.PreparedQueries {
	if a.ACLWrite() == acl.Allow {
		return qs
	}
	out := make(structs.PreparedQueries, len(qs))
	for i, q := range qs {
		out[i] = q.Redacted()
	}
	return out
}

// filterQueryNodes keeps the instances whose node and service a may read.
func filterQueryNodes(a *acl.Authorizer, nodes structs.CheckServiceNodes) (structs.CheckServiceNodes, bool) {
	return keep(nodes, func(n structs.CheckServiceNode) bool {
		return n.Node != nil && n.Service != nil &&
			a.NodeRead(n.Node.Node) == acl.Allow && a.ServiceRead(n.Service.Service) == acl.Allow
	})
}

// operatorACLRules: Raft, autopilot and usage are operator:read to read
// and operator:write to change; the gossip keyring is keyring; snapshots
// hold every secret and need acl:write.
func operatorACLRules(t map[string]endpoint) {
	opRead := func(_ *state.Store, a *acl.Authorizer, _ *structs.DCSpecificRequest) error {
		return require(a, acl.ResourceOperator, acl.AccessRead, "")
	}
	authorizeWith(t, structs.MethodOperatorRaftConfig, opRead)
	authorizeWith(t, structs.MethodOperatorServerHealth, opRead)
	authorizeWith(t, structs.MethodOperatorAutopilotState, opRead)
	authorizeWith(t, structs.MethodOperatorAutopilotGetConfiguration, opRead)
	authorizeWith(t, structs.MethodOperatorUsage, opRead)
	authorizeWith(t, structs.MethodOperatorRaftRemovePeer, func(_ *state.Store, a *acl.Authorizer, _ *structs.RaftRemovePeerRequest) error {
		return require(a, acl.ResourceOperator, acl.AccessWrite, "")
	})
	authorizeWith(t, structs.MethodOperatorAutopilotSetConfiguration, func(_ *state.Store, a *acl.Authorizer, _ *structs.AutopilotSetConfigRequest) error {
		return require(a, acl.ResourceOperator, acl.AccessWrite, "")
	})
	authorizeWith(t, structs.MethodOperatorRaftTransferLeader, func(_ *state.Store, a *acl.Authorizer, _ *structs.RaftTransferLeaderRequest) error {
		return require(a, acl.ResourceOperator, acl.AccessWrite, "")
	})
	authorizeWith(t, structs.MethodInternalKeyringOperation, func(_ *state.Store, a *acl.Authorizer, args *structs.KeyringRequest) error {
		if args.Operation == structs.KeyringList {
			return require(a, acl.ResourceKeyring, acl.AccessRead, "")
		}
		return require(a, acl.ResourceKeyring, acl.AccessWrite, "")
	})
	snapshot := func(a *acl.Authorizer) error {
		if a.Snapshot() != acl.Allow {
			return a.Denied(acl.ResourceACL, acl.AccessWrite, "")
		}
		return nil
	}
	authorizeWith(t, structs.MethodSnapshotSave, func(_ *state.Store, a *acl.Authorizer, _ *structs.SnapshotSaveRequest) error {
		return snapshot(a)
	})
	authorizeWith(t, structs.MethodSnapshotRestore, func(_ *state.Store, a *acl.Authorizer, _ *structs.SnapshotRestoreRequest) error {
		return snapshot(a)
	})
}
