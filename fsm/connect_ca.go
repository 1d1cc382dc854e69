package fsm

import (
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// The Connect CA commands and snapshot records.

// Snapshot record numbers of the CA (never reused).
const (
	// recordCAConfig carries the CA configuration (with its cluster ID).
	recordCAConfig recordType = 9
	// recordCARoot carries one root together with its private key, so
	// that a server restored from a snapshot can sign.
	recordCARoot recordType = 10
	// recordCASerial carries the next leaf serial number.
	recordCASerial recordType = 11
)

// caRootRecord is a root and its signing key (nil when it has none).
type caRootRecord struct {
	Root *structs.CARoot
	Key  *structs.CASigningKey
}

// caSerialRecord is the serial counter.
type caSerialRecord struct {
	Next uint64
}

// applyConnectCA returns true/false for set-roots-config (false: the
// roots check-and-set lost), nil for the others, or an error.
func applyConnectCA(f *FSM, idx uint64, body []byte) any {
	var req structs.CARequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	s := f.State()
	switch req.Op {
	case structs.CAOpSetConfig:
		return errOrNil(s.CASetConfig(idx, req.Config))
	case structs.CAOpSetRootsAndConfig:
		ok, err := s.CASetRootsAndConfig(idx, &req)
		if err != nil {
			return err
		}
		return ok
	case structs.CAOpPruneRoots:
		ids := make([]string, 0, len(req.Roots))
		for _, r := range req.Roots {
			if r != nil {
				ids = append(ids, r.ID)
			}
		}
		return errOrNil(s.CAPruneRoots(idx, ids))
	default:
		return fmt.Errorf("invalid CA operation %q", req.Op)
	}
}

// applyConnectCALeaf returns a *structs.CASerialBlock.
func applyConnectCALeaf(f *FSM, idx uint64, body []byte) any {
	var req structs.CALeafRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	if req.Op != structs.CALeafOpReserveSerials {
		return fmt.Errorf("invalid CA leaf operation %q", req.Op)
	}
	first, err := f.State().CAReserveSerials(idx, req.Count)
	if err != nil {
		return err
	}
	return &structs.CASerialBlock{First: first, Count: req.Count, Index: idx}
}

// writeConnectCA streams the CA tables: config, roots with keys, serial.
func writeConnectCA(sn *state.Snapshot, put func(recordType, any) error) error {
	cfg, err := sn.CAConfig()
	if err != nil {
		return err
	}
	if cfg != nil {
		if err := put(recordCAConfig, cfg); err != nil {
			return err
		}
	}
	roots, keys, err := sn.CARoots()
	if err != nil {
		return err
	}
	for i, r := range roots {
		if err := put(recordCARoot, caRootRecord{Root: r, Key: keys[i]}); err != nil {
			return err
		}
	}
	if next := sn.CANextSerial(); next > 1 {
		return put(recordCASerial, caSerialRecord{Next: next})
	}
	return nil
}

// restoreConnectCA restores one CA record.
func restoreConnectCA(r *state.Restore, t recordType, dec *codec.Decoder) error {
	switch t {
	case recordCAConfig:
		var c structs.CAConfiguration
		if err := decodeSafe(dec, &c); err != nil {
			return err
		}
		return r.CAConfig(&c)
	case recordCARoot:
		var rec caRootRecord
		if err := decodeSafe(dec, &rec); err != nil {
			return err
		}
		if rec.Root == nil {
			return fmt.Errorf("%w: CA root record without a root", ErrSnapshotFormat)
		}
		return r.CARoot(rec.Root, rec.Key)
	case recordCASerial:
		var rec caSerialRecord
		if err := decodeSafe(dec, &rec); err != nil {
			return err
		}
		return r.CASerial(rec.Next)
	}
	return fmt.Errorf("%w: unknown record type %d", ErrSnapshotFormat, t)
}
