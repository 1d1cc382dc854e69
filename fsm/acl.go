package fsm

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ACLs: the bootstrap, token, policy and role commands and their snapshot
// records. The bootstrap reset index travels in the index records.

// The ACL records (snapshot version 6 on). Never reused.
const (
	recordACLToken  recordType = 17
	recordACLPolicy recordType = 18
	recordACLRole   recordType = 19
)

// applyACLBootstrap returns the stored token's AccessorID, so that a
// retried bootstrap (deduplicated) answers with the token the first one
// stored.
func applyACLBootstrap(f *FSM, idx uint64, body []byte) any {
	var req structs.ACLBootstrapCommand
	if err := f.decode(body, &req); err != nil {
		return err
	}
	if req.Token == nil {
		return fmt.Errorf("ACL bootstrap without a token")
	}
	if err := f.State().ACLBootstrap(idx, req.ResetIndex, req.Token); err != nil {
		return err
	}
	return req.Token.AccessorID
}

// applyACLTokenSet returns the AccessorID of the first token stored (see
// applyACLBootstrap).
func applyACLTokenSet(f *FSM, idx uint64, body []byte) any {
	var req structs.ACLTokenBatchSetRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	if err := f.State().ACLTokenBatchSet(idx, req.Tokens); err != nil {
		return err
	}
	if len(req.Tokens) == 0 || req.Tokens[0] == nil {
		return ""
	}
	return req.Tokens[0].AccessorID
}

func applyACLTokenDelete(f *FSM, idx uint64, body []byte) any {
	var req structs.ACLTokenBatchDeleteRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	return errOrNil(f.State().ACLTokenBatchDelete(idx, req.TokenIDs))
}

func applyACLPolicySet(f *FSM, idx uint64, body []byte) any {
	var req structs.ACLPolicyBatchSetRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	return errOrNil(f.State().ACLPolicyBatchSet(idx, req.Policies))
}

func applyACLPolicyDelete(f *FSM, idx uint64, body []byte) any {
	var req structs.ACLPolicyBatchDeleteRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	return errOrNil(f.State().ACLPolicyBatchDelete(idx, req.PolicyIDs))
}

func applyACLRoleSet(f *FSM, idx uint64, body []byte) any {
	var req structs.ACLRoleBatchSetRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	return errOrNil(f.State().ACLRoleBatchSet(idx, req.Roles))
}

func applyACLRoleDelete(f *FSM, idx uint64, body []byte) any {
	var req structs.ACLRoleBatchDeleteRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	return errOrNil(f.State().ACLRoleBatchDelete(idx, req.RoleIDs))
}

// writeACLs streams policies, then roles (which link policies), then
// tokens (which link both).
func writeACLs(sn *state.Snapshot, put func(recordType, any) error) error {
	policies, err := sn.ACLPolicies()
	if err != nil {
		return err
	}
	for _, p := range policies {
		if err := put(recordACLPolicy, p); err != nil {
			return err
		}
	}
	roles, err := sn.ACLRoles()
	if err != nil {
		return err
	}
	for _, r := range roles {
		if err := put(recordACLRole, r); err != nil {
			return err
		}
	}
	tokens, err := sn.ACLTokens()
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if err := put(recordACLToken, t); err != nil {
			return err
		}
	}
	return nil
}

// restoreACL reads one ACL record.
func restoreACL(r *state.Restore, t recordType, dec *codec.Decoder) error {
	switch t {
	case recordACLToken:
		var tok structs.ACLToken
		if err := decodeSafe(dec, &tok); err != nil {
			return err
		}
		return r.ACLToken(&tok)
	case recordACLPolicy:
		var p structs.ACLPolicy
		if err := decodeSafe(dec, &p); err != nil {
			return err
		}
		return r.ACLPolicy(&p)
	default:
		var role structs.ACLRole
		if err := decodeSafe(dec, &role); err != nil {
			return err
		}
		return r.ACLRole(&role)
	}
}
