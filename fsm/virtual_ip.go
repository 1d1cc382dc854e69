package fsm

import (
	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Virtual IPs: the UpdateVirtualIP command and the snapshot record.
// Automatic assignments are made by registrations and config entry writes
// inside their own commands; only manual IPs need one.

// recordVirtualIP carries one service's virtual IP assignment (snapshot
// version 5 on). Never reused.
const recordVirtualIP recordType = 16

// applyUpdateVirtualIP returns a *structs.AssignServiceManualVIPsResponse.
func applyUpdateVirtualIP(f *FSM, idx uint64, body []byte) any {
	var req structs.AssignServiceManualVIPsRequest
	if err := f.decode(body, &req); err != nil {
		return err
	}
	found, from, err := f.State().AssignManualServiceVIPs(idx, req.Service, req.ManualVIPs)
	if err != nil {
		return err
	}
	resp := &structs.AssignServiceManualVIPsResponse{Found: found}
	for _, name := range from {
		resp.UnassignedFrom = append(resp.UnassignedFrom, structs.PeeredServiceName{
			ServiceName: structs.CompoundServiceName{Name: name},
		})
	}
	return resp
}

// writeVirtualIPs streams every assignment.
func writeVirtualIPs(sn *state.Snapshot, put func(recordType, any) error) error {
	all, err := sn.VirtualIPs()
	if err != nil {
		return err
	}
	for _, v := range all {
		if err := put(recordVirtualIP, v); err != nil {
			return err
		}
	}
	return nil
}

// restoreVirtualIP reads one assignment record.
func restoreVirtualIP(r *state.Restore, dec *codec.Decoder) error {
	var v structs.ServiceVirtualIP
	if err := decodeSafe(dec, &v); err != nil {
		return err
	}
	return r.VirtualIP(&v)
}
