package server

import (
	"context"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/structs"
)

// txnACLErrors checks every operation of a transaction against the
// caller's token, as Consul's servers do before proposing it: each denial
// becomes the transaction's error for that operation, so that a
// transaction with one denied operation changes nothing (all or nothing)
// and the caller learns which operations it may not do. With ACLs off it
// finds nothing.
func (s *Server) txnACLErrors(ctx context.Context, token string, ops structs.TxnOps) (structs.TxnErrors, error) {
	if !s.cfg.ACLs.Enabled {
		return nil, nil
	}
	authz, _, err := s.ResolveToken(ctx, token)
	if err != nil {
		return nil, err
	}
	var errs structs.TxnErrors
	for i, op := range ops {
		if err := vetTxnOp(authz, op); err != nil {
			errs = append(errs, &structs.TxnError{OpIndex: i, What: err.Error()})
		}
	}
	return errs, nil
}

// vetTxnOp is the rule of one operation: KV verbs as the KV endpoint,
// catalog writes as a registration (node:write, service:write, a check
// that of what it belongs to), catalog reads the matching read, and a
// session delete session:write on the session's node.
func vetTxnOp(a *acl.Authorizer, op *structs.TxnOp) error {
	switch {
	case op.KV != nil:
		if op.KV.Verb == structs.KVGetTree {
			return require(a, acl.ResourceKey, acl.AccessRead, op.KV.DirEnt.Key)
		}
		return vetKVOp(a, op.KV.Verb, op.KV.DirEnt.Key)
	case op.Node != nil:
		return require(a, acl.ResourceNode, txnAccess(op.Node.Verb), op.Node.Node.Node)
	case op.Service != nil:
		return require(a, acl.ResourceService, txnAccess(op.Service.Verb), op.Service.Service.Service)
	case op.Check != nil:
		c := &op.Check.Check
		if c.ServiceID != "" {
			return require(a, acl.ResourceService, txnAccess(op.Check.Verb), c.ServiceName)
		}
		return require(a, acl.ResourceNode, txnAccess(op.Check.Verb), c.Node)
	case op.Session != nil:
		return require(a, acl.ResourceSession, acl.AccessWrite, op.Session.Session.Node)
	}
	return nil
}

func txnAccess(v structs.CatalogOp) acl.Access {
	if v.IsWrite() {
		return acl.AccessWrite
	}
	return acl.AccessRead
}
