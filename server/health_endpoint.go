package server

import (
	"context"
	"errors"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

func (s *Server) healthServiceNodes(ctx context.Context, args *structs.ServiceSpecificRequest, reply *structs.IndexedCheckServiceNodes) error {
	if args.ServiceName == "" {
		return errors.New("Must provide service name")
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		r, err := query.ServiceHealth(ws, st, args)
		if err != nil {
			return err
		}
		reply.Index = r.Index
		reply.Nodes, err = sortByRTT(st, args.Source, r.Nodes, func(n structs.CheckServiceNode) string {
			if n.Node == nil {
				return ""
			}
			return n.Node.Node
		})
		return err
	})
}

func (s *Server) healthServiceChecks(ctx context.Context, args *structs.ServiceSpecificRequest, reply *structs.IndexedHealthChecks) error {
	if args.ServiceName == "" {
		return errors.New("Must provide service name")
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, checks, err := st.ServiceChecks(ws, args.ServiceName)
		reply.Index, reply.HealthChecks = idx, checks
		return err
	})
}

func (s *Server) healthNodeChecks(ctx context.Context, args *structs.NodeSpecificRequest, reply *structs.IndexedHealthChecks) error {
	if args.Node == "" {
		return ErrMissingNode
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, checks, err := st.NodeChecks(ws, args.Node)
		reply.Index, reply.HealthChecks = idx, checks
		return err
	})
}

func (s *Server) healthChecksInState(ctx context.Context, args *structs.ChecksInStateRequest, reply *structs.IndexedHealthChecks) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, checks, err := st.ChecksInState(ws, args.State)
		reply.Index, reply.HealthChecks = idx, checks
		return err
	})
}
