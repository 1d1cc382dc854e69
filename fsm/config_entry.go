package fsm

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Config entries (and the intentions they hold): the ConfigEntry command
// and the snapshot record.

// recordConfigEntry carries one config entry of any kind, as a
// structs.ConfigEntryEnvelope (the kind first, so restore knows its type).
// Never reused.
const recordConfigEntry recordType = 8

// applyConfigEntry returns whether the write took effect (false for a
// failed CAS) or the error that refused it (an invalid graph changes
// nothing).
func applyConfigEntry(f *FSM, idx uint64, body []byte) any {
	var req structs.ConfigEntryRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	if req.Entry == nil {
		return fmt.Errorf("%w: config entry command without an entry", ErrDecode)
	}
	ok, err := f.State().ConfigEntryApply(idx, &req)
	if err != nil {
		return err
	}
	return ok
}

// writeConfigEntries streams every config entry.
func writeConfigEntries(sn *state.Snapshot, put func(recordType, any) error) error {
	entries, err := sn.ConfigEntries()
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := put(recordConfigEntry, &structs.ConfigEntryEnvelope{Entry: e}); err != nil {
			return err
		}
	}
	return nil
}

// restoreConfigEntry reads one config entry record.
func restoreConfigEntry(r *state.Restore, dec *codec.Decoder) error {
	var env structs.ConfigEntryEnvelope
	if err := decodeSafe(dec, &env); err != nil {
		return err
	}
	if env.Entry == nil {
		return fmt.Errorf("%w: config entry record without an entry", ErrSnapshotFormat)
	}
	return r.ConfigEntry(env.Entry)
}
