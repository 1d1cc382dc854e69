package structs

import (
	"github.com/hashicorp/serf/coordinate"
)

// Coordinate is one node's network coordinate, as Serf's Vivaldi
// algorithm estimates it from the agent's gossip round trips. It is what
// /v1/coordinate/nodes lists (Consul's CoordinateEntry).
type Coordinate struct {
	Node    string
	Segment string
	Coord   *coordinate.Coordinate
}

// Clone returns a deep copy (the coordinate's vector included).
func (c *Coordinate) Clone() *Coordinate {
	if c == nil {
		return nil
	}
	out := *c
	if c.Coord != nil {
		out.Coord = c.Coord.Clone()
	}
	return &out
}

// Coordinates is a list of node coordinates.
type Coordinates []*Coordinate

// CoordinateUpdateRequest is an agent's report of its own coordinate
// (Coordinate.Update, PUT /v1/coordinate/update). The leader batches the
// reports it receives and commits them in one CoordinateBatchUpdate
// command per batch.
type CoordinateUpdateRequest struct {
	Node    string
	Segment string
	Coord   *coordinate.Coordinate
	WriteRequest
}

// IndexedCoordinates is a read result of node coordinates, ordered by node
// name and segment.
type IndexedCoordinates struct {
	Coordinates Coordinates
	QueryMeta
}

// DatacenterMap is the coordinates of one datacenter's servers in one
// network area (/v1/coordinate/datacenters). Coordinates of different
// areas are not comparable.
type DatacenterMap struct {
	Datacenter  string
	AreaID      string
	Coordinates Coordinates
}

// AreaWAN names the WAN pool's area, as Consul spells it in
// /v1/coordinate/datacenters.
const AreaWAN = "WAN"

// QuerySource is the node a read's results are sorted by estimated round
// trip time from (?near=). An empty Node leaves the results in their usual
// order.
type QuerySource struct {
	Datacenter string
	Segment    string
	Node       string
}
