package server

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/hashicorp/serf/coordinate"
	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

// wanView is a fixed WAN pool: its members and the coordinates this
// server has heard for them (its own under "self.dc1").
type wanView struct {
	members []serf.Member
	coords  map[string]*coordinate.Coordinate
}

func (v wanView) Members() []serf.Member { return v.members }

func (v wanView) Coordinate() (*coordinate.Coordinate, error) { return v.coords["self.dc1"], nil }

func (v wanView) CachedCoordinate(node string) (*coordinate.Coordinate, bool) {
	c, ok := v.coords[node]
	return c, ok
}

func wanMember(name, dc string, status serf.MemberStatus) serf.Member {
	return serf.Member{Name: name, Addr: net.IPv4(127, 0, 0, 1), Status: status, Tags: gossip.ServerTags(dc, "", 8300, 0, false, "1.22.7")}
}

func TestCatalogListDatacenters(t *testing.T) {
	self := wanMember("self.dc1", "dc1", serf.StatusAlive)
	cases := []struct {
		name string
		view *wanView
		want []string
	}{
		{name: "no WAN pool: this datacenter", want: []string{"dc1"}},
		{
			name: "by median round trip, this datacenter first",
			view: &wanView{
				members: []serf.Member{
					self,
					wanMember("a.dc2", "dc2", serf.StatusAlive), wanMember("b.dc2", "dc2", serf.StatusAlive), wanMember("c.dc2", "dc2", serf.StatusFailed),
					wanMember("a.dc3", "dc3", serf.StatusAlive),
				},
				coords: map[string]*coordinate.Coordinate{
					"self.dc1": coordAt(0),
					// dc2's median (of 10, 90 and 95 ms) is 90 ms: farther
					// than dc3 although its nearest server is nearer.
					"a.dc2": coordAt(0.010), "b.dc2": coordAt(0.090), "c.dc2": coordAt(0.095),
					"a.dc3": coordAt(0.050),
				},
			},
			want: []string{"dc1", "dc3", "dc2"},
		},
		{
			name: "unknown coordinates last, by name; left servers forgotten",
			view: &wanView{
				members: []serf.Member{
					self, wanMember("a.dc9", "dc9", serf.StatusAlive), wanMember("a.dc4", "dc4", serf.StatusAlive),
					wanMember("a.dc5", "dc5", serf.StatusAlive), wanMember("a.dc6", "dc6", serf.StatusLeft),
				},
				coords: map[string]*coordinate.Coordinate{"self.dc1": coordAt(0), "a.dc9": coordAt(0.001)},
			},
			want: []string{"dc1", "dc9", "dc4", "dc5"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: Config{NodeName: "self", Datacenter: "dc1"}}
			if tc.view != nil {
				s.cfg.WANMembers, s.cfg.WANCoordinates = tc.view, tc.view
			}
			var got []string
			if err := s.catalogListDatacenters(context.Background(), &structs.DCSpecificRequest{}, &got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("datacenters %q, want %q", got, tc.want)
			}
		})
	}
}
