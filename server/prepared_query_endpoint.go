package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// Prepared queries (Consul's agent/consul/prepared_query_endpoint.go):
// writes validated here, stored by the PreparedQuery command; execute runs
// the health read the query describes.

func (s *Server) preparedQueryApply(ctx context.Context, args *structs.PreparedQueryRequest, reply *string) error {
	if args.Query == nil {
		args.Query = &structs.PreparedQuery{}
	}
	q := args.Query
	switch args.Op {
	case structs.PreparedQueryCreate:
		if q.ID != "" {
			return errors.New("ID must be empty when creating a new prepared query")
		}
		id, err := s.newQueryID(requestIDFrom(ctx))
		if err != nil {
			return err
		}
		q.ID = id
	case structs.PreparedQueryUpdate, structs.PreparedQueryDelete:
		_, existing, err := s.fsm.State().PreparedQueryGet(nil, q.ID)
		if err != nil {
			return err
		}
		if existing == nil {
			verb := "modify"
			if args.Op == structs.PreparedQueryDelete {
				verb = "delete"
			}
			return fmt.Errorf("Cannot %s non-existent prepared query: '%s'", verb, q.ID)
		}
	default:
		return fmt.Errorf("Unknown prepared query operation: %s", args.Op)
	}
	if args.Op != structs.PreparedQueryDelete {
		if err := validatePreparedQuery(q); err != nil {
			return err
		}
	}
	resp, err := s.raftApplyWrite(ctx, structs.PreparedQueryRequestType, args)
	if err != nil {
		return err
	}
	if id, ok := resp.(string); ok {
		q.ID = id
	}
	*reply = q.ID
	return nil
}

// validatePreparedQuery makes Consul's checks on a query before it is
// stored, with its messages.
func validatePreparedQuery(q *structs.PreparedQuery) error {
	if err := q.ValidateTemplate(); err != nil {
		return err
	}
	svc := &q.Service
	if svc.Service == "" {
		return errors.New("Must provide a Service name to query")
	}
	if svc.Failover.NearestN < 0 {
		return fmt.Errorf("Bad NearestN '%d', must be >= 0", svc.Failover.NearestN)
	}
	if len(svc.Failover.Targets) > 0 && (svc.Failover.NearestN != 0 || len(svc.Failover.Datacenters) > 0) {
		return errors.New("Targets cannot be populated with NearestN or Datacenters")
	}
	if q.DNS.TTL != "" {
		ttl, err := time.ParseDuration(q.DNS.TTL)
		if err != nil {
			return fmt.Errorf("Bad DNS TTL '%s': %w", q.DNS.TTL, err)
		}
		if ttl < 0 {
			return fmt.Errorf("DNS TTL '%d', must be >=0", ttl)
		}
	}
	return nil
}

// newQueryID returns a new query ID: derived from the request ID when
// there is one, so that every retry of a create proposes the same query
// (see newSessionID).
func (s *Server) newQueryID(requestID string) (string, error) {
	if requestID != "" {
		return s.newSessionID("query:" + requestID)
	}
	return newUUID()
}

func (s *Server) preparedQueryGet(ctx context.Context, args *structs.PreparedQuerySpecificRequest, reply *structs.IndexedPreparedQueries) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, q, err := st.PreparedQueryGet(ws, args.QueryID)
		if err != nil {
			return err
		}
		if q == nil {
			return structs.ErrQueryNotFound
		}
		reply.Index, reply.Queries = idx, structs.PreparedQueries{q}
		return nil
	})
}

func (s *Server) preparedQueryList(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.IndexedPreparedQueries) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, qs, err := st.PreparedQueryList(ws)
		reply.Index, reply.Queries = idx, qs
		return err
	})
}

func (s *Server) preparedQueryExplain(ctx context.Context, args *structs.PreparedQueryExecuteRequest, reply *structs.PreparedQueryExplainResponse) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, q, err := resolveQuery(ws, st, args)
		if err != nil {
			return err
		}
		reply.Index, reply.Query = idx, *q
		return nil
	})
}

func (s *Server) preparedQueryExecute(ctx context.Context, args *structs.PreparedQueryExecuteRequest, reply *structs.PreparedQueryExecuteResponse) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, q, err := resolveQuery(ws, st, args)
		if err != nil {
			return err
		}
		if args.Connect {
			q.Service.Connect = true
		}
		nodes, hidx, err := executeQuery(ws, st, q)
		if err != nil {
			return err
		}
		if nodes, err = sortByRTT(st, querySource(st, q, args), nodes, checkServiceNodeName); err != nil {
			return err
		}
		if nodes, err = s.filterExecuted(ctx, args, q, nodes, &reply.QueryMeta); err != nil {
			return err
		}
		if args.Limit > 0 && len(nodes) > args.Limit {
			nodes = nodes[:args.Limit]
		}
		reply.Index = max(idx, hidx)
		reply.Service = q.Service.Service
		reply.Nodes = nodes
		reply.DNS = q.DNS
		reply.Datacenter = s.cfg.Datacenter
		// Failover asks other datacenters only when this one has no
		// healthy instance; Consul skips the datacenters it has no route
		// to, and this server knows none but its own, so none is asked.
		reply.Failovers = 0
		return nil
	})
}

// filterExecuted keeps the instances that the query's token, or the
// caller's when the query has none, may read, as Consul's Execute: a
// stored Token "is used each time the query is executed". Resolved on
// every wake of a blocking execute, so a deleted token stops the answers.
func (s *Server) filterExecuted(ctx context.Context, args *structs.PreparedQueryExecuteRequest, q *structs.PreparedQuery, nodes structs.CheckServiceNodes, meta *structs.QueryMeta) (structs.CheckServiceNodes, error) {
	if !s.cfg.ACLs.Enabled {
		return nodes, nil
	}
	token := args.Token
	if q.Token != "" {
		token = q.Token
	}
	authz, tok, err := s.ResolveToken(ctx, token)
	if err != nil {
		return nil, err
	}
	nodes, filtered := filterQueryNodes(authz, nodes)
	// As enforcer.after: an anonymous caller is not told.
	meta.ResultsFilteredByACLs = filtered && tok != nil && tok.AccessorID != structs.ACLTokenAnonymousID
	return nodes, nil
}

func checkServiceNodeName(n structs.CheckServiceNode) string {
	if n.Node == nil {
		return ""
	}
	return n.Node.Node
}

// resolveQuery finds and renders the query args names.
func resolveQuery(ws memdb.WatchSet, st *state.Store, args *structs.PreparedQueryExecuteRequest) (uint64, *structs.PreparedQuery, error) {
	idx, q, err := st.PreparedQueryResolve(ws, args.QueryIDOrName, args.Agent.Segment)
	if err != nil {
		return 0, nil, err
	}
	if q == nil {
		return 0, nil, structs.ErrQueryNotFound
	}
	return idx, q, nil
}

// executeQuery lists the instances q selects, in random order, as Consul
// does so that clients that take the first spread their load: never one
// with a critical check, nor with a warning under OnlyPassing (checks in
// IgnoreCheckIDs do not count), with every tag of Tags and none of its
// "!tags", and with every pair of NodeMeta and ServiceMeta.
func executeQuery(ws memdb.WatchSet, st *state.Store, q *structs.PreparedQuery) (structs.CheckServiceNodes, uint64, error) {
	sq := &q.Service
	r, err := query.ServiceHealth(ws, st, &structs.ServiceSpecificRequest{
		ServiceName: sq.Service, Connect: sq.Connect, NodeMetaFilters: sq.NodeMeta,
	})
	if err != nil {
		return nil, 0, err
	}
	out := make(structs.CheckServiceNodes, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		if healthyFor(n, sq) && tagsMatch(n.Service.Tags, sq.Tags) && metaMatches(n.Service.Meta, sq.ServiceMeta) {
			out = append(out, n)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] }) //nolint:gosec // spreading load over instances needs no unpredictability
	return out, r.Index, nil
}

func healthyFor(n structs.CheckServiceNode, sq *structs.ServiceQuery) bool {
	for _, c := range n.Checks {
		if containsFold(sq.IgnoreCheckIDs, c.CheckID) {
			continue
		}
		switch c.Status {
		case structs.HealthCritical:
			return false
		case structs.HealthWarning:
			if sq.OnlyPassing {
				return false
			}
		}
	}
	return true
}

func tagsMatch(have, want []string) bool {
	for _, t := range want {
		if neg, ok := strings.CutPrefix(t, "!"); ok {
			if containsFold(have, neg) {
				return false
			}
		} else if !containsFold(have, t) {
			return false
		}
	}
	return true
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// querySource is the node to sort by: ?near=, else the query's Near;
// "_agent" is the agent running the query and "_ip" the node whose address
// is the client's (no sort when none is).
func querySource(st *state.Store, q *structs.PreparedQuery, args *structs.PreparedQueryExecuteRequest) structs.QuerySource {
	src := args.Source
	if src.Node == "" {
		src.Node = q.Service.Near
	}
	switch src.Node {
	case "_agent":
		return args.Agent
	case "_ip":
		src.Node = ""
		if args.SourceIP == "" {
			return src
		}
		if _, nodes, err := st.Nodes(nil, nil); err == nil {
			for _, n := range nodes {
				if n.Address == args.SourceIP {
					src.Node = n.Node
					break
				}
			}
		}
	}
	if src.Segment == "" {
		src.Segment = args.Agent.Segment
	}
	return src
}
