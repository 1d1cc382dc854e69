package state

import (
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestAppliedRequestsWindow: a recorded request is found until a request
// proposed more than the window after it is recorded; recording one moves
// no index, so no blocking query wakes for it.
func TestAppliedRequestsWindow(t *testing.T) {
	s := NewStore()
	must(t, s.KVSSet(5, &structs.DirEntry{Key: "k"}))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	window := int64(structs.DedupWindow)
	for _, tc := range []struct {
		id   string
		at   int64
		res  any
		want map[string]bool // which IDs are remembered after recording this one
	}{
		{"a", base, true, map[string]bool{"a": true}},
		{"b", base + window/2, "sess", map[string]bool{"a": true, "b": true}},
		// Exactly one window after a: a is still inside it.
		{"c", base + window, nil, map[string]bool{"a": true, "b": true, "c": true}},
		{"d", base + window + 1, false, map[string]bool{"a": false, "b": true, "c": true, "d": true}},
		{"e", base + 3*window, true, map[string]bool{"b": false, "c": false, "d": false, "e": true}},
	} {
		must(t, s.RecordAppliedRequest(AppliedRequest{ID: tc.id, ProposedAt: tc.at, Result: structs.RecordResult(tc.res)}))
		for id, want := range tc.want {
			res, ok, err := s.AppliedRequestResult(id, tc.at)
			must(t, err)
			if ok != want {
				t.Errorf("after %s: %s remembered = %v, want %v", tc.id, id, ok, want)
			}
			if ok && id == tc.id && res.Response() != tc.res {
				t.Errorf("%s: result %v, want %v", id, res.Response(), tc.res)
			}
		}
	}
	if got := s.LastIndex(); got != 5 {
		t.Errorf("LastIndex = %d after recording requests, want 5", got)
	}
}
