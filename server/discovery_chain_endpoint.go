package server

import (
	"context"
	"errors"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/connect/discoverychain"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ErrMissingChainName refuses a discovery chain read without a service.
var ErrMissingChainName = errors.New("Must provide service name")

// discoveryChainGet compiles the discovery chain of a service from the
// stored config entries (blocking): it wakes when any entry the chain
// consults changes, and when the CA's trust domain appears.
func (s *Server) discoveryChainGet(ctx context.Context, args *structs.DiscoveryChainRequest, reply *structs.DiscoveryChainResponse) error {
	if args.Name == "" {
		return ErrMissingChainName
	}
	dc := args.EvaluateInDatacenter
	if dc == "" {
		dc = s.cfg.Datacenter
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		caIdx, td, err := trustDomainFrom(st, ws)
		if err != nil {
			return err
		}
		idx, chain, err := st.ServiceDiscoveryChain(ws, discoverychain.CompileRequest{
			ServiceName:            args.Name,
			EvaluateInDatacenter:   dc,
			EvaluateInTrustDomain:  td,
			OverrideMeshGateway:    args.OverrideMeshGateway,
			OverrideProtocol:       args.OverrideProtocol,
			OverrideConnectTimeout: args.OverrideConnectTimeout,
		})
		reply.Index, reply.Chain = max(idx, caIdx), chain
		return err
	})
}
