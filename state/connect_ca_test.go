package state

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

func caConfig(ttl string) *structs.CAConfiguration {
	return &structs.CAConfiguration{ClusterID: "cid", Provider: "consul",
		Config: map[string]interface{}{"LeafCertTTL": ttl, "PrivateKeyBits": int64(256)}}
}

func caRoot(id string, active bool) *structs.CARoot {
	return &structs.CARoot{ID: id, Name: "Consul CA Root Cert", RootCert: "PEM-" + id, Active: active,
		IntermediateCerts: []string{"X-" + id}, NotAfter: time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func caKey(id string) *structs.CASigningKey {
	return &structs.CASigningKey{RootID: id, PrivateKey: "KEY-" + id}
}

// caFixture bootstraps a CA, rotates it once, prunes nothing and reserves
// serials, so that every CA table holds data (used by the snapshot tests).
func caFixture(t *testing.T, s *Store, idx uint64) {
	t.Helper()
	mustOK(t)(s.CASetRootsAndConfig(idx, &structs.CARequest{Roots: structs.CARoots{caRoot("r1", true)},
		SigningKeys: []*structs.CASigningKey{caKey("r1")}, Config: caConfig("72h")}))
	old := caRoot("r1", false)
	old.RotatedOutAt = time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	mustOK(t)(s.CASetRootsAndConfig(idx+1, &structs.CARequest{Index: idx, Roots: structs.CARoots{old, caRoot("r2", true)},
		SigningKeys: []*structs.CASigningKey{caKey("r2")}, Config: caConfig("24h")}))
	if _, err := s.CAReserveSerials(idx+2, 100); err != nil {
		t.Fatal(err)
	}
}

// restoreCA copies the CA tables of a snapshot into a restore, as the FSM
// does.
func restoreCA(t *testing.T, sn *Snapshot, r *Restore) {
	t.Helper()
	cfg, err := sn.CAConfig()
	must(t, err)
	must(t, r.CAConfig(cfg))
	roots, keys, err := sn.CARoots()
	must(t, err)
	for i := range roots {
		must(t, r.CARoot(roots[i], keys[i]))
	}
	must(t, r.CASerial(sn.CANextSerial()))
}

func TestCABootstrapAndRotate(t *testing.T) {
	s := NewStore()
	if idx, cfg, err := s.CAConfig(nil); err != nil || cfg != nil || idx != 0 {
		t.Fatalf("empty store config = %+v %d %v", cfg, idx, err)
	}
	ws := memdb.NewWatchSet()
	idx0, roots, err := s.CARoots(ws)
	must(t, err)
	if len(roots) != 0 {
		t.Fatalf("roots = %v", roots)
	}
	// Bootstrap: CAS against a table never written.
	mustOK(t)(s.CASetRootsAndConfig(5, &structs.CARequest{Index: 0, Roots: structs.CARoots{caRoot("r1", true)},
		SigningKeys: []*structs.CASigningKey{caKey("r1")}, Config: caConfig("72h")}))
	if !fires(ws) {
		t.Fatal("roots watch did not fire")
	}
	idx, active, err := s.CARootActive(nil)
	must(t, err)
	if idx != 5 || active == nil || active.ID != "r1" || active.CreateIndex != 5 {
		t.Fatalf("active = %+v at %d (was %d)", active, idx, idx0)
	}
	// A second bootstrap (another leader, stale read) loses the CAS.
	ok, err := s.CASetRootsAndConfig(6, &structs.CARequest{Index: 0, Roots: structs.CARoots{caRoot("rX", true)},
		SigningKeys: []*structs.CASigningKey{caKey("rX")}, Config: caConfig("72h")})
	if err != nil || ok {
		t.Fatalf("stale bootstrap = %v %v", ok, err)
	}
	// Rotation keeps the old root (inactive), adds the new, moves config.
	old := caRoot("r1", false)
	mustOK(t)(s.CASetRootsAndConfig(7, &structs.CARequest{Index: 5, Roots: structs.CARoots{old, caRoot("r2", true)},
		SigningKeys: []*structs.CASigningKey{caKey("r2")}, Config: &structs.CAConfiguration{ClusterID: "changed", Provider: "consul"}}))
	idx, roots, err = s.CARoots(nil)
	must(t, err)
	if idx != 7 || len(roots) != 2 || roots[0].ID != "r1" || roots[0].Active || roots[0].CreateIndex != 5 ||
		roots[0].ModifyIndex != 7 || !roots[1].Active || roots[1].CreateIndex != 7 {
		t.Fatalf("roots after rotation at %d: %s", idx, dump(roots))
	}
	_, cfg, err := s.CAConfig(nil)
	must(t, err)
	if cfg.ClusterID != "cid" || cfg.CreateIndex != 5 || cfg.ModifyIndex != 7 {
		t.Fatalf("config %+v: the cluster ID is fixed", cfg)
	}
	for _, id := range []string{"r1", "r2"} {
		k, err := s.CASigningKey(id)
		if err != nil || k == nil || k.PrivateKey != "KEY-"+id {
			t.Fatalf("key %s = %+v %v", id, k, err)
		}
	}
	// Reads never carry keys: roots are a separate type without one.
	if strings.Contains(dump(roots), "KEY-") {
		t.Fatal("roots read shows a key")
	}
	// Pruning drops the old root and its key but never the active one.
	must(t, s.CAPruneRoots(8, []string{"r1", "r2"}))
	_, roots, _ = s.CARoots(nil)
	if len(roots) != 1 || roots[0].ID != "r2" {
		t.Fatalf("after prune: %s", dump(roots))
	}
	if k, _ := s.CASigningKey("r1"); k != nil {
		t.Fatal("pruned root kept its key")
	}
}

func TestCASetRootsValidation(t *testing.T) {
	s := NewStore()
	cases := []struct {
		name string
		req  *structs.CARequest
		want error
	}{
		{"no config yet", &structs.CARequest{Roots: structs.CARoots{caRoot("r", true)}, SigningKeys: []*structs.CASigningKey{caKey("r")}}, ErrCAMissingConfig},
		{"no active", &structs.CARequest{Roots: structs.CARoots{caRoot("r", false)}, SigningKeys: []*structs.CASigningKey{caKey("r")}, Config: caConfig("1h")}, ErrCARootsActive},
		{"two active", &structs.CARequest{Roots: structs.CARoots{caRoot("a", true), caRoot("b", true)}, Config: caConfig("1h")}, ErrCARootsActive},
		{"no key", &structs.CARequest{Roots: structs.CARoots{caRoot("r", true)}, Config: caConfig("1h")}, ErrCAMissingKey},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, err := s.CASetRootsAndConfig(uint64(i+1), tc.req)
			if ok || !errors.Is(err, tc.want) {
				t.Fatalf("got %v %v, want %v", ok, err, tc.want)
			}
		})
	}
	if s.LastIndex() != 0 {
		t.Fatal("a refused write changed the store")
	}
}

func TestCASerials(t *testing.T) {
	s := NewStore()
	if s.CANextSerial() != 1 {
		t.Fatal("serials start at 1")
	}
	first, err := s.CAReserveSerials(3, 10)
	must(t, err)
	second, err := s.CAReserveSerials(4, 5)
	must(t, err)
	if first != 1 || second != 11 || s.CANextSerial() != 16 {
		t.Fatalf("blocks at %d and %d, next %d", first, second, s.CANextSerial())
	}
	if _, err := s.CAReserveSerials(5, 0); err == nil {
		t.Fatal("zero-sized block accepted")
	}
}

func TestCASetConfigKeepsClusterID(t *testing.T) {
	s := NewStore()
	must(t, s.CASetConfig(2, caConfig("72h")))
	must(t, s.CASetConfig(3, &structs.CAConfiguration{Provider: "consul", Config: map[string]interface{}{"LeafCertTTL": "1h"}}))
	_, cfg, err := s.CAConfig(nil)
	must(t, err)
	if cfg.ClusterID != "cid" || cfg.Config["LeafCertTTL"] != "1h" || cfg.CreateIndex != 2 || cfg.ModifyIndex != 3 {
		t.Fatalf("config = %+v", cfg)
	}
	// The returned copy is the caller's.
	cfg.Config["LeafCertTTL"] = "mutated"
	_, again, _ := s.CAConfig(nil)
	if again.Config["LeafCertTTL"] != "1h" {
		t.Fatal("a read returned the stored map")
	}
}

func TestCASnapshotRestore(t *testing.T) {
	src := NewStore()
	caFixture(t, src, 10)
	sn := src.Snapshot()
	defer sn.Close()
	dst := NewStore()
	r := dst.Restore()
	restoreCA(t, sn, r)
	indexes, err := sn.Indexes()
	must(t, err)
	for _, e := range indexes {
		must(t, r.Index(e))
	}
	must(t, r.Commit())
	want, got := dumpTables(t, src), dumpTables(t, dst)
	for _, table := range []string{tableCAConfig, tableCARoots, tableCAKeys, tableCASerial, tableIndex} {
		if dump(want[table]) != dump(got[table]) || len(want[table]) == 0 {
			t.Errorf("table %s:\n got %s\nwant %s", table, dump(got[table]), dump(want[table]))
		}
	}
	// Keys are hidden from JSON; compare them directly.
	for _, id := range []string{"r1", "r2"} {
		k, _ := dst.CASigningKey(id)
		if k == nil || k.PrivateKey != "KEY-"+id {
			t.Fatalf("restored key %s = %+v", id, k)
		}
	}
	if dst.CANextSerial() != 101 {
		t.Fatalf("restored serial %d", dst.CANextSerial())
	}
}
