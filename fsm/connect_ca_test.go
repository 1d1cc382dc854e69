package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// populateCA applies a CA bootstrap, a serial reservation and a rotation
// through the FSM, starting at index idx, and returns the last index.
func populateCA(t *testing.T, f *FSM, idx uint64) uint64 {
	t.Helper()
	root := func(id string, active bool) *structs.CARoot {
		return &structs.CARoot{ID: id, RootCert: "PEM-" + id, Active: active, IntermediateCerts: []string{"X"},
			NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	// One key only: the codec writes maps in Go's random order, and the
	// test compares snapshot bytes.
	cfg := &structs.CAConfiguration{ClusterID: "cid", Provider: "consul", Config: map[string]interface{}{"LeafCertTTL": "72h"}}
	if got := apply(t, f, idx, structs.ConnectCARequestType, &structs.CARequest{Op: structs.CAOpSetRootsAndConfig,
		Roots: structs.CARoots{root("r1", true)}, SigningKeys: []*structs.CASigningKey{{RootID: "r1", PrivateKey: "K1"}}, Config: cfg}); got != true {
		t.Fatalf("bootstrap = %#v", got)
	}
	block, ok := apply(t, f, idx+1, structs.ConnectCALeafRequestType, &structs.CALeafRequest{Op: structs.CALeafOpReserveSerials, Count: 64}).(*structs.CASerialBlock)
	if !ok || block.First != 1 || block.Count != 64 || block.Index != idx+1 {
		t.Fatalf("reservation = %#v", block)
	}
	old := root("r1", false)
	old.RotatedOutAt = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if got := apply(t, f, idx+2, structs.ConnectCARequestType, &structs.CARequest{Op: structs.CAOpSetRootsAndConfig, Index: idx,
		Roots: structs.CARoots{old, root("r2", true)}, SigningKeys: []*structs.CASigningKey{{RootID: "r2", PrivateKey: "K2"}}, Config: cfg}); got != true {
		t.Fatalf("rotation = %#v", got)
	}
	// A rotation built on a stale read loses its check-and-set.
	if got := apply(t, f, idx+3, structs.ConnectCARequestType, &structs.CARequest{Op: structs.CAOpSetRootsAndConfig, Index: idx,
		Roots: structs.CARoots{root("r3", true)}, SigningKeys: []*structs.CASigningKey{{RootID: "r3", PrivateKey: "K3"}}}); got != false {
		t.Fatalf("stale rotation = %#v", got)
	}
	if got := apply(t, f, idx+4, structs.ConnectCARequestType, &structs.CARequest{Op: "bogus"}); got == nil {
		t.Fatal("unknown CA op accepted")
	}
	return idx + 4
}

func TestConnectCACommandsAndSnapshot(t *testing.T) {
	src := New(Config{})
	last := populate(t, src)
	populateCA(t, src, last+1)
	data := snapshotBytes(t, src)

	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	a, b := src.State(), dst.State()
	i1, c1, e1 := a.CAConfig(nil)
	i2, c2, e2 := b.CAConfig(nil)
	if e1 != nil || e2 != nil || i1 != i2 || !reflect.DeepEqual(c1, c2) || c2.ClusterID != "cid" {
		t.Fatalf("config: %d %+v vs %d %+v (%v %v)", i1, c1, i2, c2, e1, e2)
	}
	i1, r1, e1 := a.CARoots(nil)
	i2, r2, e2 := b.CARoots(nil)
	if e1 != nil || e2 != nil || i1 != i2 || !reflect.DeepEqual(r1, r2) || len(r2) != 2 || r2.Active().ID != "r2" {
		t.Fatalf("roots: %d %+v vs %d %+v", i1, r1, i2, r2)
	}
	for id, want := range map[string]string{"r1": "K1", "r2": "K2"} {
		if k, err := b.CASigningKey(id); err != nil || k == nil || k.PrivateKey != want {
			t.Fatalf("restored key %s = %+v %v", id, k, err)
		}
	}
	if a.CANextSerial() != 65 || b.CANextSerial() != 65 {
		t.Fatalf("serial %d / %d", a.CANextSerial(), b.CANextSerial())
	}
	if a.LastIndex() != b.LastIndex() {
		t.Fatalf("last index %d != %d", a.LastIndex(), b.LastIndex())
	}
	if again := snapshotBytes(t, dst); !bytes.Equal(again, data) {
		t.Fatal("snapshot of the restored store differs from the original")
	}
}

func TestConnectCALeafBadOp(t *testing.T) {
	f := New(Config{})
	if _, ok := apply(t, f, 1, structs.ConnectCALeafRequestType, &structs.CALeafRequest{Op: "nope", Count: 1}).(error); !ok {
		t.Fatal("unknown leaf op accepted")
	}
	if _, ok := apply(t, f, 2, structs.ConnectCALeafRequestType, &structs.CALeafRequest{Op: structs.CALeafOpReserveSerials}).(error); !ok {
		t.Fatal("zero-count reservation accepted")
	}
}
