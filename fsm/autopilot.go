package fsm

import (
	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// The autopilot configuration: the Autopilot command and its snapshot
// record.

// recordAutopilotConfig carries the autopilot configuration (snapshot
// version 5 on). Never reused.
const recordAutopilotConfig recordType = 15

// applyAutopilot returns true when it wrote (always, without CAS) and
// false when a check-and-set lost.
func applyAutopilot(f *FSM, idx uint64, body []byte) any {
	var req structs.AutopilotSetConfigRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	s := f.State()
	if req.CAS {
		ok, err := s.AutopilotCASConfig(idx, req.Config.ModifyIndex, &req.Config)
		if err != nil {
			return err
		}
		return ok
	}
	if err := s.AutopilotSetConfig(idx, &req.Config); err != nil {
		return err
	}
	return true
}

// writeAutopilotConfig streams the configuration, when there is one.
func writeAutopilotConfig(sn *state.Snapshot, put func(recordType, any) error) error {
	c, err := sn.AutopilotConfig()
	if err != nil || c == nil {
		return err
	}
	return put(recordAutopilotConfig, c)
}

// restoreAutopilotConfig reads the configuration record.
func restoreAutopilotConfig(r *state.Restore, dec *codec.Decoder) error {
	var c structs.AutopilotConfig
	if err := decodeSafe(dec, &c); err != nil {
		return err
	}
	return r.AutopilotConfig(&c)
}
