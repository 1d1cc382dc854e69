package httpapi

import (
	"strings"
	"testing"
)

// TestConsulClientRaftPeers: the official client's Raft operator calls
// against a real single server: the configuration lists it, removing a
// peer that is not there fails with Consul's text, and autopilot health
// describes it (the removal itself, and health on three servers, are
// server.TestRaftRemovePeer).
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
	// A lone server that gossips with no one: Raft is healthy, but the
	// server is not alive in a gossip pool, so autopilot calls it
	// unhealthy (429, which the client reads as a reply).
	h, err := op.AutopilotServerHealth(nil)
	if err != nil || h == nil || len(h.Servers) != 1 || h.Healthy || h.FailureTolerance != 0 {
		t.Fatalf("autopilot health: %+v %v", h, err)
	}
	if sh := h.Servers[0]; !sh.Leader || !sh.Voter || sh.SerfStatus != "none" || sh.LastContact == nil || sh.LastContact.Duration() != 0 || sh.LastIndex == 0 {
		t.Fatalf("autopilot health of the server: %+v", sh)
	}
}
