package fsm

import (
	"bytes"
	"testing"
)

func TestVerifyCountsRecords(t *testing.T) {
	f := New(Config{})
	populate(t, f)
	counts, err := New(Config{}).Verify(bytes.NewReader(snapshotBytes(t, f)))
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int)
	for _, c := range counts {
		got[c.Type] = c.Count
	}
	// populate: two nodes, one service, two checks, keys a/b and lock
	// (a/c deleted: one tombstone), one session.
	want := map[string]int{"Node": 2, "Service": 1, "Check": 2, "KV": 2, "Tombstone": 1, "Session": 1}
	for typ, n := range want {
		if got[typ] != n {
			t.Errorf("%s: %d records, want %d (all: %v)", typ, got[typ], n, counts)
		}
	}
	if counts[0].Type != "Node" || got["Index"] == 0 {
		t.Errorf("counts = %v, want Node first and Index records", counts)
	}
}

// TestVerifyRefusesWhatRestoreRefuses: Verify is the check a server runs
// before handing a user's snapshot to Raft, so it must refuse every
// stream Restore would.
func TestVerifyRefusesWhatRestoreRefuses(t *testing.T) {
	f := New(Config{})
	populate(t, f)
	good := snapshotBytes(t, f)
	for name, data := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a snapshot"),
		"truncated": good[:len(good)/2],
		"one byte":  good[:1],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(Config{}).Verify(bytes.NewReader(data)); err == nil {
				t.Fatal("Verify accepted a stream Restore refuses")
			}
		})
	}
}
