package integration

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/serf/coordinate"
)

// eventTimeout bounds an event's gossip to every agent.
const eventTimeout = 20 * time.Second

// coordinateTimeout bounds every node's first coordinate report (1 s
// minimum interval plus stagger) and its batch on the leader.
const coordinateTimeout = 30 * time.Second

// TestEventsAndCoordinates, against one server and two client agents: an
// event fired on one client is listed on the agents its filters select
// and only there; every node reports a coordinate; ?near= sorts catalog
// and health reads by the estimated round trip time those coordinates
// give.
func TestEventsAndCoordinates(t *testing.T) {
	fast := map[string]any{"sync_coordinate_interval_min": "1s"}
	c, _ := startAgentCluster(t, agentClusterConfig{servers: 1, clients: 2, clientConfig: fast, serverConfig: fast})
	server, web, other := c.Servers()[0], c.Clients()[0], c.Clients()[1]
	clients := map[string]*api.Client{}
	for _, a := range c.Agents() {
		clients[a.Node()] = newConsulClient(t, a.HTTPAddr())
	}
	if err := clients[web.Node()].Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "web", Tags: []string{"v1"}, Port: 8080}); err != nil {
		t.Fatal(err)
	}

	t.Run("events", func(t *testing.T) {
		fire := clients[other.Node()].Event()
		filtered, _, err := fire.Fire(&api.UserEvent{Name: "deploy", Payload: []byte("v2"), ServiceFilter: "^web$", TagFilter: "^v1$"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		everyone, _, err := fire.Fire(&api.UserEvent{Name: "ping"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{
			web.Node():    {filtered, everyone},
			other.Node():  {everyone},
			server.Node(): {everyone},
		}
		eventually(t, eventTimeout, "events listed where their filters match", func() error {
			var errs []error
			for node, ids := range want {
				list, meta, err := clients[node].Event().List("", nil)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				var got []string
				for _, ev := range list {
					got = append(got, ev.ID)
					if ev.ID == filtered && (string(ev.Payload) != "v2" || ev.ServiceFilter != "^web$" || ev.LTime == 0) {
						errs = append(errs, fmt.Errorf("%s: event %+v", node, ev))
					}
				}
				slices.Sort(got)
				sorted := slices.Sorted(slices.Values(ids))
				if !reflect.DeepEqual(got, sorted) {
					errs = append(errs, fmt.Errorf("%s lists %v, want %v", node, got, sorted))
				} else if last := list[len(list)-1].ID; meta.LastIndex != fire.IDToIndex(last) {
					errs = append(errs, fmt.Errorf("%s: index %d, want IDToIndex(%s)", node, meta.LastIndex, last))
				}
			}
			return errors.Join(errs...)
		})
	})

	t.Run("coordinates", func(t *testing.T) {
		eventually(t, coordinateTimeout, "a coordinate for every node", func() error {
			entries, _, err := clients[other.Node()].Coordinate().Nodes(nil)
			if err != nil {
				return err
			}
			got := map[string]bool{}
			for _, e := range entries {
				if e.Coord == nil || !e.Coord.IsValid() {
					return fmt.Errorf("bad coordinate for %s", e.Node)
				}
				got[e.Node] = true
			}
			for _, a := range c.Agents() {
				if !got[a.Node()] {
					return fmt.Errorf("no coordinate for %s in %d entries", a.Node(), len(entries))
				}
			}
			return nil
		})
		one, _, err := clients[web.Node()].Coordinate().Node(server.Node(), nil)
		if err != nil || len(one) != 1 || one[0].Node != server.Node() {
			t.Fatalf("coordinate of %s = %+v, %v", server.Node(), one, err)
		}
		if _, _, err := clients[web.Node()].Coordinate().Node("no-such-node", nil); err == nil {
			t.Fatal("a node without coordinates answered")
		}
		dcs, err := clients[web.Node()].Coordinate().Datacenters()
		if err != nil || len(dcs) != 1 || dcs[0].Datacenter != "dc1" || dcs[0].AreaID != "WAN" ||
			len(dcs[0].Coordinates) != 1 || dcs[0].Coordinates[0].Node != server.Node()+".dc1" {
			t.Fatalf("datacenters = %+v, %v", dcs, err)
		}
	})

	t.Run("near", func(t *testing.T) {
		ac := clients[other.Node()]
		eventually(t, coordinateTimeout, "?near= ordered by estimated round trip time", func() error {
			before, meta, err := ac.Coordinate().Nodes(nil)
			if err != nil {
				return err
			}
			nodes, _, err := ac.Catalog().Nodes(&api.QueryOptions{Near: web.Node()})
			if err != nil {
				return err
			}
			health, _, err := ac.Health().Service("web", "", false, &api.QueryOptions{Near: "_agent"})
			if err != nil {
				return err
			}
			_, after, err := ac.Coordinate().Nodes(nil)
			if err != nil {
				return err
			}
			if after.LastIndex != meta.LastIndex {
				return errors.New("coordinates moved during the reads")
			}
			var got []string
			for _, n := range nodes {
				got = append(got, n.Node)
			}
			if want := byDistance(before, web.Node()); !reflect.DeepEqual(got, want) {
				return fmt.Errorf("catalog nodes near %s = %v, want %v", web.Node(), got, want)
			}
			if len(health) != 1 || health[0].Node.Node != web.Node() {
				return fmt.Errorf("health near _agent = %d entries", len(health))
			}
			return nil
		})
	})
}

// byDistance orders the nodes of entries by their distance from src, as
// the servers must.
func byDistance(entries []*api.CoordinateEntry, src string) []string {
	coords := map[string]*coordinate.Coordinate{}
	var names []string
	for _, e := range entries {
		coords[e.Node] = e.Coord
		names = append(names, e.Node)
	}
	from := coords[src]
	slices.SortStableFunc(names, func(a, b string) int {
		da, db := from.DistanceTo(coords[a]), from.DistanceTo(coords[b])
		switch {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return 0
	})
	return names
}
