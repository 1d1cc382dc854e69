package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/hashicorp/serf/coordinate"

	"github.com/trellis-mesh/trellis/structs"
)

func testCoord(x float64) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	c.Vec[1] = x
	return c
}

// populateCoordinates stores a coordinate for each of populate's nodes at
// idx.
func populateCoordinates(t testing.TB, f *FSM, idx uint64) {
	t.Helper()
	got := apply(t, f, idx, structs.CoordinateBatchUpdateType|structs.IgnoreUnknownTypeFlag, structs.Coordinates{
		{Node: "n1", Coord: testCoord(0.01)},
		{Node: "n2", Coord: testCoord(0.02)},
	})
	if got != nil {
		t.Fatalf("coordinate batch = %#v", got)
	}
}

func TestCoordinateBatchUpdateCommand(t *testing.T) {
	tests := []struct {
		name string
		typ  structs.MessageType
		in   structs.Coordinates
		want structs.Coordinates
	}{
		{"plain", structs.CoordinateBatchUpdateType,
			structs.Coordinates{{Node: "n1", Coord: testCoord(1)}},
			structs.Coordinates{{Node: "n1", Coord: testCoord(1)}}},
		// The leader flags the command ignorable: coordinates are soft
		// state an older server may skip.
		{"flagged ignorable", structs.CoordinateBatchUpdateType | structs.IgnoreUnknownTypeFlag,
			structs.Coordinates{{Node: "n2", Coord: testCoord(2)}, {Node: "unknown", Coord: testCoord(3)}},
			structs.Coordinates{{Node: "n2", Coord: testCoord(2)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New(Config{})
			last := populate(t, f)
			if got := apply(t, f, last+1, tt.typ, tt.in); got != nil {
				t.Fatalf("apply = %#v", got)
			}
			idx, got, err := f.State().Coordinates(nil)
			if err != nil {
				t.Fatal(err)
			}
			if idx != last+1 || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("coordinates = %d %+v, want %d %+v", idx, got, last+1, tt.want)
			}
		})
	}
}

// TestRestoreVersion2Stream: a stream written before coordinates existed
// (version 2, no coordinate records) still restores, with no coordinates.
func TestRestoreVersion2Stream(t *testing.T) {
	src := New(Config{})
	populate(t, src)
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	buf, nodes := nodeOnlyStream(t, snap.(*snapshot).snap.Nodes, 2, src.State().LastIndex())
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(buf)); err != nil {
		t.Fatalf("version 2 stream: %v", err)
	}
	_, cs, err := dst.State().Coordinates(nil)
	if err != nil || len(cs) != 0 {
		t.Fatalf("coordinates after a version 2 restore = %v, %v", cs, err)
	}
	if _, ns, _ := dst.State().Nodes(nil, nil); len(ns) != len(nodes) {
		t.Fatalf("nodes = %d, want %d", len(ns), len(nodes))
	}
}

// nodeOnlyStream writes a snapshot stream of the given version holding
// only the node records: what an older version, lacking the newer record
// types, would have written.
func nodeOnlyStream(t *testing.T, list func() (structs.Nodes, error), version int, last uint64) (*bytes.Buffer, structs.Nodes) {
	t.Helper()
	nodes, err := list()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := structs.NewCodec().NewStreamEncoder(&buf)
	if err := enc.Encode(snapshotHeader{Magic: snapshotMagic, Version: version, LastIndex: last}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := enc.Encode(uint8(recordNode)); err != nil {
			t.Fatal(err)
		}
		if err := enc.Encode(n); err != nil {
			t.Fatal(err)
		}
	}
	return &buf, nodes
}
