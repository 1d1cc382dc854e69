package state

import (
	"errors"
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func kv(key, value string) *structs.DirEntry {
	return &structs.DirEntry{Key: key, Value: []byte(value)}
}

func TestKVSSetGet(t *testing.T) {
	s := NewStore()
	in := &structs.DirEntry{Key: "a/b", Flags: 42, Value: []byte("v1")}
	must(t, s.KVSSet(1, in))
	if in.CreateIndex != 0 || in.ModifyIndex != 0 {
		t.Fatal("KVSSet modified its input")
	}
	in.Value[0] = 'X' // the store kept its own copy
	idx, e, err := s.KVSGet(nil, "a/b")
	must(t, err)
	want := &structs.DirEntry{Key: "a/b", Flags: 42, Value: []byte("v1"), RaftIndex: structs.RaftIndex{CreateIndex: 1, ModifyIndex: 1}}
	if !reflect.DeepEqual(e, want) || idx != 1 {
		t.Fatalf("get = %+v idx %d, want %+v idx 1", e, idx, want)
	}

	must(t, s.KVSSet(2, kv("a/b", "v2")))
	_, e, _ = s.KVSGet(nil, "a/b")
	if e.CreateIndex != 1 || e.ModifyIndex != 2 || string(e.Value) != "v2" || e.Flags != 0 {
		t.Fatalf("after update = %+v", e)
	}
	// Writing the same entry again changes nothing.
	must(t, s.KVSSet(3, kv("a/b", "v2")))
	if _, e, _ = s.KVSGet(nil, "a/b"); e.ModifyIndex != 2 || s.LastIndex() != 2 {
		t.Fatalf("identical set moved ModifyIndex to %d", e.ModifyIndex)
	}
	// Missing key: nil entry, table index.
	idx, e, err = s.KVSGet(nil, "missing")
	must(t, err)
	if e != nil || idx != 2 {
		t.Fatalf("missing key = %+v idx %d", e, idx)
	}
	if err := s.KVSSet(4, kv("", "x")); !errors.Is(err, ErrMissingKey) {
		t.Fatalf("empty key err = %v", err)
	}
}

func TestKVSSetCAS(t *testing.T) {
	s := NewStore()
	cases := []struct {
		name   string
		idx    uint64
		key    string
		cas    uint64
		wantOK bool
	}{
		{"create if absent", 1, "k", 0, true},
		{"create again fails", 2, "k", 0, false},
		{"stale index", 3, "k", 7, false},
		{"matching index", 4, "k", 1, true},
		{"old index after update", 5, "k", 1, false},
		{"non-zero index on missing key", 6, "other", 1, false},
	}
	for _, tc := range cases {
		ok, err := s.KVSSetCAS(tc.idx, &structs.DirEntry{Key: tc.key, Value: []byte(tc.name), RaftIndex: structs.RaftIndex{ModifyIndex: tc.cas}})
		must(t, err)
		if ok != tc.wantOK {
			t.Fatalf("%s: ok = %v, want %v", tc.name, ok, tc.wantOK)
		}
	}
	_, e, _ := s.KVSGet(nil, "k")
	if string(e.Value) != "matching index" || e.ModifyIndex != 4 || e.CreateIndex != 1 {
		t.Fatalf("entry = %+v", e)
	}
	if _, e, _ := s.KVSGet(nil, "other"); e != nil {
		t.Fatal("failed CAS created a key")
	}
}

func TestKVSDeletes(t *testing.T) {
	setup := func(t *testing.T) *Store {
		s := NewStore()
		for i, k := range []string{"app/a", "app/b", "app/sub/c", "apple", "other"} {
			must(t, s.KVSSet(uint64(i+1), kv(k, k)))
		}
		return s
	}
	keys := func(s *Store, prefix string) []string {
		_, ks, err := s.KVSListKeys(nil, prefix, "")
		must(t, err)
		return ks
	}
	t.Run("delete", func(t *testing.T) {
		s := setup(t)
		must(t, s.KVSDelete(10, "app/a"))
		must(t, s.KVSDelete(11, "never-existed"))
		if got := keys(s, "app"); !reflect.DeepEqual(got, []string{"app/b", "app/sub/c", "apple"}) {
			t.Fatalf("keys = %v", got)
		}
		stones := tombstones(t, s)
		if !reflect.DeepEqual(stones, []Tombstone{{Key: "app/a", Index: 10}}) {
			t.Fatalf("tombstones = %v", stones)
		}
	})
	t.Run("delete-cas", func(t *testing.T) {
		s := setup(t)
		ok, err := s.KVSDeleteCAS(10, 99, "app/a")
		must(t, err)
		if ok {
			t.Fatal("stale delete-cas succeeded")
		}
		mustOK(t)(s.KVSDeleteCAS(11, 1, "app/a"))
		mustOK(t)(s.KVSDeleteCAS(12, 1, "app/a")) // missing key: true, as in Consul
		if got := keys(s, "app/"); !reflect.DeepEqual(got, []string{"app/b", "app/sub/c"}) {
			t.Fatalf("keys = %v", got)
		}
		if stones := tombstones(t, s); len(stones) != 1 || stones[0].Index != 11 {
			t.Fatalf("tombstones = %v", stones)
		}
	})
	t.Run("delete-tree", func(t *testing.T) {
		s := setup(t)
		must(t, s.KVSDeleteTree(10, "app/"))
		if got := keys(s, ""); !reflect.DeepEqual(got, []string{"apple", "other"}) {
			t.Fatalf("keys = %v", got)
		}
		want := []Tombstone{{"app/a", 10}, {"app/b", 10}, {"app/sub/c", 10}}
		if stones := tombstones(t, s); !reflect.DeepEqual(stones, want) {
			t.Fatalf("tombstones = %v, want %v", stones, want)
		}
	})
}

func tombstones(t *testing.T, s *Store) []Tombstone {
	t.Helper()
	sn := s.Snapshot()
	defer sn.Close()
	stones, err := sn.Tombstones()
	must(t, err)
	return stones
}

func TestKVSListAndKeys(t *testing.T) {
	s := NewStore()
	for i, k := range []string{"a/1", "a/b/2", "a/b/3", "a/c/4", "a/d", "b/5"} {
		must(t, s.KVSSet(uint64(i+1), kv(k, "v")))
	}
	cases := []struct {
		prefix, sep string
		want        []string
		wantIdx     uint64
	}{
		{"a/", "", []string{"a/1", "a/b/2", "a/b/3", "a/c/4", "a/d"}, 5},
		{"a/", "/", []string{"a/1", "a/b/", "a/c/", "a/d"}, 5},
		{"a/b", "/", []string{"a/b/"}, 3},
		{"", "/", []string{"a/", "b/"}, 6},
		{"zzz", "", []string{}, 6},
	}
	for _, tc := range cases {
		idx, keys, err := s.KVSListKeys(nil, tc.prefix, tc.sep)
		must(t, err)
		if !reflect.DeepEqual(keys, tc.want) || idx != tc.wantIdx {
			t.Fatalf("keys(%q, %q) = %v idx %d, want %v idx %d", tc.prefix, tc.sep, keys, idx, tc.want, tc.wantIdx)
		}
	}
	idx, entries, err := s.KVSList(nil, "a/b/")
	must(t, err)
	if len(entries) != 2 || entries[0].Key != "a/b/2" || string(entries[1].Value) != "v" || idx != 3 {
		t.Fatalf("list = %+v idx %d", entries, idx)
	}

	// A delete under the prefix moves its index through the tombstone.
	must(t, s.KVSDelete(10, "a/b/2"))
	if idx, entries, _ := s.KVSList(nil, "a/b/"); idx != 10 || len(entries) != 1 {
		t.Fatalf("after delete: idx %d entries %d", idx, len(entries))
	}
	// ... and not the index of an unrelated prefix.
	if idx, _, _ := s.KVSList(nil, "a/c/"); idx != 4 {
		t.Fatalf("unrelated prefix idx = %d, want 4", idx)
	}
	// Reaping drops tombstones at or below the reap index only.
	must(t, s.KVSDelete(11, "a/c/4"))
	must(t, s.ReapTombstones(12, 10))
	if stones := tombstones(t, s); !reflect.DeepEqual(stones, []Tombstone{{"a/c/4", 11}}) {
		t.Fatalf("after reap: %v", stones)
	}
	if idx, _, _ := s.KVSList(nil, "a/b/"); idx != 3 {
		t.Fatalf("after reap idx = %d, want 3", idx)
	}
}

func TestKVSLockUnlock(t *testing.T) {
	s := NewStore()
	registerNode(t, s, 1, "n1")
	must(t, s.SessionCreate(2, &structs.Session{ID: "s1", Node: "n1"}))
	must(t, s.SessionCreate(3, &structs.Session{ID: "s2", Node: "n1"}))

	lock := func(idx uint64, sess, val string) (bool, error) {
		return s.KVSLock(idx, &structs.DirEntry{Key: "lock", Value: []byte(val), Session: sess})
	}
	unlock := func(idx uint64, sess string) (bool, error) {
		return s.KVSUnlock(idx, &structs.DirEntry{Key: "lock", Value: []byte("released"), Session: sess})
	}
	get := func() *structs.DirEntry {
		_, e, err := s.KVSGet(nil, "lock")
		must(t, err)
		return e
	}

	if _, err := lock(4, "nope", "x"); !errors.Is(err, ErrInvalidSession) || err.Error() != `invalid session "nope"` {
		t.Fatalf("lock with unknown session: %v", err)
	}
	if _, err := lock(4, "", "x"); !errors.Is(err, ErrMissingLockSession) {
		t.Fatalf("lock without session: %v", err)
	}
	if ok, _ := unlock(4, "s1"); ok {
		t.Fatal("unlock of a missing key succeeded")
	}

	steps := []struct {
		name          string
		op            func() (bool, error)
		wantOK        bool
		wantSession   string
		wantLockIndex uint64
		wantValue     string
	}{
		{"s1 acquires", func() (bool, error) { return lock(5, "s1", "a") }, true, "s1", 1, "a"},
		{"s1 re-acquires, updates value", func() (bool, error) { return lock(6, "s1", "b") }, true, "s1", 1, "b"},
		{"s2 cannot acquire", func() (bool, error) { return lock(7, "s2", "c") }, false, "s1", 1, "b"},
		{"s2 cannot release", func() (bool, error) { return unlock(8, "s2") }, false, "s1", 1, "b"},
		{"plain set keeps the session", func() (bool, error) {
			return true, s.KVSSet(9, &structs.DirEntry{Key: "lock", Value: []byte("d"), LockIndex: 1})
		}, true, "s1", 1, "d"},
		{"s1 releases", func() (bool, error) { return unlock(10, "s1") }, true, "", 1, "released"},
		{"s2 acquires, LockIndex moves", func() (bool, error) { return lock(11, "s2", "e") }, true, "s2", 2, "e"},
	}
	for _, st := range steps {
		ok, err := st.op()
		must(t, err)
		e := get()
		if ok != st.wantOK || e.Session != st.wantSession || e.LockIndex != st.wantLockIndex || string(e.Value) != st.wantValue {
			t.Fatalf("%s: ok=%v entry=%+v", st.name, ok, e)
		}
	}
	if e := get(); e.CreateIndex != 5 || e.ModifyIndex != 11 {
		t.Fatalf("indexes = %+v", e.RaftIndex)
	}
}
