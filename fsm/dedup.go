package fsm

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// recordAppliedRequest carries one remembered client write (requests.go in
// state): without it a restored follower would apply a retried write again.
const recordAppliedRequest recordType = 12

// applyDedup applies the client write inside a DedupRequest at most once:
// a command whose ID was applied within the window returns the first
// application's result and changes nothing. The log orders every attempt
// of a write, so the first one committed wins on every replica alike.
func applyDedup(f *FSM, idx uint64, body []byte) any {
	var req structs.DedupRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	if req.ID == "" || len(req.Command) == 0 {
		return fmt.Errorf("%w: dedup command without an ID or a command", ErrDecode)
	}
	if structs.MessageType(req.Command[0])&^structs.IgnoreUnknownTypeFlag == structs.DedupRequestType {
		return fmt.Errorf("%w: nested dedup command", ErrDecode)
	}
	s := f.State()
	if res, ok, err := s.AppliedRequestResult(req.ID, req.ProposedAt); err != nil {
		return err
	} else if ok {
		f.logger.Debug("request already applied, returning its result", "request_id", req.ID, "index", idx)
		return res.Response()
	}
	resp := f.applyCommand(idx, req.Command)
	if err := s.RecordAppliedRequest(state.AppliedRequest{
		ID: req.ID, ProposedAt: req.ProposedAt, Result: structs.RecordResult(resp),
	}); err != nil {
		return err
	}
	return resp
}

func writeAppliedRequests(snap *state.Snapshot, put func(recordType, any) error) error {
	reqs, err := snap.AppliedRequests()
	if err != nil {
		return err
	}
	for _, r := range reqs {
		if err := put(recordAppliedRequest, r); err != nil {
			return err
		}
	}
	return nil
}

func restoreAppliedRequest(r *state.Restore, dec *codec.Decoder) error {
	var a state.AppliedRequest
	if err := decodeSafe(dec, &a); err != nil {
		return err
	}
	return r.AppliedRequest(a)
}
