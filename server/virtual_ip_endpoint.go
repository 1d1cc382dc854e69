package server

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Virtual IPs (Consul's Internal.AssignManualServiceVIPs and
// Catalog.VirtualIPForService). Automatic assignments happen inside
// registrations and config entry writes (state/virtual_ip.go).

func (s *Server) internalAssignManualServiceVIPs(ctx context.Context, args *structs.AssignServiceManualVIPsRequest, reply *structs.AssignServiceManualVIPsResponse) error {
	if len(args.ManualVIPs) > structs.MaxManualVirtualIPs {
		return fmt.Errorf("cannot associate more than %d manual virtual IPs with the same service", structs.MaxManualVirtualIPs)
	}
	for _, ip := range args.ManualVIPs {
		if a, err := netip.ParseAddr(ip); err != nil || !a.Is4() {
			return fmt.Errorf("%q is not a valid IPv4 address", ip)
		}
	}
	resp, err := s.raftApplyWrite(ctx, structs.UpdateVirtualIPRequestType, args)
	if err != nil {
		return err
	}
	r, ok := resp.(*structs.AssignServiceManualVIPsResponse)
	if !ok || r == nil {
		return fmt.Errorf("unexpected response to a virtual IP assignment: %T", resp)
	}
	*reply = *r
	return nil
}

func (s *Server) catalogVirtualIPForService(ctx context.Context, args *structs.ServiceSpecificRequest, reply *structs.IndexedServiceVirtualIP) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, v, err := st.ServiceVirtualIP(ws, args.ServiceName)
		if err != nil {
			return err
		}
		reply.Index, reply.VirtualIP = idx, v
		return nil
	})
}
