package server

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/trellis-mesh/trellis/structs"
)

// coordAt is a coordinate at x seconds along the first axis, with no
// height or adjustment, so that the distance between two of them is the
// difference of their x.
func coordAt(x float64) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	c.Vec[0] = x
	c.Height = 0
	return c
}

func registerWeb(t *testing.T, s *Server, node string) {
	t.Helper()
	rpc(t, s, structs.MethodCatalogRegister, &structs.RegisterRequest{
		Node: node, Address: "10.0.0.1",
		Service: &structs.NodeService{ID: "web", Service: "web", Port: 80},
	}, &struct{}{})
}

// waitCoordinates blocks on Coordinate.ListNodes until it holds n rows.
func waitCoordinates(t *testing.T, s *Server, n int) structs.Coordinates {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var index uint64
	for time.Now().Before(deadline) {
		var out structs.IndexedCoordinates
		rpc(t, s, structs.MethodCoordinateListNodes, &structs.DCSpecificRequest{
			QueryOptions: structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: time.Second},
		}, &out)
		if len(out.Coordinates) >= n {
			return out.Coordinates
		}
		index = out.Index
	}
	t.Fatalf("fewer than %d coordinates after 20s", n)
	return nil
}

// TestCoordinateUpdateAndReads: updates sent to a follower reach the
// leader's queue, are committed in a batch and read back from every
// server; an unknown node's update is dropped, a bad coordinate refused.
func TestCoordinateUpdateAndReads(t *testing.T) {
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 30*time.Second)
	var follower *testServer
	for _, ts := range servers {
		if ts != leader {
			follower = ts
			break
		}
	}
	for _, n := range []string{"web1", "web2", "web3"} {
		registerWeb(t, leader.srv, n)
	}
	for i, n := range []string{"web1", "web2", "web3", "not-registered"} {
		rpc(t, follower.srv, structs.MethodCoordinateUpdate, &structs.CoordinateUpdateRequest{Node: n, Coord: coordAt(float64(i) / 100)}, &struct{}{})
	}
	got := waitCoordinates(t, follower.srv, 3)
	want := structs.Coordinates{
		{Node: "web1", Coord: coordAt(0)},
		{Node: "web2", Coord: coordAt(0.01)},
		{Node: "web3", Coord: coordAt(0.02)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("coordinates = %+v, want %+v", got, want)
	}

	var one structs.IndexedCoordinates
	rpc(t, follower.srv, structs.MethodCoordinateNode, &structs.NodeSpecificRequest{Node: "web2"}, &one)
	if !reflect.DeepEqual(one.Coordinates, want[1:2]) || one.Index == 0 {
		t.Fatalf("Coordinate.Node(web2) = %+v", one)
	}
	var none structs.IndexedCoordinates
	rpc(t, follower.srv, structs.MethodCoordinateNode, &structs.NodeSpecificRequest{Node: "not-registered"}, &none)
	if len(none.Coordinates) != 0 {
		t.Fatalf("an unregistered node's update was stored: %+v", none.Coordinates)
	}

	nan := coordAt(0)
	nan.Vec[2] = math.NaN()
	short := coordAt(0)
	short.Vec = short.Vec[:3]
	for _, tc := range []struct {
		name string
		req  structs.CoordinateUpdateRequest
		want error
	}{
		{"no node", structs.CoordinateUpdateRequest{Coord: coordAt(0)}, ErrMissingNode},
		{"no coordinate", structs.CoordinateUpdateRequest{Node: "web1"}, ErrInvalidCoordinate},
		{"NaN", structs.CoordinateUpdateRequest{Node: "web1", Coord: nan}, ErrInvalidCoordinate},
		{"other dimensionality", structs.CoordinateUpdateRequest{Node: "web1", Coord: short}, ErrIncompatibleCoordinate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := structs.MethodCoordinateUpdate.Call(context.Background(), leader.srv, &tc.req, &struct{}{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestCoordinateBatchLimits: one period commits at most MaxBatches
// batches of BatchSize, one Raft entry per batch, and drops the rest.
func TestCoordinateBatchLimits(t *testing.T) {
	servers := startTestCluster(t, 1, false)
	s := servers[0].srv
	s.cfg.CoordinateUpdateBatchSize, s.cfg.CoordinateUpdateMaxBatches = 2, 2
	nodes := []string{"a", "b", "c", "d", "e"}
	var updates structs.Coordinates
	for _, n := range nodes {
		registerWeb(t, s, n)
		updates = append(updates, &structs.Coordinate{Node: n, Coord: coordAt(0)})
	}
	before := s.raft.LastIndex()
	s.applyCoordinates(updates)
	if entries := s.raft.LastIndex() - before; entries != 2 {
		t.Fatalf("%d Raft entries for 4 updates in batches of 2, want 2", entries)
	}
	_, got, err := s.fsm.State().Coordinates(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[3].Node != "d" {
		t.Fatalf("stored %+v, want a to d (e over the limit)", got)
	}
}

// TestListDatacenters: every server of the datacenter, with its Serf
// coordinate, under Consul's WAN names.
func TestListDatacenters(t *testing.T) {
	servers := startTestCluster(t, 3, false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out []structs.DatacenterMap
		rpc(t, servers[1].srv, structs.MethodCoordinateListDatacenters, &structs.DCSpecificRequest{}, &out)
		if len(out) != 1 || out[0].Datacenter != "dc1" || out[0].AreaID != structs.AreaWAN {
			t.Fatalf("datacenters = %+v", out)
		}
		var names []string
		for _, c := range out[0].Coordinates {
			if c.Coord == nil || !c.Coord.IsValid() {
				t.Fatalf("bad coordinate for %s", c.Node)
			}
			names = append(names, c.Node)
		}
		if reflect.DeepEqual(names, []string{"s1.dc1", "s2.dc1", "s3.dc1"}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers listed = %v", names)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestNearSorting: ?near= orders nodes by estimated round trip time from
// the source, nodes without a coordinate last; an unknown source leaves
// the usual order.
func TestNearSorting(t *testing.T) {
	servers := startTestCluster(t, 1, false)
	s := servers[0].srv
	// Positions along one axis: the distance from "src" is |x - 0.5|.
	pos := map[string]float64{"src": 0.5, "far": 0.0, "near": 0.45, "mid": 0.7}
	var updates structs.Coordinates
	for _, n := range []string{"far", "mid", "near", "nocoord", "src"} {
		registerWeb(t, s, n)
		if x, ok := pos[n]; ok {
			updates = append(updates, &structs.Coordinate{Node: n, Coord: coordAt(x)})
		}
	}
	s.applyCoordinates(updates)
	tests := []struct {
		near string
		want []string
	}{
		{"src", []string{"src", "near", "mid", "far", "nocoord"}},
		{"SRC", []string{"src", "near", "mid", "far", "nocoord"}},
		{"far", []string{"far", "near", "src", "mid", "nocoord"}},
		{"nocoord", []string{"far", "mid", "near", "nocoord", "src"}},
		{"", []string{"far", "mid", "near", "nocoord", "src"}},
	}
	for _, tt := range tests {
		t.Run("near="+tt.near, func(t *testing.T) {
			src := structs.QuerySource{Datacenter: "dc1", Node: tt.near}
			var svc structs.IndexedServiceNodes
			rpc(t, s, structs.MethodCatalogServiceNodes, &structs.ServiceSpecificRequest{ServiceName: "web", Source: src}, &svc)
			var health structs.IndexedCheckServiceNodes
			rpc(t, s, structs.MethodHealthServiceNodes, &structs.ServiceSpecificRequest{ServiceName: "web", Source: src}, &health)
			var nodes structs.IndexedNodes
			rpc(t, s, structs.MethodCatalogListNodes, &structs.DCSpecificRequest{Source: src}, &nodes)
			var got1, got2, got3 []string
			for _, n := range svc.ServiceNodes {
				got1 = append(got1, n.Node)
			}
			for _, n := range health.Nodes {
				got2 = append(got2, n.Node.Node)
			}
			for _, n := range nodes.Nodes {
				if n.Node != "s1" { // the server itself has no coordinate here
					got3 = append(got3, n.Node)
				}
			}
			for name, got := range map[string][]string{"Catalog.ServiceNodes": got1, "Health.ServiceNodes": got2, "Catalog.ListNodes": got3} {
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s near %q = %v, want %v", name, tt.near, got, tt.want)
				}
			}
		})
	}
}
