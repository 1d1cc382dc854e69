package httpapi

import (
	"strings"
	"testing"
)

// TestConsulClientRaftPeers: the official client's Raft operator calls
// against a real single server: the configuration lists it, and removing
// a peer that is not there fails with Consul's text (the removal itself is
// server.TestRaftRemovePeer, on three servers).
func TestConsulClientRaftPeers(t *testing.T) {
	c, _ := startRealServer(t)
	op := c.Operator()
	cfg, err := op.RaftGetConfiguration(nil)
	if err != nil || len(cfg.Servers) != 1 || !cfg.Servers[0].Leader {
		t.Fatalf("configuration: %+v %v", cfg, err)
	}
	err = op.RaftRemovePeerByAddress("127.0.0.9:8300", nil)
	if err == nil || !strings.Contains(err.Error(), `500 (address "127.0.0.9:8300" was not found in the Raft configuration)`) {
		t.Fatalf("remove by address: %v", err)
	}
	err = op.RaftRemovePeerByID("no-such-id", nil)
	if err == nil || !strings.Contains(err.Error(), `500 (id "no-such-id" was not found in the Raft configuration)`) {
		t.Fatalf("remove by id: %v", err)
	}
	if cfg, err := op.RaftGetConfiguration(nil); err != nil || len(cfg.Servers) != 1 {
		t.Fatalf("configuration after refused removals: %+v %v", cfg, err)
	}
}
