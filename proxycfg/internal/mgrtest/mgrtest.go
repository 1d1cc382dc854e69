// Package mgrtest builds, for the config sources' tests, a real
// proxycfg.Manager over the server-local data sources of a state store.
package mgrtest

import (
	"context"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/leaf"
	"github.com/trellis-mesh/trellis/proxycfg/datasources/serverstate"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// StubLeaves is a leaf manager stand-in: every service's certificate is
// the same fixed one, which never changes.
type StubLeaves struct{}

// Watch implements leaf.Watcher.
func (StubLeaves) Watch(ctx context.Context, service, _ string, fn func(*structs.IssuedCert, error)) error {
	c := &structs.IssuedCert{Service: service, CertPEM: "CERT", PrivateKeyPEM: "KEY"}
	c.ModifyIndex = 1
	fn(c, nil)
	return nil
}

// Manager returns a manager (coalescing off) over the server-local
// sources of store, with leaves from getter (StubLeaves when nil). It and
// its sources are closed when the test ends.
func Manager(t testing.TB, store func() *state.Store, getter leaf.Watcher) *proxycfg.Manager {
	t.Helper()
	if getter == nil {
		getter = StubLeaves{}
	}
	ss, err := serverstate.New(serverstate.Config{Store: store, Datacenter: "dc1", RetryMin: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := leaf.New(leaf.Config{Watcher: getter})
	if err != nil {
		t.Fatal(err)
	}
	m, err := proxycfg.New(proxycfg.Config{DataSources: ss.DataSources(ls), Datacenter: "dc1", Coalesce: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		ss.Close()
		ls.Close()
	})
	return m
}

// SeedCA writes a CA configuration and an active root into store, so that
// snapshots can become valid.
func SeedCA(t testing.TB, store *state.Store, idx uint64) {
	t.Helper()
	_, err := store.CASetRootsAndConfig(idx, &structs.CARequest{
		Roots:       structs.CARoots{{ID: "r1", Name: "root", RootCert: "PEM", Active: true}},
		SigningKeys: []*structs.CASigningKey{{RootID: "r1", PrivateKey: "KEY"}},
		Config:      &structs.CAConfiguration{ClusterID: "c1", Provider: structs.ConsulCAProvider},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// NextSnapshot waits for the next snapshot on ch.
func NextSnapshot(t testing.TB, ch <-chan *proxycfg.ConfigSnapshot) *proxycfg.ConfigSnapshot {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("snapshot channel closed")
		}
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no snapshot within 10s")
		return nil
	}
}

// NoSnapshot checks that no snapshot arrives on ch for d.
func NoSnapshot(t testing.TB, ch <-chan *proxycfg.ConfigSnapshot, d time.Duration) {
	t.Helper()
	select {
	case s := <-ch:
		t.Fatalf("unexpected snapshot (version %d)", s.Version)
	case <-time.After(d):
	}
}
