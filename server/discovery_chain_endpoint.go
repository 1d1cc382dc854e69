package server

import (
	"context"
	"errors"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/state/query"
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
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		r, err := query.DiscoveryChain(ws, st, args, s.cfg.Datacenter)
		if r != nil {
			reply.Index, reply.Chain = r.Index, r.Chain
		}
		return err
	})
}
