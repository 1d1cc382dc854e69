package server

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// maxTxnOps is Consul's limit on operations in one transaction.
const maxTxnOps = 128

func validateTxn(ops structs.TxnOps) error {
	if len(ops) > maxTxnOps {
		return fmt.Errorf("Transaction contains too many operations (%d > %d)", len(ops), maxTxnOps)
	}
	for i, op := range ops {
		if op.IsEmpty() {
			return fmt.Errorf("operation %d: no operation given", i)
		}
	}
	return nil
}

// txnPreCheck applies, per operation, the checks Consul's servers make
// before a transaction reaches Raft, defaulting a service's ID to its name
// and a check's ID to its name as they do. Failures are the transaction's
// errors: it is rolled back before it is proposed. The checks look only at
// the request, so a retry of it answers the same.
func txnPreCheck(ops structs.TxnOps) structs.TxnErrors {
	var errs structs.TxnErrors
	for i, op := range ops {
		if err := preCheckTxnOp(op); err != nil {
			errs = append(errs, &structs.TxnError{OpIndex: i, What: err.Error()})
		}
	}
	return errs
}

func preCheckTxnOp(op *structs.TxnOp) error {
	switch {
	case op.KV != nil:
		return nil
	case op.Node != nil && op.Node.Verb.IsWrite():
		n := &op.Node.Node
		if n.Node == "" {
			return ErrMissingNode
		}
		if n.ID != "" {
			if err := structs.ParseUUID(n.ID); err != nil {
				return fmt.Errorf("Bad node ID: %w", err)
			}
		}
	case op.Service != nil && op.Service.Verb.IsWrite():
		return preApplyService(&op.Service.Service)
	case op.Check != nil && op.Check.Verb.IsWrite():
		c := &op.Check.Check
		if c.CheckID == "" && c.Name != "" {
			c.CheckID = c.Name
		}
		if v := op.Check.Verb; c.Status != "" && (v == structs.CatalogSet || v == structs.CatalogCAS) {
			return validCheckStatus(c.Status)
		}
	}
	return nil
}

func (s *Server) txnApply(ctx context.Context, args *structs.TxnRequest, reply *structs.TxnResponse) error {
	if err := validateTxn(args.Ops); err != nil {
		return err
	}
	authz, errs, err := s.txnACLErrors(ctx, args.Token, args.Ops)
	if err != nil {
		return err
	}
	if errs = append(errs, txnPreCheck(args.Ops)...); len(errs) > 0 {
		reply.Errors = errs
		return nil
	}
	resp, err := s.raftApplyWrite(ctx, structs.TxnRequestType, args)
	if err != nil {
		return err
	}
	if r, ok := resp.(*structs.TxnResponse); ok {
		reply.Results, reply.Errors = filterTxnResults(authz, r.Results), r.Errors
	}
	return nil
}

func (s *Server) txnRead(ctx context.Context, args *structs.TxnReadRequest, reply *structs.TxnResponse) error {
	if err := validateTxn(args.Ops); err != nil {
		return err
	}
	for i, op := range args.Ops {
		if op.IsWrite() {
			return fmt.Errorf("operation %d: %q is a write; use a read-write transaction", i, op.Verb())
		}
	}
	authz, denied, err := s.txnACLErrors(ctx, args.Token, args.Ops)
	if err != nil {
		return err
	}
	if len(denied) > 0 {
		reply.Errors = denied
		return nil
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, results, errs := st.TxnRO(ws, args.Ops)
		reply.Index, reply.Results, reply.Errors = idx, filterTxnResults(authz, results), errs
		return nil
	})
}
