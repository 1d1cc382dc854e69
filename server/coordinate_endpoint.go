package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/serf/coordinate"
	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Network coordinates. Agents report their Serf coordinate every few
// seconds; the leader keeps the latest report per node and segment and
// commits them in batches, as Consul does, so that a thousand agents cost
// a handful of Raft entries per period rather than a thousand.

// Consul's defaults for coordinate batching (its CoordinateUpdatePeriod,
// CoordinateUpdateBatchSize and CoordinateUpdateMaxBatches).
const (
	defaultCoordinateUpdatePeriod     = 5 * time.Second
	defaultCoordinateUpdateBatchSize  = 128
	defaultCoordinateUpdateMaxBatches = 5
)

// Validation errors of Coordinate.Update, with Consul's texts.
var (
	ErrInvalidCoordinate      = errors.New("invalid coordinate")
	ErrIncompatibleCoordinate = errors.New("incompatible coordinates")
)

// CoordinateSource is the agent's Serf view of network coordinates: its
// own, and the latest it heard for another member. The server reads it to
// answer Coordinate.ListDatacenters.
type CoordinateSource interface {
	Coordinate() (*coordinate.Coordinate, error)
	CachedCoordinate(node string) (*coordinate.Coordinate, bool)
}

// coordinateQueue is the leader's pending coordinate reports.
type coordinateQueue struct {
	mu sync.Mutex
	// pending is guarded by mu: the latest report per node and segment.
	pending map[string]*structs.Coordinate
}

func (q *coordinateQueue) add(c *structs.Coordinate) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = make(map[string]*structs.Coordinate)
	}
	q.pending[strings.ToLower(c.Node)+"\x00"+c.Segment] = c
}

// take empties the queue and returns what it held, ordered by node and
// segment so that batches are deterministic.
func (q *coordinateQueue) take() structs.Coordinates {
	q.mu.Lock()
	pending := q.pending
	q.pending = nil
	q.mu.Unlock()
	out := make(structs.Coordinates, 0, len(pending))
	for _, c := range pending {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *structs.Coordinate) int {
		if c := strings.Compare(strings.ToLower(a.Node), strings.ToLower(b.Node)); c != 0 {
			return c
		}
		return strings.Compare(a.Segment, b.Segment)
	})
	return out
}

// coordinateUpdate queues one agent's coordinate; it reaches the leader
// like any write, and the leader's batch loop commits it.
func (s *Server) coordinateUpdate(_ context.Context, args *structs.CoordinateUpdateRequest, _ *struct{}) error {
	if args.Node == "" {
		return ErrMissingNode
	}
	// Older agents could send NaN or infinite components; a coordinate of
	// another dimensionality cannot be compared with anyone's.
	if args.Coord == nil || !args.Coord.IsValid() {
		return ErrInvalidCoordinate
	}
	if uint(len(args.Coord.Vec)) != coordinate.DefaultConfig().Dimensionality {
		return ErrIncompatibleCoordinate
	}
	s.coordinates.add(&structs.Coordinate{Node: args.Node, Segment: args.Segment, Coord: args.Coord.Clone()})
	return nil
}

// coordinateBatchLoop commits the queued coordinates every period while
// this server leads. A server that does not lead drops what it holds: the
// agents report again within a period or two.
func (s *Server) coordinateBatchLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CoordinateUpdatePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		updates := s.coordinates.take()
		if len(updates) == 0 || !s.IsLeader() {
			continue
		}
		s.applyCoordinates(updates)
	}
}

// applyCoordinates commits updates in batches of CoordinateUpdateBatchSize,
// at most CoordinateUpdateMaxBatches of them; the rest are dropped so that
// a flood of agents cannot fill the Raft log.
func (s *Server) applyCoordinates(updates structs.Coordinates) {
	size, limit := s.cfg.CoordinateUpdateBatchSize, s.cfg.CoordinateUpdateBatchSize*s.cfg.CoordinateUpdateMaxBatches
	if len(updates) > limit {
		s.logger.Warn("discarded coordinate updates", "discarded", len(updates)-limit)
		updates = updates[:limit]
	}
	for len(updates) > 0 {
		n := min(size, len(updates))
		// Flagged ignorable: coordinates are soft state that a server
		// older than the command may skip rather than stop on.
		if _, err := s.raftApply(structs.CoordinateBatchUpdateType|structs.IgnoreUnknownTypeFlag, updates[:n]); err != nil {
			s.logger.Warn("coordinate batch update failed", "error", err)
			return
		}
		updates = updates[n:]
	}
}

func (s *Server) coordinateListNodes(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.IndexedCoordinates) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, cs, err := st.Coordinates(ws)
		reply.Index, reply.Coordinates = idx, cs
		return err
	})
}

func (s *Server) coordinateNode(ctx context.Context, args *structs.NodeSpecificRequest, reply *structs.IndexedCoordinates) error {
	if args.Node == "" {
		return ErrMissingNode
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, cs, err := st.NodeCoordinates(ws, args.Node)
		reply.Index, reply.Coordinates = idx, cs
		return err
	})
}

// coordinateListDatacenters answers with every datacenter's servers and
// their WAN coordinates (datacenters.go). Without a WAN pool the
// servers' LAN coordinates stand in for the WAN ones; they are named
// "<node>.<dc>" as Consul names WAN members.
func (s *Server) coordinateListDatacenters(_ context.Context, _ *structs.DCSpecificRequest, reply *[]structs.DatacenterMap) error {
	if dms := s.wanDatacenterMaps(); dms != nil {
		*reply = dms
		return nil
	}
	dc := structs.DatacenterMap{Datacenter: s.cfg.Datacenter, AreaID: structs.AreaWAN, Coordinates: structs.Coordinates{}}
	var members []serf.Member
	if s.cfg.Membership != nil {
		members = s.cfg.Membership.Members()
	}
	for _, m := range members {
		meta, ok := gossip.ParseServer(m)
		if !ok || meta.Datacenter != s.cfg.Datacenter || m.Status != serf.StatusAlive {
			continue
		}
		if c := s.memberCoordinate(m.Name); c != nil {
			dc.Coordinates = append(dc.Coordinates, &structs.Coordinate{Node: m.Name + "." + s.cfg.Datacenter, Coord: c})
		}
	}
	slices.SortFunc(dc.Coordinates, func(a, b *structs.Coordinate) int { return strings.Compare(a.Node, b.Node) })
	*reply = []structs.DatacenterMap{dc}
	return nil
}

// memberCoordinate is the LAN coordinate of node: this server's own, or
// the latest heard from another member; nil when none is known.
func (s *Server) memberCoordinate(node string) *coordinate.Coordinate {
	return poolCoordinate(s.cfg.Coordinates, s.cfg.NodeName, node)
}

// poolCoordinate is a gossip pool's coordinate of member name, where self
// is this server's own name in the pool; nil when none is known.
func poolCoordinate(src CoordinateSource, self, name string) *coordinate.Coordinate {
	if src == nil {
		return nil
	}
	if name == self {
		c, err := src.Coordinate()
		if err != nil {
			return nil
		}
		return c
	}
	c, _ := src.CachedCoordinate(name)
	return c
}
