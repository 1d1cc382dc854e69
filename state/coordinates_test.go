package state

import (
	"reflect"
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/serf/coordinate"
	"github.com/trellis-mesh/trellis/structs"
)

// testCoord is a coordinate whose vector starts at x, so that rows tell
// apart.
func testCoord(x float64) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	c.Vec[0] = x
	c.Height = 0.001
	return c
}

// coordinateFixture stores coordinates for the nodes of watchFixture
// (a, b) at idx.
func coordinateFixture(t *testing.T, s *Store, idx uint64) {
	t.Helper()
	must(t, s.CoordinateBatchUpdate(idx, structs.Coordinates{
		{Node: "a", Coord: testCoord(0.1)},
		{Node: "b", Coord: testCoord(0.2)},
	}))
}

func TestCoordinateBatchUpdate(t *testing.T) {
	tests := []struct {
		name    string
		updates structs.Coordinates
		want    structs.Coordinates
	}{
		{
			name:    "known nodes are stored, sorted by node",
			updates: structs.Coordinates{{Node: "b", Coord: testCoord(2)}, {Node: "a", Coord: testCoord(1)}},
			want:    structs.Coordinates{{Node: "a", Coord: testCoord(1)}, {Node: "b", Coord: testCoord(2)}},
		},
		{
			name:    "an unknown node and a missing coordinate are dropped",
			updates: structs.Coordinates{{Node: "nope", Coord: testCoord(1)}, {Node: "a"}, nil, {Node: "b", Coord: testCoord(2)}},
			want:    structs.Coordinates{{Node: "b", Coord: testCoord(2)}},
		},
		{
			name:    "the catalog's spelling of the node wins",
			updates: structs.Coordinates{{Node: "A", Coord: testCoord(1)}},
			want:    structs.Coordinates{{Node: "a", Coord: testCoord(1)}},
		},
		{
			name:    "a later update in the batch replaces an earlier one",
			updates: structs.Coordinates{{Node: "a", Coord: testCoord(1)}, {Node: "a", Coord: testCoord(3)}},
			want:    structs.Coordinates{{Node: "a", Coord: testCoord(3)}},
		},
		{
			name:    "segments are rows of their own",
			updates: structs.Coordinates{{Node: "a", Coord: testCoord(1)}, {Node: "a", Segment: "alpha", Coord: testCoord(2)}},
			want:    structs.Coordinates{{Node: "a", Coord: testCoord(1)}, {Node: "a", Segment: "alpha", Coord: testCoord(2)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := watchFixture(t)
			ws := memdb.NewWatchSet()
			_, _, err := s.Coordinates(ws)
			must(t, err)
			must(t, s.CoordinateBatchUpdate(100, tt.updates))
			if !fires(ws) {
				t.Fatal("the coordinate list's watch did not fire")
			}
			idx, got, err := s.Coordinates(nil)
			must(t, err)
			if idx != 100 || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Coordinates = %d %s, want 100 %s", idx, dump(got), dump(tt.want))
			}
		})
	}
}

func TestNodeCoordinates(t *testing.T) {
	s := watchFixture(t)
	idx, got, err := s.NodeCoordinates(nil, "a")
	must(t, err)
	if len(got) != 0 || got == nil || idx == 0 {
		t.Fatalf("before any update: %d %v, want an empty list and a non-zero index", idx, got)
	}
	coordinateFixture(t, s, 50)
	ws := memdb.NewWatchSet()
	idx, got, err = s.NodeCoordinates(ws, "A")
	must(t, err)
	if want := (structs.Coordinates{{Node: "a", Coord: testCoord(0.1)}}); idx != 50 || !reflect.DeepEqual(got, want) {
		t.Fatalf("NodeCoordinates(A) = %d %s, want 50 %s", idx, dump(got), dump(want))
	}
	// The result is the caller's: changing it leaves the store alone.
	got[0].Coord.Vec[0] = 42
	if _, again, _ := s.NodeCoordinates(nil, "a"); again[0].Coord.Vec[0] != 0.1 {
		t.Fatal("a read's result shares memory with the store")
	}
	// Deleting the node deletes its coordinates and wakes the read.
	must(t, s.DeleteNode(51, "a"))
	if !fires(ws) {
		t.Fatal("deleting the node did not wake its coordinate read")
	}
	idx, all, err := s.Coordinates(nil)
	must(t, err)
	if want := (structs.Coordinates{{Node: "b", Coord: testCoord(0.2)}}); idx != 51 || !reflect.DeepEqual(all, want) {
		t.Fatalf("after deleting a: %d %s, want 51 %s", idx, dump(all), dump(want))
	}
}

func TestRestoreCoordinatesDropsOrphans(t *testing.T) {
	s := NewStore()
	r := s.Restore()
	must(t, r.Node(testNode("n", "10.0.0.1")))
	must(t, r.Coordinates(structs.Coordinates{{Node: "n", Coord: testCoord(1)}, {Node: "orphan", Coord: testCoord(2)}, {Node: "n", Segment: "s"}}))
	must(t, r.Index(IndexEntry{Key: tableCoordinates, Value: 7}))
	must(t, r.Commit())
	idx, got, err := s.Coordinates(nil)
	must(t, err)
	if want := (structs.Coordinates{{Node: "n", Coord: testCoord(1)}}); idx != 7 || !reflect.DeepEqual(got, want) {
		t.Fatalf("restored = %d %s, want 7 %s", idx, dump(got), dump(want))
	}
}
