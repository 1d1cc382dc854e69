package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/structs"
)

func apply(t testing.TB, f *FSM, idx uint64, typ structs.MessageType, msg any) any {
	t.Helper()
	buf, err := structs.NewCodec().EncodeCommand(typ, msg)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: buf})
}

// populate writes one of everything through the FSM and returns the last index.
func populate(t testing.TB, f *FSM) uint64 {
	t.Helper()
	steps := []struct {
		typ  structs.MessageType
		msg  any
		want any
	}{
		{structs.RegisterRequestType, &structs.RegisterRequest{Node: "n1", Address: "10.0.0.1",
			Service: &structs.NodeService{ID: "web1", Service: "web", Port: 80, Tags: []string{"v1"}},
			Checks: structs.HealthChecks{
				{Node: "n1", CheckID: "serfHealth", Name: "Serf", Status: structs.HealthPassing},
				{Node: "n1", CheckID: "web-check", Status: structs.HealthPassing, ServiceID: "web1"},
			}}, nil},
		{structs.RegisterRequestType, &structs.RegisterRequest{Node: "n2", Address: "10.0.0.2"}, nil},
		{structs.KVSRequestType, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "a/b", Value: []byte("1"), Flags: 7}}, true},
		{structs.KVSRequestType, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "a/c", Value: []byte("2")}}, true},
		{structs.KVSRequestType, &structs.KVSRequest{Op: structs.KVDelete, DirEnt: structs.DirEntry{Key: "a/c"}}, true},
		{structs.SessionRequestType, &structs.SessionRequest{Op: structs.SessionCreate, Session: structs.Session{ID: "s1", Node: "n1", NodeChecks: []string{"serfHealth"}, Behavior: structs.SessionKeysRelease, LockDelay: time.Second}}, "s1"},
		{structs.KVSRequestType, &structs.KVSRequest{Op: structs.KVLock, DirEnt: structs.DirEntry{Key: "lock", Session: "s1"}}, true},
	}
	var idx uint64
	for i, s := range steps {
		idx = uint64(i + 1)
		got := apply(t, f, idx, s.typ, s.msg)
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d (%s): got %#v, want %#v", i, s.typ, got, s.want)
		}
	}
	return idx
}

func TestApplyCommands(t *testing.T) {
	f := New(Config{})
	populate(t, f)
	st := f.State()
	_, e, err := st.KVSGet(nil, "a/b")
	if err != nil || e == nil || string(e.Value) != "1" || e.Flags != 7 {
		t.Fatalf("a/b = %+v, %v", e, err)
	}
	if _, e, _ := st.KVSGet(nil, "a/c"); e != nil {
		t.Fatalf("a/c should be deleted, got %+v", e)
	}
	_, lock, _ := st.KVSGet(nil, "lock")
	if lock == nil || lock.Session != "s1" || lock.LockIndex != 1 {
		t.Fatalf("lock = %+v", lock)
	}
	// A failed CAS is a false, not an error.
	if got := apply(t, f, 100, structs.KVSRequestType, &structs.KVSRequest{Op: structs.KVCAS, DirEnt: structs.DirEntry{Key: "a/b", RaftIndex: structs.RaftIndex{ModifyIndex: 1}}}); got != false {
		t.Fatalf("stale CAS = %#v, want false", got)
	}
	// Deregistering the node destroys its session and releases the lock.
	if got := apply(t, f, 101, structs.DeregisterRequestType, &structs.DeregisterRequest{Node: "n1"}); got != nil {
		t.Fatalf("deregister = %#v", got)
	}
	if _, lock, _ := st.KVSGet(nil, "lock"); lock == nil || lock.Session != "" {
		t.Fatalf("lock after node removal = %+v", lock)
	}
	// A failed transaction is a response with errors, not an apply error.
	resp, ok := apply(t, f, 102, structs.TxnRequestType, &structs.TxnRequest{Ops: structs.TxnOps{
		{KV: &structs.TxnKVOp{Verb: structs.KVSet, DirEnt: structs.DirEntry{Key: "t1"}}},
		{KV: &structs.TxnKVOp{Verb: structs.KVGet, DirEnt: structs.DirEntry{Key: "missing"}}},
	}}).(*structs.TxnResponse)
	if !ok || len(resp.Errors) != 1 || resp.Errors[0].OpIndex != 1 || resp.Results != nil {
		t.Fatalf("txn response = %#v", resp)
	}
	if _, e, _ := st.KVSGet(nil, "t1"); e != nil {
		t.Fatal("a failed transaction must not write")
	}
}

func TestApplyBadCommands(t *testing.T) {
	f := New(Config{})
	if got := f.Apply(&raft.Log{Type: raft.LogCommand}); !errors.Is(got.(error), ErrEmptyCommand) {
		t.Fatalf("empty = %#v", got)
	}
	// A known type with a corrupt body is an error, and changes nothing.
	got := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{byte(structs.KVSRequestType), 0xc1}})
	if err, ok := got.(error); !ok || !errors.Is(err, ErrDecode) {
		t.Fatalf("corrupt = %#v", got)
	}
	if f.State().LastIndex() != 0 {
		t.Fatal("a corrupt command changed the store")
	}
	// Unknown but ignorable: skipped.
	if got := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: []byte{byte(structs.IgnoreUnknownTypeFlag | 99), 1, 2}}); got != nil {
		t.Fatalf("ignorable = %#v", got)
	}
	// Unknown and not ignorable: stop loudly.
	defer func() {
		if recover() == nil {
			t.Fatal("unknown command did not panic")
		}
	}()
	f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: []byte{99}})
}

type bufSink struct {
	bytes.Buffer
	cancelled bool
}

func (b *bufSink) ID() string    { return "test" }
func (b *bufSink) Cancel() error { b.cancelled = true; return nil }
func (b *bufSink) Close() error  { return nil }

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := New(Config{})
	last := populateConfigEntries(t, src, populate(t, src)+1) // config_entry_test.go
	populateDedup(t, src, last+1)                             // dedup_test.go
	populateCoordinates(t, src, last+3)                       // coordinates_test.go
	data := snapshotBytes(t, src)

	dst := New(Config{})
	old := dst.State()
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-old.AbandonCh():
	default:
		t.Fatal("restore did not abandon the old store")
	}
	a, b := src.State().Snapshot(), dst.State().Snapshot()
	defer a.Close()
	defer b.Close()
	if a.LastIndex() != b.LastIndex() {
		t.Fatalf("last index %d != %d", a.LastIndex(), b.LastIndex())
	}
	check := func(name string, x, y any, errX, errY error) {
		t.Helper()
		if errX != nil || errY != nil {
			t.Fatalf("%s: %v %v", name, errX, errY)
		}
		if !reflect.DeepEqual(x, y) {
			t.Errorf("%s differ:\nsrc %#v\ndst %#v", name, x, y)
		}
	}
	n1, e1 := a.Nodes()
	n2, e2 := b.Nodes()
	check("nodes", n1, n2, e1, e2)
	for _, n := range n1 {
		s1, e1 := a.Services(n.Node)
		s2, e2 := b.Services(n.Node)
		check("services of "+n.Node, s1, s2, e1, e2)
		c1, e1 := a.Checks(n.Node)
		c2, e2 := b.Checks(n.Node)
		check("checks of "+n.Node, c1, c2, e1, e2)
	}
	k1, e1 := a.KVs()
	k2, e2 := b.KVs()
	check("kvs", k1, k2, e1, e2)
	t1, e1 := a.Tombstones()
	t2, e2 := b.Tombstones()
	check("tombstones", t1, t2, e1, e2)
	if len(t1) == 0 {
		t.Error("expected a tombstone for the deleted key")
	}
	ss1, e1 := a.Sessions()
	ss2, e2 := b.Sessions()
	check("sessions", ss1, ss2, e1, e2)
	ce1, e1 := a.ConfigEntries()
	ce2, e2 := b.ConfigEntries()
	check("config entries", ce1, ce2, e1, e2)
	r1, e1 := a.AppliedRequests()
	r2, e2 := b.AppliedRequests()
	check("applied requests", r1, r2, e1, e2)
	if len(r1) == 0 {
		t.Error("expected applied requests in the snapshot")
	}
	co1, e1 := a.Coordinates()
	co2, e2 := b.Coordinates()
	check("coordinates", co1, co2, e1, e2)
	if len(co1) == 0 {
		t.Error("expected coordinates in the snapshot")
	}
	i1, e1 := a.Indexes()
	i2, e2 := b.Indexes()
	check("indexes", i1, i2, e1, e2)
	// A second snapshot of the restored store is byte-identical.
	if again := snapshotBytes(t, dst); !bytes.Equal(again, data) {
		t.Error("snapshot of the restored store differs from the original")
	}
}

func TestRestoreRejectsBadStreams(t *testing.T) {
	good := snapshotBytes(t, func() *FSM { f := New(Config{}); populate(t, f); return f }())
	cases := map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a snapshot"),
		"truncated": good[:len(good)/2],
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			f := New(Config{})
			apply(t, f, 1, structs.KVSRequestType, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "keep"}})
			before := f.State()
			if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err == nil {
				t.Fatal("restore succeeded")
			}
			if f.State() != before {
				t.Fatal("a failed restore replaced the store")
			}
		})
	}
}

func TestBlockingReadWakesOnRestore(t *testing.T) {
	src := New(Config{})
	populate(t, src)
	data := snapshotBytes(t, src)

	f := New(Config{})
	st := f.State()
	woke := make(chan struct{})
	go func() {
		defer close(woke)
		<-st.AbandonCh()
	}()
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
	case <-time.After(5 * time.Second):
		t.Fatal("a watcher of the old store was not woken by the restore")
	}
}

func FuzzApplyCommand(f *testing.F) {
	c := structs.NewCodec()
	for _, seed := range []struct {
		t   structs.MessageType
		msg any
	}{
		{structs.RegisterRequestType, &structs.RegisterRequest{Node: "n", Address: "a"}},
		{structs.KVSRequestType, &structs.KVSRequest{Op: structs.KVSet, DirEnt: structs.DirEntry{Key: "k"}}},
		{structs.TxnRequestType, &structs.TxnRequest{Ops: structs.TxnOps{{KV: &structs.TxnKVOp{Verb: structs.KVGet}}}}},
	} {
		b, _ := c.EncodeCommand(seed.t, seed.msg)
		f.Add(b)
		d, _ := c.EncodeCommand(structs.DedupRequestType, &structs.DedupRequest{ID: "r", ProposedAt: 1, Command: b})
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		if _, known := commandTable()[structs.MessageType(data[0])&^structs.IgnoreUnknownTypeFlag]; !known {
			return // unknown commands panic by design
		}
		fsm := New(Config{})
		defer func() {
			// A dedup command may wrap an unknown command: that panics
			// by design too.
			if r := recover(); r != nil && !strings.Contains(fmt.Sprint(r), "unknown raft command type") {
				panic(r)
			}
		}()
		fsm.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
	})
}

// FuzzRestore feeds arbitrary snapshot streams to Restore: it must fail
// cleanly or restore a store whose own snapshot restores to the same bytes,
// never panic, and a failed restore must keep the store it had.
func FuzzRestore(f *testing.F) {
	src := New(Config{})
	populateDedup(f, src, populateConfigEntries(f, src, populate(f, src)+1)+1)
	seed := snapshotBytes(f, src)
	f.Add(seed)
	f.Add(seed[:len(seed)/3])
	f.Fuzz(func(t *testing.T, data []byte) {
		fsm := New(Config{})
		before := fsm.State()
		if err := fsm.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			if fsm.State() != before {
				t.Fatal("a failed restore replaced the store")
			}
			return
		}
		again := snapshotBytes(t, fsm)
		other := New(Config{})
		if err := other.Restore(io.NopCloser(bytes.NewReader(again))); err != nil {
			t.Fatalf("the snapshot of a restored store does not restore: %v", err)
		}
		if third := snapshotBytes(t, other); !bytes.Equal(third, again) {
			t.Fatal("snapshot, restore, snapshot is not stable")
		}
	})
}
