package fsm

import (
	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Network coordinates: the CoordinateBatchUpdate command and the snapshot
// record.

// recordCoordinates carries a batch of node coordinates (snapshot version
// 3 on). Never reused.
const recordCoordinates recordType = 13

// coordinateRecordBatch is how many coordinates one snapshot record holds,
// so that a large cluster's coordinates stream in bounded pieces.
const coordinateRecordBatch = 256

// applyCoordinateBatchUpdate stores one batch the leader collected.
func applyCoordinateBatchUpdate(f *FSM, idx uint64, body []byte) any {
	var updates structs.Coordinates
	if err := f.decode(body, &updates); err != nil {
		return err
	}
	return errOrNil(f.State().CoordinateBatchUpdate(idx, updates))
}

// writeCoordinates streams every coordinate, after the nodes they belong
// to.
func writeCoordinates(sn *state.Snapshot, put func(recordType, any) error) error {
	all, err := sn.Coordinates()
	if err != nil {
		return err
	}
	for len(all) > 0 {
		n := min(len(all), coordinateRecordBatch)
		if err := put(recordCoordinates, all[:n]); err != nil {
			return err
		}
		all = all[n:]
	}
	return nil
}

// restoreCoordinates reads one batch record.
func restoreCoordinates(r *state.Restore, dec *codec.Decoder) error {
	var cs structs.Coordinates
	if err := decodeSafe(dec, &cs); err != nil {
		return err
	}
	return r.Coordinates(cs)
}
