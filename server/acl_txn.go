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
// and the caller learns which operations it may not do. It returns the
// caller's authorizer, for filterTxnResults; with ACLs off it finds
// nothing and returns nil.
func (s *Server) txnACLErrors(ctx context.Context, token string, ops structs.TxnOps) (*acl.Authorizer, structs.TxnErrors, error) {
	if !s.cfg.ACLs.Enabled {
		return nil, nil, nil
	}
	authz, _, err := s.ResolveToken(ctx, token)
	if err != nil {
		return nil, nil, err
	}
	var errs structs.TxnErrors
	for i, op := range ops {
		if err := vetTxnOp(authz, op); err != nil {
			errs = append(errs, &structs.TxnError{OpIndex: i, What: err.Error()})
		}
	}
	return authz, errs, nil
}

// vetTxnOp is the rule of one operation: KV writes as the KV endpoint,
// catalog writes node:write, service:write, or for a check that of what
// it belongs to, and a session delete session:write on the session's
// node. Reads are not refused but filtered from the results
// (filterTxnResults), as Consul does, except the KV checks, whose outcome
// alone tells something of the key: they need key:read.
func vetTxnOp(a *acl.Authorizer, op *structs.TxnOp) error {
	switch {
	case op.KV != nil:
		if v := op.KV.Verb; v == structs.KVGet || v == structs.KVGetTree {
			return nil
		}
		return vetKVOp(a, op.KV.Verb, op.KV.DirEnt.Key)
	case op.Node != nil:
		if !op.Node.Verb.IsWrite() {
			return nil
		}
		return require(a, acl.ResourceNode, acl.AccessWrite, op.Node.Node.Node)
	case op.Service != nil:
		if !op.Service.Verb.IsWrite() {
			return nil
		}
		return require(a, acl.ResourceService, acl.AccessWrite, op.Service.Service.Service)
	case op.Check != nil:
		if !op.Check.Verb.IsWrite() {
			return nil
		}
		c := &op.Check.Check
		if c.ServiceID != "" {
			return require(a, acl.ResourceService, acl.AccessWrite, c.ServiceName)
		}
		return require(a, acl.ResourceNode, acl.AccessWrite, c.Node)
	case op.Session != nil:
		return require(a, acl.ResourceSession, acl.AccessWrite, op.Session.Session.Node)
	}
	return nil
}

// filterTxnResults drops the results the token may not read: a key
// without key:read, a node without node:read, a service or a service's
// check without service:read, a node's check without node:read. Nil a
// (ACLs off) keeps everything.
func filterTxnResults(a *acl.Authorizer, results structs.TxnResults) structs.TxnResults {
	if a == nil {
		return results
	}
	out, _ := keep(results, func(r *structs.TxnResult) bool {
		switch {
		case r.KV != nil:
			return a.KeyRead(r.KV.Key) == acl.Allow
		case r.Node != nil:
			return a.NodeRead(r.Node.Node) == acl.Allow
		case r.Service != nil:
			return a.ServiceRead(r.Service.Service) == acl.Allow
		case r.Check != nil:
			return checkReadable(a, r.Check)
		}
		return true
	})
	return out
}
