package server

import (
	"context"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// The reads client agents' proxy configuration needs beyond the public
// API (Consul's ConfigEntry.ResolveServiceConfig and Internal.* methods).
// Each is a blocking query over the same function the server-local data
// sources run, so that a proxy sees the same data whichever agent serves
// it.

// proxycfgEndpoints registers the methods of this file.
func (s *Server) proxycfgEndpoints(t map[string]endpoint) {
	handle(t, structs.MethodResolveServiceConfig, s.resolveServiceConfig)
	handle(t, structs.MethodIntentionUpstreams, s.intentionUpstreams)
	handle(t, structs.MethodGatewayServices, s.gatewayServices)
	handle(t, structs.MethodServicesByKind, s.servicesByKind)
}

func (s *Server) resolveServiceConfig(ctx context.Context, args *structs.ServiceConfigRequest, reply *structs.ServiceConfigResponse) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		r, err := query.ResolveServiceConfig(ws, st, args)
		if err != nil {
			return err
		}
		*reply = *r
		return nil
	})
}

func (s *Server) intentionUpstreams(ctx context.Context, args *structs.ServiceSpecificRequest, reply *structs.ServiceNames) error {
	allow := s.defaultIntentionAllow()
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		r, err := query.IntentionUpstreams(ws, st, args.ServiceName, allow)
		if err != nil {
			return err
		}
		*reply = *r
		return nil
	})
}

func (s *Server) gatewayServices(ctx context.Context, args *structs.ServiceSpecificRequest, reply *structs.IndexedGatewayServices) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		r, err := query.GatewayServices(ws, st, args.ServiceName)
		if err != nil {
			return err
		}
		*reply = *r
		return nil
	})
}

func (s *Server) servicesByKind(ctx context.Context, args *structs.ServiceKindRequest, reply *structs.IndexedCheckServiceNodes) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		r, err := query.ServicesByKind(ws, st, args.Kind)
		if err != nil {
			return err
		}
		*reply = *r
		return nil
	})
}
