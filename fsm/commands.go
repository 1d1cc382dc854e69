package fsm

import (
	"fmt"

	"github.com/trellis-mesh/trellis/structs"
)

// commandTable is the fixed table of command numbers. A number, once used,
// is never given to another command.
func commandTable() map[structs.MessageType]applyFunc {
	return map[structs.MessageType]applyFunc{
		structs.RegisterRequestType:   applyRegister,
		structs.DeregisterRequestType: applyDeregister,
		structs.KVSRequestType:        applyKVS,
		structs.SessionRequestType:    applySession,
		structs.TxnRequestType:        applyTxn,
		structs.TombstoneRequestType:  applyTombstone,

		// The Connect CA (connect_ca.go).
		structs.ConnectCARequestType:     applyConnectCA,
		structs.ConnectCALeafRequestType: applyConnectCALeaf,

		structs.ConfigEntryRequestType: applyConfigEntry, // config_entry.go

		structs.DedupRequestType: applyDedup, // dedup.go

		structs.CoordinateBatchUpdateType: applyCoordinateBatchUpdate, // coordinates.go

		structs.PreparedQueryRequestType: applyPreparedQuery, // prepared_query.go

		structs.UpdateVirtualIPRequestType: applyUpdateVirtualIP, // virtual_ip.go
		structs.AutopilotRequestType:       applyAutopilot,       // autopilot.go

		// ACLs (acl.go).
		structs.ACLBootstrapRequestType:    applyACLBootstrap,
		structs.ACLTokenSetRequestType:     applyACLTokenSet,
		structs.ACLTokenDeleteRequestType:  applyACLTokenDelete,
		structs.ACLPolicySetRequestType:    applyACLPolicySet,
		structs.ACLPolicyDeleteRequestType: applyACLPolicyDelete,
		structs.ACLRoleSetRequestType:      applyACLRoleSet,
		structs.ACLRoleDeleteRequestType:   applyACLRoleDelete,
	}
}

func applyRegister(f *FSM, idx uint64, body []byte) any {
	var req structs.RegisterRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	if err := f.State().EnsureRegistration(idx, &req); err != nil {
		return err
	}
	return nil
}

func applyDeregister(f *FSM, idx uint64, body []byte) any {
	var req structs.DeregisterRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	s := f.State()
	switch {
	case req.ServiceID != "":
		return errOrNil(s.DeleteService(idx, req.Node, req.ServiceID))
	case req.CheckID != "":
		return errOrNil(s.DeleteCheck(idx, req.Node, req.CheckID))
	default:
		return errOrNil(s.DeleteNode(idx, req.Node))
	}
}

// applyKVS returns a bool for the verbs that can fail a condition (cas,
// lock, unlock, delete-cas) and true for the others, or an error.
func applyKVS(f *FSM, idx uint64, body []byte) any {
	var req structs.KVSRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	s := f.State()
	var ok bool
	var err error
	switch req.Op {
	case structs.KVSet:
		ok, err = true, s.KVSSet(idx, &req.DirEnt)
	case structs.KVCAS:
		ok, err = s.KVSSetCAS(idx, &req.DirEnt)
	case structs.KVLock:
		ok, err = s.KVSLock(idx, &req.DirEnt)
	case structs.KVUnlock:
		ok, err = s.KVSUnlock(idx, &req.DirEnt)
	case structs.KVDelete:
		ok, err = true, s.KVSDelete(idx, req.DirEnt.Key)
	case structs.KVDeleteCAS:
		ok, err = s.KVSDeleteCAS(idx, req.DirEnt.ModifyIndex, req.DirEnt.Key)
	case structs.KVDeleteTree:
		ok, err = true, s.KVSDeleteTree(idx, req.DirEnt.Key)
	default:
		return fmt.Errorf("invalid KVS operation %q", req.Op)
	}
	if err != nil {
		return err
	}
	return ok
}

// applySession returns the session ID on create.
func applySession(f *FSM, idx uint64, body []byte) any {
	var req structs.SessionRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	s := f.State()
	switch req.Op {
	case structs.SessionCreate:
		if err := s.SessionCreate(idx, &req.Session); err != nil {
			return err
		}
		return req.Session.ID
	case structs.SessionDestroy:
		return errOrNil(s.SessionDestroy(idx, req.Session.ID))
	default:
		return fmt.Errorf("invalid session operation %q", req.Op)
	}
}

// applyTxn always returns a *structs.TxnResponse: a failed transaction is an
// outcome for the client, not an apply error.
func applyTxn(f *FSM, idx uint64, body []byte) any {
	var req structs.TxnRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	results, errs := f.State().TxnRW(idx, req.Ops)
	return &structs.TxnResponse{Results: results, Errors: errs}
}

func applyTombstone(f *FSM, idx uint64, body []byte) any {
	var req structs.TombstoneRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	return errOrNil(f.State().ReapTombstones(idx, req.ReapIndex))
}

// errOrNil keeps a nil error from becoming a non-nil interface value in the
// future's Response.
func errOrNil(err error) any {
	if err != nil {
		return err
	}
	return nil
}
