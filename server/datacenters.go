package server

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"

	"github.com/hashicorp/serf/coordinate"
	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

// The datacenters a server knows are those of the servers in its WAN
// pool. Trellis forwards nothing to them; it lists them, as Consul's
// /v1/catalog/datacenters and /v1/coordinate/datacenters do.

// wanServer is a live server of the WAN pool.
type wanServer struct {
	member serf.Member
	dc     string
}

// wanServers lists the WAN pool's servers that have not left, or nil
// without a pool.
func (s *Server) wanServers() []wanServer {
	if s.cfg.WANMembers == nil {
		return nil
	}
	var out []wanServer
	for _, m := range s.cfg.WANMembers.Members() {
		meta, ok := gossip.ParseServer(m)
		if !ok || m.Status == serf.StatusLeft {
			continue
		}
		out = append(out, wanServer{member: m, dc: meta.Datacenter})
	}
	return out
}

// wanCoordinate is the WAN coordinate of a pool member (this server's own
// included), nil when none is known.
func (s *Server) wanCoordinate(name string) *coordinate.Coordinate {
	return poolCoordinate(s.cfg.WANCoordinates, s.cfg.NodeName+"."+s.cfg.Datacenter, name)
}

// catalogListDatacenters answers with every datacenter of the WAN pool,
// by the median estimated round trip from this server to its servers
// (this datacenter counts as 0), then by name; a datacenter without
// coordinates sorts last. Without a WAN pool it is this datacenter alone.
func (s *Server) catalogListDatacenters(_ context.Context, _ *structs.DCSpecificRequest, reply *[]string) error {
	servers := s.wanServers()
	if len(servers) == 0 {
		*reply = []string{s.cfg.Datacenter}
		return nil
	}
	own := s.wanCoordinate(s.cfg.NodeName + "." + s.cfg.Datacenter)
	rtts := map[string][]float64{s.cfg.Datacenter: {0}}
	for _, w := range servers {
		if w.dc == s.cfg.Datacenter {
			continue
		}
		rtts[w.dc] = append(rtts[w.dc], rttSeconds(own, s.wanCoordinate(w.member.Name)))
	}
	type dcRTT struct {
		name string
		rtt  float64
	}
	dcs := make([]dcRTT, 0, len(rtts))
	for dc, rs := range rtts {
		slices.Sort(rs)
		dcs = append(dcs, dcRTT{dc, rs[len(rs)/2]})
	}
	slices.SortFunc(dcs, func(a, b dcRTT) int {
		return cmp.Or(cmp.Compare(a.rtt, b.rtt), strings.Compare(a.name, b.name))
	})
	out := make([]string, 0, len(dcs))
	for _, d := range dcs {
		out = append(out, d.name)
	}
	*reply = out
	return nil
}

// rttSeconds is the estimated round trip between two coordinates, +Inf
// when either is unknown or they cannot be compared.
func rttSeconds(a, b *coordinate.Coordinate) float64 {
	if a == nil || b == nil || !a.IsCompatibleWith(b) {
		return math.Inf(1)
	}
	return a.DistanceTo(b).Seconds()
}

// wanDatacenterMaps is Coordinate.ListDatacenters from the WAN pool: each
// datacenter's servers with their WAN coordinates, datacenters and
// servers by name; nil without a WAN pool.
func (s *Server) wanDatacenterMaps() []structs.DatacenterMap {
	servers := s.wanServers()
	if len(servers) == 0 {
		return nil
	}
	byDC := map[string]*structs.DatacenterMap{}
	for _, w := range servers {
		dm := byDC[w.dc]
		if dm == nil {
			dm = &structs.DatacenterMap{Datacenter: w.dc, AreaID: structs.AreaWAN, Coordinates: structs.Coordinates{}}
			byDC[w.dc] = dm
		}
		if c := s.wanCoordinate(w.member.Name); c != nil {
			dm.Coordinates = append(dm.Coordinates, &structs.Coordinate{Node: w.member.Name, Coord: c})
		}
	}
	out := make([]structs.DatacenterMap, 0, len(byDC))
	for _, dm := range byDC {
		slices.SortFunc(dm.Coordinates, func(a, b *structs.Coordinate) int { return strings.Compare(a.Node, b.Node) })
		out = append(out, *dm)
	}
	slices.SortFunc(out, func(a, b structs.DatacenterMap) int { return strings.Compare(a.Datacenter, b.Datacenter) })
	return out
}
