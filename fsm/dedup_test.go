package fsm

import (
	"reflect"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// dedup wraps a command in a DedupRequest with id, proposed at at.
func dedup(t testing.TB, id string, at time.Time, typ structs.MessageType, msg any) *structs.DedupRequest {
	t.Helper()
	inner, err := structs.NewCodec().EncodeCommand(typ, msg)
	if err != nil {
		t.Fatal(err)
	}
	return &structs.DedupRequest{ID: id, ProposedAt: at.UnixNano(), Command: inner}
}

// populateDedup applies two deduplicated writes from idx on.
func populateDedup(t testing.TB, f *FSM, idx uint64) {
	t.Helper()
	now := time.Now()
	apply(t, f, idx, structs.DedupRequestType, dedup(t, "snap-1", now, structs.KVSRequestType,
		&structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "dedup/a", Value: []byte("1")}}))
	apply(t, f, idx+1, structs.DedupRequestType, dedup(t, "snap-2", now, structs.SessionRequestType,
		&structs.SessionRequest{Op: structs.SessionCreate, Session: structs.Session{ID: "s-dedup", Node: "n1", Behavior: structs.SessionKeysRelease}}))
}

// TestDedupAppliesOnce: a client write applied again under the same request
// ID (a retry whose first attempt committed) changes nothing and returns
// the first attempt's result, whatever kind it is; a new ID applies; an ID
// outside the window applies again.
func TestDedupAppliesOnce(t *testing.T) {
	f := New(Config{})
	populate(t, f) // n1, a/b, session s1, lock held by s1
	now := time.Now()
	cas := func(idx uint64, val string) *structs.KVSRequest {
		return &structs.KVSRequest{Op: structs.KVCAS, DirEnt: structs.DirEntry{Key: "k", Value: []byte(val), RaftIndex: structs.RaftIndex{ModifyIndex: idx}}}
	}
	txn := &structs.TxnRequest{Ops: structs.TxnOps{{KV: &structs.TxnKVOp{Verb: structs.KVSet, DirEnt: structs.DirEntry{Key: "t", Value: []byte("x")}}}}}
	for _, tc := range []struct {
		name  string
		idx   uint64
		req   *structs.DedupRequest
		want  any
		value string // k's value afterwards
	}{
		{"a CAS on a missing key wins", 20, dedup(t, "r1", now, structs.KVSRequestType, cas(0, "first")), true, "first"},
		{"its retry is not applied, and says it won", 21, dedup(t, "r1", now, structs.KVSRequestType, cas(0, "first")), true, "first"},
		{"a later write", 22, dedup(t, "r2", now, structs.KVSRequestType, cas(20, "second")), true, "second"},
		{"a retry of the first, later still, changes nothing", 23, dedup(t, "r1", now.Add(time.Second), structs.KVSRequestType, cas(0, "first")), true, "second"},
		{"a losing CAS", 24, dedup(t, "r3", now, structs.KVSRequestType, cas(1, "lost")), false, "second"},
		{"its retry still lost", 25, dedup(t, "r3", now, structs.KVSRequestType, cas(22, "lost")), false, "second"},
		{"an error result is kept", 26, dedup(t, "r4", now, structs.KVSRequestType, &structs.KVSRequest{Op: "bogus"}), nil, "second"},
		{"a session create returns its ID again", 27, dedup(t, "r5", now, structs.SessionRequestType,
			&structs.SessionRequest{Op: structs.SessionCreate, Session: structs.Session{ID: "s2", Node: "n1", Behavior: structs.SessionKeysRelease}}), "s2", "second"},
		{"once more", 28, dedup(t, "r5", now, structs.SessionRequestType,
			&structs.SessionRequest{Op: structs.SessionCreate, Session: structs.Session{ID: "s3", Node: "n1", Behavior: structs.SessionKeysRelease}}), "s2", "second"},
		{"a txn", 29, dedup(t, "r6", now, structs.TxnRequestType, txn), "txn", "second"},
		{"its retry", 30, dedup(t, "r6", now, structs.TxnRequestType, txn), "txn", "second"},
		// Far past the window, r1 is forgotten, so the same ID applies
		// (and wins: k's index is no longer 0, so the CAS fails).
		{"past the window", 31, dedup(t, "r1", now.Add(3*structs.DedupWindow), structs.KVSRequestType, cas(0, "first")), false, "second"},
	} {
		got := apply(t, f, tc.idx, structs.DedupRequestType, tc.req)
		switch tc.want {
		case nil:
			if _, ok := got.(error); !ok {
				t.Errorf("%s: got %#v, want an error", tc.name, got)
			}
		case "txn":
			r, ok := got.(*structs.TxnResponse)
			if !ok || len(r.Results) != 1 || r.Results[0].KV.ModifyIndex != 29 {
				t.Errorf("%s: got %#v, want the txn applied at 29", tc.name, got)
			}
		default:
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: got %#v, want %#v", tc.name, got, tc.want)
			}
		}
		_, e, err := f.State().KVSGet(nil, "k")
		if err != nil || e == nil || string(e.Value) != tc.value {
			t.Fatalf("%s: k = %+v (%v), want %q", tc.name, e, err, tc.value)
		}
	}
	if _, s, _ := f.State().SessionGet(nil, "s3"); s != nil {
		t.Error("the retried session create made a second session")
	}
}
