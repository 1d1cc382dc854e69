package integration

import (
	"slices"
	"testing"

	"github.com/hashicorp/consul/api"
)

// apiKV: put, get (value, flags, indexes), a missing key (nil with an index
// that is never 0), list, keys with and without a separator, delete-tree
// that spares a sibling prefix, delete.
func apiKV(t *testing.T, c *api.Client) {
	kv := c.KV()
	const p = "apikv/"

	pair, meta, err := kv.Get(p+"missing", nil)
	if err != nil || pair != nil {
		t.Fatalf("Get missing = %+v, %v; want nil, nil", pair, err)
	}
	if meta.LastIndex == 0 {
		t.Error("Get missing: X-Consul-Index is 0 on a 404")
	}

	if _, err := kv.Put(&api.KVPair{Key: p + "a", Value: []byte("1"), Flags: 42}, nil); err != nil {
		t.Fatal(err)
	}
	pair, meta, err = kv.Get(p+"a", nil)
	if err != nil || pair == nil {
		t.Fatalf("Get a = %+v, %v", pair, err)
	}
	if string(pair.Value) != "1" || pair.Flags != 42 || pair.CreateIndex == 0 || pair.ModifyIndex != pair.CreateIndex ||
		pair.LockIndex != 0 || pair.Session != "" {
		t.Errorf("Get a = %+v", pair)
	}
	if meta.LastIndex < pair.ModifyIndex {
		t.Errorf("LastIndex %d < ModifyIndex %d", meta.LastIndex, pair.ModifyIndex)
	}
	created := pair.CreateIndex

	if _, err := kv.Put(&api.KVPair{Key: p + "a", Value: []byte("2")}, nil); err != nil {
		t.Fatal(err)
	}
	pair, _, err = kv.Get(p+"a", nil)
	if err != nil || pair == nil || string(pair.Value) != "2" || pair.Flags != 0 || pair.CreateIndex != created || pair.ModifyIndex <= created {
		t.Errorf("after update Get a = %+v, %v (created at %d)", pair, err, created)
	}

	for k, v := range map[string]string{p + "b": "b", p + "sub/c": "c", "apikv-sibling": "s"} {
		if _, err := kv.Put(&api.KVPair{Key: k, Value: []byte(v)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	pairs, _, err := kv.List(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, kp := range pairs {
		listed = append(listed, kp.Key+"="+string(kp.Value))
	}
	if want := []string{p + "a=2", p + "b=b", p + "sub/c=c"}; !slices.Equal(listed, want) {
		t.Errorf("List(%s) = %v, want %v", p, listed, want)
	}
	keys, _, err := kv.Keys(p, "/", nil)
	if want := []string{p + "a", p + "b", p + "sub/"}; err != nil || !slices.Equal(keys, want) {
		t.Errorf("Keys(%s, /) = %v, %v; want %v", p, keys, err, want)
	}
	keys, _, err = kv.Keys(p, "", nil)
	if want := []string{p + "a", p + "b", p + "sub/c"}; err != nil || !slices.Equal(keys, want) {
		t.Errorf("Keys(%s) = %v, %v; want %v", p, keys, err, want)
	}
	pairs, meta, err = kv.List("apikv-none/", nil)
	if err != nil || len(pairs) != 0 || meta.LastIndex == 0 {
		t.Errorf("List of a missing prefix = %v, index %d, %v; want empty with an index", pairs, meta.LastIndex, err)
	}

	if _, err := kv.DeleteTree(p, nil); err != nil {
		t.Fatal(err)
	}
	pairs, _, err = kv.List(p, nil)
	if err != nil || len(pairs) != 0 {
		t.Errorf("List after DeleteTree = %v, %v", pairs, err)
	}
	pair, _, err = kv.Get("apikv-sibling", nil)
	if err != nil || pair == nil || string(pair.Value) != "s" {
		t.Errorf("DeleteTree(%s) touched apikv-sibling: %+v, %v", p, pair, err)
	}
	if _, err := kv.Delete("apikv-sibling", nil); err != nil {
		t.Fatal(err)
	}
	if pair, _, err = kv.Get("apikv-sibling", nil); err != nil || pair != nil {
		t.Errorf("Get after Delete = %+v, %v", pair, err)
	}
	if _, err := kv.Delete("apikv-never-existed", nil); err != nil {
		t.Errorf("Delete of a missing key = %v, want success", err)
	}
}

// apiKVCAS: check-and-set with index 0 (create only), a stale index and the
// current one; DeleteCAS likewise.
func apiKVCAS(t *testing.T, c *api.Client) {
	kv := c.KV()
	const k = "apicas/k"
	cas := func(value string, idx uint64) bool {
		t.Helper()
		ok, _, err := kv.CAS(&api.KVPair{Key: k, Value: []byte(value), ModifyIndex: idx}, nil)
		if err != nil {
			t.Fatalf("CAS(%s, %d): %v", value, idx, err)
		}
		return ok
	}
	get := func() *api.KVPair {
		t.Helper()
		p, _, err := kv.Get(k, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	if !cas("v1", 0) {
		t.Fatal("CAS with index 0 on a missing key failed")
	}
	if cas("v1-again", 0) {
		t.Error("CAS with index 0 on an existing key succeeded")
	}
	p := get()
	if p == nil || string(p.Value) != "v1" {
		t.Fatalf("after CAS create: %+v", p)
	}
	old := p.ModifyIndex
	if !cas("v2", old) {
		t.Fatal("CAS with the current index failed")
	}
	if cas("v3", old) {
		t.Error("CAS with a stale index succeeded")
	}
	if p = get(); p == nil || string(p.Value) != "v2" {
		t.Fatalf("after CAS: %+v, want v2", p)
	}

	ok, _, err := kv.DeleteCAS(&api.KVPair{Key: k, ModifyIndex: old}, nil)
	if err != nil || ok {
		t.Errorf("DeleteCAS with a stale index = %v, %v; want false", ok, err)
	}
	if get() == nil {
		t.Fatal("a failed DeleteCAS deleted the key")
	}
	ok, _, err = kv.DeleteCAS(&api.KVPair{Key: k, ModifyIndex: p.ModifyIndex}, nil)
	if err != nil || !ok {
		t.Errorf("DeleteCAS with the current index = %v, %v; want true", ok, err)
	}
	if p := get(); p != nil {
		t.Errorf("key still there after DeleteCAS: %+v", p)
	}
}

// apiTxn: a transaction of sets and a get commits atomically at one index;
// a failing check-index rolls the whole transaction back (409, nothing
// stored); cas, delete and delete-tree verbs work inside a transaction.
func apiTxn(t *testing.T, c *api.Client) {
	kv := c.KV()
	txn := c.Txn()
	const p = "apitxn/"

	ok, resp, _, err := txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: p + "a", Value: []byte("1")}},
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: p + "b", Value: []byte("2"), Flags: 7}},
		{KV: &api.KVTxnOp{Verb: api.KVGet, Key: p + "a"}},
	}, nil)
	if err != nil || !ok {
		t.Fatalf("Txn = %v, %+v, %v", ok, resp, err)
	}
	if len(resp.Errors) != 0 || len(resp.Results) != 3 {
		t.Fatalf("Txn results %d, errors %+v", len(resp.Results), resp.Errors)
	}
	r := resp.Results
	if r[0].KV == nil || r[1].KV == nil || r[2].KV == nil {
		t.Fatalf("Txn results without KV: %+v", r)
	}
	if r[0].KV.Key != p+"a" || r[0].KV.Value != nil || r[1].KV.Flags != 7 || string(r[2].KV.Value) != "1" {
		t.Errorf("Txn results: set a %+v, set b %+v, get a %+v (set results echo the entry without its value)", r[0].KV, r[1].KV, r[2].KV)
	}
	idx := r[0].KV.ModifyIndex
	if idx == 0 || r[1].KV.ModifyIndex != idx || r[2].KV.ModifyIndex != idx {
		t.Errorf("Txn ops did not share one ModifyIndex: %d %d %d", idx, r[1].KV.ModifyIndex, r[2].KV.ModifyIndex)
	}

	ok, resp, _, err = txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: p + "a", Index: idx + 1}},
		{KV: &api.KVTxnOp{Verb: api.KVSet, Key: p + "c", Value: []byte("3")}},
	}, nil)
	if err != nil || ok {
		t.Fatalf("failing Txn = %v, %v; want rolled back (409)", ok, err)
	}
	if len(resp.Errors) == 0 || resp.Errors[0].OpIndex != 0 || resp.Errors[0].What == "" {
		t.Errorf("failing Txn errors = %+v, want OpIndex 0 with a reason", resp.Errors)
	}
	if pair, _, err := kv.Get(p+"c", nil); err != nil || pair != nil {
		t.Errorf("a rolled-back Txn stored %+v (%v)", pair, err)
	}

	ok, resp, _, err = txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: p + "a", Value: []byte("10"), Index: idx}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: p + "b"}},
	}, nil)
	if err != nil || !ok {
		t.Fatalf("cas+delete Txn = %v, %+v, %v", ok, resp, err)
	}
	if pair, _, _ := kv.Get(p+"a", nil); pair == nil || string(pair.Value) != "10" {
		t.Errorf("after Txn cas: %+v", pair)
	}
	if pair, _, _ := kv.Get(p+"b", nil); pair != nil {
		t.Errorf("after Txn delete: %+v", pair)
	}

	ok, _, _, err = txn.Txn(api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDeleteTree, Key: p}}}, nil)
	if err != nil || !ok {
		t.Fatalf("delete-tree Txn = %v, %v", ok, err)
	}
	if pairs, _, err := kv.List(p, nil); err != nil || len(pairs) != 0 {
		t.Errorf("after Txn delete-tree: %v, %v", pairs, err)
	}
}
