package state

import (
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func kvOp(verb structs.KVOp, e structs.DirEntry) *structs.TxnOp {
	return &structs.TxnOp{KV: &structs.TxnKVOp{Verb: verb, DirEnt: e}}
}

func txnFixture(t *testing.T) *Store {
	t.Helper()
	s := NewStore()
	must(t, s.KVSSet(1, kv("a", "1")))
	must(t, s.KVSSet(2, kv("dir/x", "2")))
	must(t, s.KVSSet(3, kv("dir/y", "3")))
	registerNode(t, s, 4, "n1")
	must(t, s.SessionCreate(5, &structs.Session{ID: "s1", Node: "n1"}))
	must(t, s.SessionCreate(5, &structs.Session{ID: "s2", Node: "n1"}))
	mustOK(t)(s.KVSLock(6, &structs.DirEntry{Key: "locked", Value: []byte("L"), Session: "s1"}))
	return s
}

func TestTxnVerbs(t *testing.T) {
	entry := func(key, val string, create, modify uint64) *structs.DirEntry {
		e := &structs.DirEntry{Key: key, RaftIndex: structs.RaftIndex{CreateIndex: create, ModifyIndex: modify}}
		if val != "" {
			e.Value = []byte(val)
		}
		return e
	}
	cases := []struct {
		name    string
		op      *structs.TxnOp
		want    []*structs.DirEntry // results (nil: none)
		wantErr string
	}{
		{"set echoes without value", kvOp(structs.KVSet, structs.DirEntry{Key: "new", Value: []byte("v")}),
			[]*structs.DirEntry{entry("new", "", 10, 10)}, ""},
		{"cas create", kvOp(structs.KVCAS, structs.DirEntry{Key: "new", Value: []byte("v")}),
			[]*structs.DirEntry{entry("new", "", 10, 10)}, ""},
		{"cas stale", kvOp(structs.KVCAS, structs.DirEntry{Key: "a", Value: []byte("v"), RaftIndex: structs.RaftIndex{ModifyIndex: 9}}),
			nil, `failed to set key "a", index is stale`},
		{"get returns value", kvOp(structs.KVGet, structs.DirEntry{Key: "a"}),
			[]*structs.DirEntry{entry("a", "1", 1, 1)}, ""},
		{"get missing", kvOp(structs.KVGet, structs.DirEntry{Key: "x"}), nil, `key "x" doesn't exist`},
		{"get-tree", kvOp(structs.KVGetTree, structs.DirEntry{Key: "dir/"}),
			[]*structs.DirEntry{entry("dir/x", "2", 2, 2), entry("dir/y", "3", 3, 3)}, ""},
		{"delete", kvOp(structs.KVDelete, structs.DirEntry{Key: "a"}), nil, ""},
		{"delete-tree", kvOp(structs.KVDeleteTree, structs.DirEntry{Key: "dir/"}), nil, ""},
		{"delete-cas ok", kvOp(structs.KVDeleteCAS, structs.DirEntry{Key: "a", RaftIndex: structs.RaftIndex{ModifyIndex: 1}}), nil, ""},
		{"delete-cas stale", kvOp(structs.KVDeleteCAS, structs.DirEntry{Key: "a", RaftIndex: structs.RaftIndex{ModifyIndex: 2}}),
			nil, `failed to delete key "a", index is stale`},
		{"lock", kvOp(structs.KVLock, structs.DirEntry{Key: "a", Value: []byte("v"), Session: "s1"}),
			[]*structs.DirEntry{{Key: "a", LockIndex: 1, Session: "s1", RaftIndex: structs.RaftIndex{CreateIndex: 1, ModifyIndex: 10}}}, ""},
		{"lock unknown session", kvOp(structs.KVLock, structs.DirEntry{Key: "locked", Session: "s3"}),
			nil, `invalid session "s3"`},
		{"lock held by another", kvOp(structs.KVLock, structs.DirEntry{Key: "locked", Session: "s2"}),
			nil, `failed to lock key "locked", lock is already held`},
		{"unlock", kvOp(structs.KVUnlock, structs.DirEntry{Key: "locked", Session: "s1"}),
			[]*structs.DirEntry{{Key: "locked", LockIndex: 1, RaftIndex: structs.RaftIndex{CreateIndex: 6, ModifyIndex: 10}}}, ""},
		{"unlock not held", kvOp(structs.KVUnlock, structs.DirEntry{Key: "a", Session: "s1"}),
			nil, `failed to unlock key "a", lock isn't held, or is held by another session`},
		{"check-index ok", kvOp(structs.KVCheckIndex, structs.DirEntry{Key: "a", RaftIndex: structs.RaftIndex{ModifyIndex: 1}}),
			[]*structs.DirEntry{entry("a", "", 1, 1)}, ""},
		{"check-index mismatch", kvOp(structs.KVCheckIndex, structs.DirEntry{Key: "a", RaftIndex: structs.RaftIndex{ModifyIndex: 4}}),
			nil, `failed index check for key "a", current modify index 1 != 4`},
		{"check-index missing", kvOp(structs.KVCheckIndex, structs.DirEntry{Key: "x"}),
			nil, `failed to check index, key "x" doesn't exist`},
		{"check-session ok", kvOp(structs.KVCheckSession, structs.DirEntry{Key: "locked", Session: "s1"}),
			[]*structs.DirEntry{{Key: "locked", LockIndex: 1, Session: "s1", RaftIndex: structs.RaftIndex{CreateIndex: 6, ModifyIndex: 6}}}, ""},
		{"check-session mismatch", kvOp(structs.KVCheckSession, structs.DirEntry{Key: "locked", Session: "b"}),
			nil, `failed session check for key "locked", current session "s1" != "b"`},
		{"check-not-exists ok", kvOp(structs.KVCheckNotExists, structs.DirEntry{Key: "x"}), nil, ""},
		{"check-not-exists fails", kvOp(structs.KVCheckNotExists, structs.DirEntry{Key: "a"}), nil, `key "a" exists`},
		{"unknown verb", kvOp("frobnicate", structs.DirEntry{Key: "a"}), nil, `unknown KV verb "frobnicate"`},
		{"empty op", &structs.TxnOp{}, nil, "no operation specified"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := txnFixture(t)
			results, errs := s.TxnRW(10, structs.TxnOps{tc.op})
			if tc.wantErr != "" {
				if len(errs) != 1 || errs[0].What != tc.wantErr || errs[0].OpIndex != 0 || results != nil {
					t.Fatalf("errs = %+v results = %+v, want %q", errs, results, tc.wantErr)
				}
				return
			}
			if len(errs) != 0 {
				t.Fatalf("errs = %+v", errs[0])
			}
			var got []*structs.DirEntry
			for _, r := range results {
				got = append(got, r.KV)
			}
			if !reflect.DeepEqual(got, tc.want) {
				for _, g := range got {
					t.Logf("got %+v", g)
				}
				t.Fatalf("results differ, want %+v", tc.want)
			}
		})
	}
}

func TestTxnAllOrNothing(t *testing.T) {
	s := txnFixture(t)
	before := s.LastIndex()
	ops := structs.TxnOps{
		kvOp(structs.KVSet, structs.DirEntry{Key: "b", Value: []byte("new")}),
		kvOp(structs.KVDelete, structs.DirEntry{Key: "a"}),
		kvOp(structs.KVCheckIndex, structs.DirEntry{Key: "dir/x", RaftIndex: structs.RaftIndex{ModifyIndex: 99}}),
		kvOp(structs.KVDeleteTree, structs.DirEntry{Key: "dir/"}),
		kvOp(structs.KVGet, structs.DirEntry{Key: "missing"}),
	}
	results, errs := s.TxnRW(20, ops)
	if results != nil || len(errs) != 2 || errs[0].OpIndex != 2 || errs[1].OpIndex != 4 {
		t.Fatalf("results %+v errs %+v", results, errs)
	}
	if s.LastIndex() != before {
		t.Fatal("failed transaction moved the index")
	}
	_, keys, _ := s.KVSListKeys(nil, "", "")
	if !reflect.DeepEqual(keys, []string{"a", "dir/x", "dir/y", "locked"}) {
		t.Fatalf("failed transaction changed keys: %v", keys)
	}
	if len(tombstones(t, s)) != 0 {
		t.Fatal("failed transaction left tombstones")
	}

	// Without the failing operations, everything applies at one index and
	// later operations see earlier ones.
	ops = structs.TxnOps{
		kvOp(structs.KVSet, structs.DirEntry{Key: "b", Value: []byte("new")}),
		kvOp(structs.KVCheckNotExists, structs.DirEntry{Key: "c"}),
		kvOp(structs.KVDelete, structs.DirEntry{Key: "a"}),
		kvOp(structs.KVCheckNotExists, structs.DirEntry{Key: "a"}),
		kvOp(structs.KVGet, structs.DirEntry{Key: "b"}),
	}
	results, errs = s.TxnRW(21, ops)
	if len(errs) != 0 || len(results) != 2 {
		t.Fatalf("results %+v errs %+v", results, errs)
	}
	if string(results[1].KV.Value) != "new" || results[1].KV.ModifyIndex != 21 || results[0].KV.Value != nil {
		t.Fatalf("results = %+v %+v", results[0].KV, results[1].KV)
	}
	// Mutating a result does not reach the store.
	results[1].KV.Value[0] = 'X'
	if _, e, _ := s.KVSGet(nil, "b"); string(e.Value) != "new" {
		t.Fatal("txn result shares memory with the store")
	}
}

func TestTxnRO(t *testing.T) {
	s := txnFixture(t)
	idx, results, errs := s.TxnRO(nil, structs.TxnOps{
		kvOp(structs.KVGet, structs.DirEntry{Key: "a"}),
		kvOp(structs.KVGetTree, structs.DirEntry{Key: "dir/"}),
		kvOp(structs.KVCheckIndex, structs.DirEntry{Key: "a", RaftIndex: structs.RaftIndex{ModifyIndex: 1}}),
	})
	if len(errs) != 0 || len(results) != 4 || idx != 6 {
		t.Fatalf("idx %d results %d errs %+v", idx, len(results), errs)
	}
	_, results, errs = s.TxnRO(nil, structs.TxnOps{
		kvOp(structs.KVGet, structs.DirEntry{Key: "a"}),
		kvOp(structs.KVSet, structs.DirEntry{Key: "a", Value: []byte("no")}),
	})
	if results != nil || len(errs) != 1 || errs[0].OpIndex != 1 {
		t.Fatalf("write in read-only txn: results %+v errs %+v", results, errs)
	}
}
