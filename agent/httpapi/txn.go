package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// maxTxnOps is Consul's limit on the operations of one transaction.
const maxTxnOps = 128

// txnMaxReqLen is Consul's default txn_max_req_len (it never goes below
// kv_max_value_size): the largest /v1/txn body accepted.
const txnMaxReqLen = kvMaxValueSize

// txnResponseJSON is the /v1/txn answer: results when the transaction
// committed, errors (and null results) when it was rolled back.
type txnResponseJSON struct {
	Results structs.TxnResults
	Errors  structs.TxnErrors
}

// txn handles PUT /v1/txn. A transaction of only read and check verbs is
// served by Txn.Read with the usual consistency modes; any write sends the
// whole transaction through Txn.Apply. A rolled-back transaction answers
// 409 with its errors.
func (s *Server) txn(w http.ResponseWriter, r *http.Request) (any, error) {
	tooBig := tooLarge(fmt.Sprintf("Request body too large, max size: %d bytes", txnMaxReqLen))
	body, err := readBody(r, txnMaxReqLen)
	if errors.Is(err, errBodyTooLarge) {
		return nil, tooBig
	}
	var in []*txnOpJSON
	if err == nil {
		in, err = decodeTxnBody(body)
	}
	if err != nil {
		return nil, badRequest(fmt.Sprintf("Failed to parse body: %v", err))
	}
	if len(in) > maxTxnOps {
		return nil, tooLarge(fmt.Sprintf("Transaction contains too many operations (%d > %d)", len(in), maxTxnOps))
	}
	ops, writes, err := s.convertTxnOps(in)
	if err != nil {
		return nil, err
	}

	var reply structs.TxnResponse
	if writes == 0 {
		args := structs.TxnReadRequest{Ops: ops}
		if err := s.parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		if err := structs.MethodTxnRead.Call(r.Context(), s.rpc, &args, &reply); err != nil {
			return nil, err
		}
		// A read-only transaction does not block, so Consul sends only
		// these two of the read headers.
		m := reply.QueryMeta
		h := w.Header()
		h.Set("X-Consul-LastContact", fmt.Sprint(max(m.LastContact, 0).Milliseconds()))
		h.Set("X-Consul-KnownLeader", fmt.Sprint(m.KnownLeader))
	} else {
		args := structs.TxnRequest{Ops: ops}
		s.parseWrite(r, &args.WriteRequest)
		if err := structs.MethodTxnApply.Call(r.Context(), s.rpc, &args, &reply); err != nil {
			return nil, err
		}
	}
	if len(reply.Errors) > 0 {
		return withStatus{code: http.StatusConflict, body: txnResponseJSON{Errors: reply.Errors}}, nil
	}
	return txnResponseJSON{Results: reply.Results}, nil
}

// convertTxnOps turns API-format operations into the RPC form and counts
// the writes, refusing (as Consul does) a value over kv_max_value_size and a
// key with a leading '/'. A node without a datacenter is in the agent's.
// Operations of no kind are skipped, as in Consul.
func (s *Server) convertTxnOps(in []*txnOpJSON) (structs.TxnOps, int, error) {
	ops := make(structs.TxnOps, 0, len(in))
	for _, op := range in {
		var out *structs.TxnOp
		switch {
		case op == nil:
		case op.KV != nil:
			kv, err := convertTxnKVOp(op.KV)
			if err != nil {
				return nil, 0, err
			}
			out = &structs.TxnOp{KV: kv}
		case op.Node != nil:
			if op.Node.Node.Datacenter == "" {
				op.Node.Node.Datacenter = s.dc
			}
			out = &structs.TxnOp{Node: op.Node}
		case op.Service != nil:
			out = &structs.TxnOp{Service: op.Service}
		case op.Check != nil:
			out = &structs.TxnOp{Check: op.Check}
		}
		if out != nil {
			ops = append(ops, out)
		}
	}
	writes := 0
	for _, op := range ops {
		if op.IsWrite() {
			writes++
		}
	}
	return ops, writes, nil
}

// convertTxnKVOp turns one API-format KV operation into the RPC form.
func convertTxnKVOp(kv *txnKVOpJSON) (*structs.TxnKVOp, error) {
	if size := len(kv.Value); size > kvMaxValueSize {
		return nil, tooLarge(fmt.Sprintf("Value for key %q is too large (%d > %d bytes)", kv.Key, size, kvMaxValueSize))
	}
	if strings.HasPrefix(kv.Key, "/") {
		return nil, badRequest("Invalid key in transaction: invalid key name, must not begin with a '/'")
	}
	return &structs.TxnKVOp{
		Verb: kv.Verb,
		DirEnt: structs.DirEntry{
			Key:       kv.Key,
			Value:     kv.Value,
			Flags:     kv.Flags,
			Session:   kv.Session,
			RaftIndex: structs.RaftIndex{ModifyIndex: kv.Index},
		},
	}, nil
}
