package server

import (
	"math"
	"sort"
	"strings"

	"github.com/hashicorp/serf/coordinate"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// sortByRTT orders items by the estimated round trip time from src's node
// (?near=), as Consul does: nearest first, nodes without a coordinate
// last, ties in their original order. With no source node, or a source
// without a coordinate, items come back as they are. The coordinates are
// read without a watch: a coordinate moving every few seconds must not
// wake every blocking query that sorted by it.
func sortByRTT[T any](st *state.Store, src structs.QuerySource, items []T, nodeOf func(T) string) ([]T, error) {
	if src.Node == "" || len(items) == 0 {
		return items, nil
	}
	_, all, err := st.Coordinates(nil)
	if err != nil {
		return nil, err
	}
	coords := make(map[string]*coordinate.Coordinate, len(all))
	for _, c := range all {
		if c.Segment == src.Segment {
			coords[strings.ToLower(c.Node)] = c.Coord
		}
	}
	from, ok := coords[strings.ToLower(src.Node)]
	if !ok {
		return items, nil
	}
	type ranked struct {
		item T
		rtt  float64
	}
	rs := make([]ranked, len(items))
	for i, it := range items {
		rs[i] = ranked{item: it, rtt: math.Inf(1)}
		if c, ok := coords[strings.ToLower(nodeOf(it))]; ok && c.IsCompatibleWith(from) {
			rs[i].rtt = from.DistanceTo(c).Seconds()
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].rtt < rs[j].rtt })
	out := make([]T, len(rs))
	for i, r := range rs {
		out[i] = r.item
	}
	return out, nil
}
