package server

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Validation errors of catalog writes, with Consul's texts (clients see
// them as 500 bodies).
var (
	ErrMissingNode        = errors.New("Must provide node")
	ErrMissingAddress     = errors.New("Must provide address if SkipNodeUpdate is not set")
	ErrMissingServiceName = errors.New("Must provide service name with ID")
	ErrInvalidServiceAddr = errors.New("Invalid service address")
)

func (s *Server) catalogRegister(ctx context.Context, args *structs.RegisterRequest, _ *struct{}) error {
	defer since(s.metrics.catalogReg, time.Now())
	if args.Node == "" {
		return ErrMissingNode
	}
	if args.Address == "" && !args.SkipNodeUpdate {
		return ErrMissingAddress
	}
	if svc := args.Service; svc != nil {
		if err := preApplyService(svc); err != nil {
			return err
		}
	}
	if args.Check != nil {
		args.Checks = append(args.Checks, args.Check)
		args.Check = nil
	}
	for _, c := range args.Checks {
		if c.Node == "" {
			c.Node = args.Node
		}
		if c.Node != args.Node {
			return fmt.Errorf("Node '%s' for check '%s' doesn't match register request node '%s'", c.Node, c.CheckID, args.Node)
		}
		if c.CheckID == "" && c.Name != "" {
			c.CheckID = c.Name
		}
		if c.Status == "" {
			c.Status = structs.HealthCritical
		}
		if err := validCheckStatus(c.Status); err != nil {
			return err
		}
	}
	_, err := s.raftApplyWrite(ctx, structs.RegisterRequestType, args)
	return err
}

// preApplyService checks a service write as Consul's servers do before
// Raft, defaulting its ID to its name.
func preApplyService(svc *structs.NodeService) error {
	if svc.ID == "" && svc.Service != "" {
		svc.ID = svc.Service
	}
	if svc.ID != "" && svc.Service == "" {
		return ErrMissingServiceName
	}
	if a, err := netip.ParseAddr(svc.Address); err == nil && a.IsUnspecified() {
		return ErrInvalidServiceAddr
	}
	return nil
}

// validCheckStatus refuses a status no check can have: health filters
// and sessions know only these.
func validCheckStatus(status string) error {
	switch status {
	case structs.HealthPassing, structs.HealthWarning, structs.HealthCritical, structs.HealthMaint:
		return nil
	}
	return fmt.Errorf("Invalid check status: %q", status)
}

func (s *Server) catalogDeregister(ctx context.Context, args *structs.DeregisterRequest, _ *struct{}) error {
	if args.Node == "" {
		return ErrMissingNode
	}
	_, err := s.raftApplyWrite(ctx, structs.DeregisterRequestType, args)
	return err
}

func (s *Server) catalogListNodes(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.IndexedNodes) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, nodes, err := st.Nodes(ws, args.NodeMetaFilters)
		if err != nil {
			return err
		}
		reply.Index = idx
		reply.Nodes, err = sortByRTT(st, args.Source, nodes, func(n *structs.Node) string { return n.Node })
		return err
	})
}

// catalogListServices filters itself (see filtersItself): ?filter= selects
// instances, by the flattened ServiceNode's fields as Consul's does, and
// a service is listed when one of its instances is selected.
func (s *Server) catalogListServices(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.IndexedServices) error {
	var keep func(*structs.ServiceNode) bool
	if args.Filter != "" {
		f, err := structs.CompileFilterFor(args.Filter, (*structs.ServiceNode)(nil))
		if err != nil {
			return err
		}
		keep = func(sn *structs.ServiceNode) bool { return f.Evaluate(sn) }
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, svcs, err := st.ServicesWhere(ws, args.NodeMetaFilters, keep)
		reply.Index, reply.Services = idx, svcs
		return err
	})
}

func (s *Server) catalogServiceNodes(ctx context.Context, args *structs.ServiceSpecificRequest, reply *structs.IndexedServiceNodes) error {
	if args.ServiceName == "" {
		return errors.New("Must provide service name")
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var tags []string
		if args.TagFilter {
			tags = args.ServiceTags
		}
		idx, nodes, err := st.ServiceNodes(ws, args.ServiceName, tags, args.Connect)
		if err != nil {
			return err
		}
		reply.Index = idx
		reply.ServiceNodes, err = sortByRTT(st, args.Source, filterServiceNodesByMeta(nodes, args.NodeMetaFilters),
			func(n *structs.ServiceNode) string { return n.Node })
		return err
	})
}

func (s *Server) catalogNodeServices(ctx context.Context, args *structs.NodeSpecificRequest, reply *structs.IndexedNodeServices) error {
	if args.Node == "" {
		return ErrMissingNode
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, ns, err := st.NodeServices(ws, args.Node)
		reply.Index, reply.NodeServices = idx, ns
		return err
	})
}

func filterServiceNodesByMeta(nodes structs.ServiceNodes, filters map[string]string) structs.ServiceNodes {
	if len(filters) == 0 {
		return nodes
	}
	out := nodes[:0:0]
	for _, n := range nodes {
		if metaMatches(n.NodeMeta, filters) {
			out = append(out, n)
		}
	}
	return out
}

func metaMatches(meta, filters map[string]string) bool {
	for k, v := range filters {
		if mv, ok := meta[k]; !ok || mv != v {
			return false
		}
	}
	return true
}
