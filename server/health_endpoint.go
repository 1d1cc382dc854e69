package server

import (
	"context"
	"errors"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

func (s *Server) healthServiceNodes(ctx context.Context, args *structs.ServiceSpecificRequest, reply *structs.IndexedCheckServiceNodes) error {
	if args.ServiceName == "" {
		return errors.New("Must provide service name")
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var tags []string
		if args.TagFilter {
			tags = args.ServiceTags
		}
		idx, nodes, err := st.CheckServiceNodes(ws, args.ServiceName, tags, args.Connect)
		if err != nil {
			return err
		}
		out := nodes[:0:0]
		for i := range nodes {
			if args.PassingOnly && !nodes[i].Passing() {
				continue
			}
			if len(args.NodeMetaFilters) > 0 && (nodes[i].Node == nil || !metaMatches(nodes[i].Node.Meta, args.NodeMetaFilters)) {
				continue
			}
			out = append(out, nodes[i])
		}
		reply.Index, reply.Nodes = idx, out
		return nil
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
