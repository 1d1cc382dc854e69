package httpapi

import (
	"net/http"

	"github.com/trellis-mesh/trellis/structs"
)

// coordinateDatacenters handles GET /v1/coordinate/datacenters: each
// datacenter's servers with their coordinates. Trellis has one datacenter
// and no WAN pool: the answer is that datacenter, area "WAN", with its
// servers' LAN coordinates under Consul's WAN names ("<node>.<dc>"). Like
// Consul's, the read is neither blocking nor indexed.
func (s *Server) coordinateDatacenters(w http.ResponseWriter, r *http.Request) (any, error) {
	var out []structs.DatacenterMap
	if err := structs.MethodCoordinateListDatacenters.Call(r.Context(), s.rpc, &structs.DCSpecificRequest{}, &out); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Coordinates == nil {
			out[i].Coordinates = structs.Coordinates{}
		}
	}
	if out == nil {
		out = []structs.DatacenterMap{}
	}
	return out, nil
}

// coordinateNodes handles GET /v1/coordinate/nodes (?segment= keeps one
// network segment's).
func (s *Server) coordinateNodes(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.DCSpecificRequest
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.IndexedCoordinates
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodCoordinateListNodes.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	return filterSegment(r, out.Coordinates), nil
}

// coordinateNode handles GET /v1/coordinate/node/<node>: 404 with an empty
// body when the node has no coordinate, as in Consul.
func (s *Server) coordinateNode(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.NodeSpecificRequest{Node: pathSuffix(r, "/v1/coordinate/node/")}
	if args.Node == "" {
		return nil, badRequest("Missing node name")
	}
	if err := s.parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var out structs.IndexedCoordinates
	defer setMeta(w, &out.QueryMeta, &args.QueryOptions)
	if err := structs.MethodCoordinateNode.Call(r.Context(), s.rpc, &args, &out); err != nil {
		return nil, err
	}
	coords := filterSegment(r, out.Coordinates)
	if len(coords) == 0 {
		return nil, &httpError{code: http.StatusNotFound}
	}
	return coords, nil
}

// filterSegment keeps the coordinates of ?segment= when it is given.
func filterSegment(r *http.Request, in structs.Coordinates) structs.Coordinates {
	segment, ok := r.URL.Query()["segment"]
	out := make(structs.Coordinates, 0, len(in))
	for _, c := range in {
		if c != nil && (!ok || c.Segment == segment[0]) {
			out = append(out, c)
		}
	}
	return out
}

// coordinateUpdate handles PUT /v1/coordinate/update: a node's coordinate,
// queued on the leader for the next batch. The answer is an empty 200.
func (s *Server) coordinateUpdate(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.CoordinateUpdateRequest
	if err := decodeRequest(r, &args); err != nil {
		return nil, err
	}
	if args.Datacenter == "" {
		args.Datacenter = s.parseDC(r)
	}
	args.Token = parseToken(r)
	if err := structs.MethodCoordinateUpdate.Call(r.Context(), s.rpc, &args, &struct{}{}); err != nil {
		return nil, err
	}
	return nil, nil
}

// parseSource reads ?near=: the node results are sorted from, "_agent"
// meaning this agent's own node. Without it the source is empty.
func (s *Server) parseSource(r *http.Request) structs.QuerySource {
	near := r.URL.Query().Get("near")
	switch near {
	case "":
		return structs.QuerySource{}
	case "_agent":
		near = s.nodeName
	}
	return structs.QuerySource{Datacenter: s.dc, Node: near}
}
