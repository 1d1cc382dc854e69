package server

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// TestChecksumLog: entries round-trip exactly (Extensions included), an
// entry changed on disk or stripped of its sum is refused, and entries
// written before checksums existed are still read.
func TestChecksumLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bolt.Close() }()
	// Written before checksums: entries 1 and 2 as they are.
	old := []*raft.Log{{Index: 1, Term: 1, Data: []byte("a")}, {Index: 2, Term: 1, Data: []byte("b")}}
	if err := bolt.StoreLogs(old); err != nil {
		t.Fatal(err)
	}
	logs, err := newChecksumLog(bolt, bolt)
	if err != nil {
		t.Fatal(err)
	}
	if logs.from != 3 {
		t.Fatalf("checksums from %d, want 3", logs.from)
	}
	fresh := []*raft.Log{
		{Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte("c")},
		{Index: 4, Term: 2, Type: raft.LogCommand, Data: []byte("d"), Extensions: []byte("ext")},
	}
	if err := logs.StoreLogs(fresh); err != nil {
		t.Fatal(err)
	}
	if fresh[1].Extensions == nil || string(fresh[1].Extensions) != "ext" {
		t.Fatalf("StoreLogs changed the caller's entry: %q", fresh[1].Extensions)
	}
	for _, want := range append(old, fresh...) {
		var got raft.Log
		if err := logs.GetLog(want.Index, &got); err != nil {
			t.Fatalf("entry %d: %v", want.Index, err)
		}
		if !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) || got.Term != want.Term {
			t.Fatalf("entry %d = %+v, want %+v", want.Index, got, want)
		}
	}
	// A reopened store keeps the boundary.
	if again, err := newChecksumLog(bolt, bolt); err != nil || again.from != 3 {
		t.Fatalf("reopened: from %v, %v", again, err)
	}

	// summed is an entry as the checksum layer stores it.
	summed := func(e raft.Log) raft.Log {
		mem := checksumLog{LogStore: raft.NewInmemStore()}
		if err := mem.StoreLogs([]*raft.Log{&e}); err != nil {
			t.Fatal(err)
		}
		var out raft.Log
		if err := mem.LogStore.GetLog(e.Index, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		damage func(e *raft.Log) // what the disk did to the stored entry
	}{
		{"data changed", func(e *raft.Log) { e.Data = []byte("z") }},
		{"term changed", func(e *raft.Log) { e.Term++ }},
		{"type changed", func(e *raft.Log) { e.Type = raft.LogNoop }},
		{"sum lost", func(e *raft.Log) { e.Extensions = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := summed(raft.Log{Index: 5, Term: 2, Type: raft.LogCommand, Data: []byte("x")})
			tc.damage(&e)
			if err := bolt.StoreLogs([]*raft.Log{&e}); err != nil {
				t.Fatal(err)
			}
			var got raft.Log
			if err := logs.GetLog(e.Index, &got); !errors.Is(err, errChecksum) {
				t.Fatalf("GetLog = %v, want errChecksum", err)
			}
		})
	}
}
