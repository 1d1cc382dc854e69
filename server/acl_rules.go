package server

import (
	"maps"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// aclRules declares, for every method, what Consul's servers ask of the
// caller's token (the "ACL Required" of each HTTP endpoint of Consul's
// API documentation): a check before the handler, which denies with
// Consul's 403 text, or a filter of the reply, which drops what the token
// may not read. Catalog, health, KV and session rules are here; the
// connect, config and operator rules are in acl_rules_mesh.go.
func aclRules(t map[string]endpoint) {
	noACL(t, structs.MethodStatusLeader, structs.MethodStatusPeers, structs.MethodStatusRaftStats,
		structs.MethodCoordinateListDatacenters, structs.MethodCatalogListDatacenters,
		structs.MethodConnectCARoots)
	aclInHandlers(t, structs.MethodACLBootstrap, structs.MethodACLTokenSet, structs.MethodACLTokenClone,
		structs.MethodACLTokenDelete, structs.MethodACLTokenRead, structs.MethodACLTokenList,
		structs.MethodACLPolicySet, structs.MethodACLPolicyDelete, structs.MethodACLPolicyRead,
		structs.MethodACLPolicyList, structs.MethodACLRoleSet, structs.MethodACLRoleDelete,
		structs.MethodACLRoleRead, structs.MethodACLRoleList, structs.MethodACLAuthorize,
		// A token may always resolve itself and what it links.
		structs.MethodACLTokenResolve, structs.MethodACLPolicyResolve, structs.MethodACLRoleResolve,
		// Every operation of a transaction is checked, and the denials
		// are its errors (txnACLErrors), as Consul answers them.
		structs.MethodTxnApply, structs.MethodTxnRead)

	catalogACLRules(t)
	kvACLRules(t)
	sessionACLRules(t)
	meshACLRules(t)
	operatorACLRules(t)
}

func catalogACLRules(t map[string]endpoint) {
	authorizeWith(t, structs.MethodCatalogRegister, vetRegister)
	authorizeWith(t, structs.MethodCatalogDeregister, vetDeregister)
	filterWith(t, structs.MethodCatalogListNodes, func(a *acl.Authorizer, _ *structs.DCSpecificRequest, r *structs.IndexedNodes) (f bool) {
		r.Nodes, f = keep(r.Nodes, func(n *structs.Node) bool { return a.NodeRead(n.Node) == acl.Allow })
		return f
	})
	filterWith(t, structs.MethodCatalogListServices, func(a *acl.Authorizer, _ *structs.DCSpecificRequest, r *structs.IndexedServices) bool {
		removed := false
		for name := range r.Services {
			if a.ServiceRead(name) != acl.Allow {
				if !removed {
					r.Services = maps.Clone(r.Services)
				}
				removed = true
				delete(r.Services, name)
			}
		}
		return removed
	})
	filterWith(t, structs.MethodCatalogServiceNodes, func(a *acl.Authorizer, _ *structs.ServiceSpecificRequest, r *structs.IndexedServiceNodes) (f bool) {
		r.ServiceNodes, f = keep(r.ServiceNodes, func(n *structs.ServiceNode) bool {
			return a.NodeRead(n.Node) == acl.Allow && a.ServiceRead(n.ServiceName) == acl.Allow
		})
		return f
	})
	filterWith(t, structs.MethodCatalogNodeServices, func(a *acl.Authorizer, _ *structs.NodeSpecificRequest, r *structs.IndexedNodeServices) bool {
		ns := r.NodeServices
		if ns == nil || ns.Node == nil {
			return false
		}
		if a.NodeRead(ns.Node.Node) != acl.Allow {
			r.NodeServices = nil
			return true
		}
		out := &structs.NodeServices{Node: ns.Node, Services: make(map[string]*structs.NodeService, len(ns.Services))}
		for id, svc := range ns.Services {
			if a.ServiceRead(svc.Service) == acl.Allow {
				out.Services[id] = svc
			}
		}
		r.NodeServices = out
		return len(out.Services) != len(ns.Services)
	})
	filterWith(t, structs.MethodHealthServiceNodes, filterCheckServiceNodes[structs.ServiceSpecificRequest])
	filterWith(t, structs.MethodServicesByKind, filterCheckServiceNodes[structs.ServiceKindRequest])
	filterWith(t, structs.MethodHealthServiceChecks, filterChecks[structs.ServiceSpecificRequest])
	filterWith(t, structs.MethodHealthNodeChecks, filterChecks[structs.NodeSpecificRequest])
	filterWith(t, structs.MethodHealthChecksInState, filterChecks[structs.ChecksInStateRequest])

	authorizeWith(t, structs.MethodCoordinateUpdate, func(_ *state.Store, a *acl.Authorizer, args *structs.CoordinateUpdateRequest) error {
		return require(a, acl.ResourceNode, acl.AccessWrite, args.Node)
	})
	authorizeWith(t, structs.MethodCoordinateNode, func(_ *state.Store, a *acl.Authorizer, args *structs.NodeSpecificRequest) error {
		return require(a, acl.ResourceNode, acl.AccessRead, args.Node)
	})
	// A client agent asking for its TLS certificate shows a token that may
	// write its own node, as Consul's AutoEncrypt.Sign requires.
	authorizeWith(t, structs.MethodAutoEncryptSign, func(_ *state.Store, a *acl.Authorizer, args *structs.AutoEncryptSignRequest) error {
		return require(a, acl.ResourceNode, acl.AccessWrite, args.Node)
	})
	filterWith(t, structs.MethodCoordinateListNodes, func(a *acl.Authorizer, _ *structs.DCSpecificRequest, r *structs.IndexedCoordinates) (f bool) {
		r.Coordinates, f = keep(r.Coordinates, func(c *structs.Coordinate) bool { return a.NodeRead(c.Node) == acl.Allow })
		return f
	})
	authorizeWith(t, structs.MethodInternalAssignManualServiceVIPs, func(_ *state.Store, a *acl.Authorizer, args *structs.AssignServiceManualVIPsRequest) error {
		return require(a, acl.ResourceService, acl.AccessWrite, args.Service)
	})
	authorizeWith(t, structs.MethodCatalogVirtualIPForService, func(_ *state.Store, a *acl.Authorizer, args *structs.ServiceSpecificRequest) error {
		return require(a, acl.ResourceService, acl.AccessRead, args.ServiceName)
	})
}

// filterCheckServiceNodes keeps the instances whose node and service the
// token may read, as Consul's health endpoints.
func filterCheckServiceNodes[A any](a *acl.Authorizer, _ *A, r *structs.IndexedCheckServiceNodes) (f bool) {
	r.Nodes, f = keep(r.Nodes, func(n structs.CheckServiceNode) bool {
		return n.Node != nil && n.Service != nil &&
			a.NodeRead(n.Node.Node) == acl.Allow && a.ServiceRead(n.Service.Service) == acl.Allow
	})
	return f
}

// filterChecks keeps the checks the token may read: a node's checks need
// node:read, a service's checks service:read too.
func filterChecks[A any](a *acl.Authorizer, _ *A, r *structs.IndexedHealthChecks) (f bool) {
	r.HealthChecks, f = keep(r.HealthChecks, func(c *structs.HealthCheck) bool { return checkReadable(a, c) })
	return f
}

func checkReadable(a *acl.Authorizer, c *structs.HealthCheck) bool {
	if a.NodeRead(c.Node) != acl.Allow {
		return false
	}
	return c.ServiceID == "" || a.ServiceRead(c.ServiceName) == acl.Allow
}

// vetRegister is Consul's check of a registration: node:write when it
// creates or changes the node (so that a service can re-post its node's
// unchanged details without it), service:write on the service (and, for
// a proxy, on the service it stands for) and on a service it replaces,
// and for each check the rule of what it belongs to.
func vetRegister(st *state.Store, a *acl.Authorizer, args *structs.RegisterRequest) error {
	_, node, err := st.GetNode(nil, args.Node)
	if err != nil {
		return err
	}
	if registerChangesNode(args, node) {
		if err := require(a, acl.ResourceNode, acl.AccessWrite, args.Node); err != nil {
			return err
		}
	}
	if svc := args.Service; svc != nil {
		if err := vetServiceWrite(a, svc); err != nil {
			return err
		}
		if svc.ID != "" {
			old, err := st.NodeService(nil, args.Node, svc.ID)
			if err != nil {
				return err
			}
			if old != nil && old.Service != svc.Service {
				if err := require(a, acl.ResourceService, acl.AccessWrite, old.Service); err != nil {
					return err
				}
			}
		}
	}
	checks := args.Checks
	if args.Check != nil {
		checks = append(structs.HealthChecks{args.Check}, checks...)
	}
	for _, c := range checks {
		if err := vetCheckWrite(st, a, args.Node, args.Service, c); err != nil {
			return err
		}
	}
	return nil
}

// registerChangesNode reports whether a registration would create node or
// change what is stored of it.
func registerChangesNode(args *structs.RegisterRequest, node *structs.Node) bool {
	if node == nil {
		return true
	}
	if args.SkipNodeUpdate {
		return false
	}
	return args.Address != node.Address ||
		(args.ID != "" && args.ID != node.ID) ||
		(args.TaggedAddresses != nil && !maps.Equal(args.TaggedAddresses, node.TaggedAddresses)) ||
		(args.NodeMeta != nil && !maps.Equal(args.NodeMeta, node.Meta))
}

func vetServiceWrite(a *acl.Authorizer, svc *structs.NodeService) error {
	if err := require(a, acl.ResourceService, acl.AccessWrite, svc.Service); err != nil {
		return err
	}
	if svc.Kind == structs.ServiceKindConnectProxy && svc.Proxy.DestinationServiceName != "" {
		return require(a, acl.ResourceService, acl.AccessWrite, svc.Proxy.DestinationServiceName)
	}
	return nil
}

// vetCheckWrite: a node's check needs node:write, a service's check
// service:write on that service (the one registered with it, or the one
// stored).
func vetCheckWrite(st *state.Store, a *acl.Authorizer, node string, with *structs.NodeService, c *structs.HealthCheck) error {
	if c.ServiceID == "" {
		return require(a, acl.ResourceNode, acl.AccessWrite, node)
	}
	if with != nil && (with.ID == c.ServiceID || (with.ID == "" && with.Service == c.ServiceID)) {
		return nil // checked with the service
	}
	svc, err := st.NodeService(nil, node, c.ServiceID)
	if err != nil {
		return err
	}
	if svc == nil {
		// Consul refuses it later as an unknown service; a name is all
		// there is to check now.
		return require(a, acl.ResourceService, acl.AccessWrite, c.ServiceName)
	}
	return require(a, acl.ResourceService, acl.AccessWrite, svc.Service)
}

// vetDeregister is Consul's: a service needs service:write on it, a
// check the rule of what it belongs to, a whole node node:write.
func vetDeregister(st *state.Store, a *acl.Authorizer, args *structs.DeregisterRequest) error {
	switch {
	case args.ServiceID != "":
		svc, err := st.NodeService(nil, args.Node, args.ServiceID)
		if err != nil || svc == nil {
			return err
		}
		return require(a, acl.ResourceService, acl.AccessWrite, svc.Service)
	case args.CheckID != "":
		_, checks, err := st.NodeChecks(nil, args.Node)
		if err != nil {
			return err
		}
		for _, c := range checks {
			if string(c.CheckID) == args.CheckID {
				return vetCheckWrite(st, a, args.Node, nil, c)
			}
		}
		return nil
	}
	return require(a, acl.ResourceNode, acl.AccessWrite, args.Node)
}

func kvACLRules(t map[string]endpoint) {
	authorizeWith(t, structs.MethodKVSApply, func(_ *state.Store, a *acl.Authorizer, args *structs.KVSRequest) error {
		return vetKVOp(a, args.Op, args.DirEnt.Key)
	})
	authorizeWith(t, structs.MethodKVSGet, func(_ *state.Store, a *acl.Authorizer, args *structs.KeyRequest) error {
		return require(a, acl.ResourceKey, acl.AccessRead, args.Key)
	})
	filterWith(t, structs.MethodKVSList, func(a *acl.Authorizer, _ *structs.KeyListRequest, r *structs.IndexedDirEntries) (f bool) {
		r.Entries, f = keep(r.Entries, func(e *structs.DirEntry) bool { return a.KeyRead(e.Key) == acl.Allow })
		return f
	})
	filterWith(t, structs.MethodKVSListKeys, func(a *acl.Authorizer, _ *structs.KeyListRequest, r *structs.IndexedKeyList) (f bool) {
		r.Keys, f = keep(r.Keys, func(k string) bool { return a.KeyRead(k) == acl.Allow })
		return f
	})
}

// vetKVOp is the rule of one KV verb: a recursive delete needs write on
// everything under the prefix, other writes key:write, reads key:read
// (a get-tree is filtered instead).
func vetKVOp(a *acl.Authorizer, op structs.KVOp, key string) error {
	switch {
	case op == structs.KVDeleteTree:
		if a.KeyWritePrefix(key) != acl.Allow {
			return a.Denied(acl.ResourceKey, acl.AccessWrite, key)
		}
		return nil
	case op == structs.KVGetTree:
		return nil
	case op.IsWrite():
		return require(a, acl.ResourceKey, acl.AccessWrite, key)
	}
	return require(a, acl.ResourceKey, acl.AccessRead, key)
}

func sessionACLRules(t map[string]endpoint) {
	authorizeWith(t, structs.MethodSessionApply, func(st *state.Store, a *acl.Authorizer, args *structs.SessionRequest) error {
		node := args.Session.Node
		if args.Op == structs.SessionDestroy {
			_, sess, err := st.SessionGet(nil, args.Session.ID)
			if err != nil || sess == nil {
				return err
			}
			node = sess.Node
		}
		return require(a, acl.ResourceSession, acl.AccessWrite, node)
	})
	authorizeWith(t, structs.MethodSessionRenew, func(st *state.Store, a *acl.Authorizer, args *structs.SessionSpecificRequest) error {
		_, sess, err := st.SessionGet(nil, args.SessionID)
		if err != nil || sess == nil {
			return err
		}
		return require(a, acl.ResourceSession, acl.AccessWrite, sess.Node)
	})
	filterSessions := func(a *acl.Authorizer, r *structs.IndexedSessions) (f bool) {
		r.Sessions, f = keep(r.Sessions, func(s *structs.Session) bool { return a.SessionRead(s.Node) == acl.Allow })
		return f
	}
	filterWith(t, structs.MethodSessionGet, func(a *acl.Authorizer, _ *structs.SessionSpecificRequest, r *structs.IndexedSessions) bool {
		return filterSessions(a, r)
	})
	filterWith(t, structs.MethodSessionList, func(a *acl.Authorizer, _ *structs.DCSpecificRequest, r *structs.IndexedSessions) bool {
		return filterSessions(a, r)
	})
	filterWith(t, structs.MethodSessionNodeSessions, func(a *acl.Authorizer, _ *structs.NodeSpecificRequest, r *structs.IndexedSessions) bool {
		return filterSessions(a, r)
	})
}
