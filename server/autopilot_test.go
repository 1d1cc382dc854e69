package server

import (
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestIsHealthy: Consul's autopilot rules with its defaults (200 ms since
// the leader's last contact, 250 entries behind, same term, alive).
func TestIsHealthy(t *testing.T) {
	leader := structs.RaftStats{LastContact: "0", LastTerm: 4, LastIndex: 1000}
	ok := structs.ServerHealth{SerfStatus: "alive", LastContact: 10 * time.Millisecond, LastTerm: 4, LastIndex: 990}
	with := func(mut func(*structs.ServerHealth)) structs.ServerHealth {
		h := ok
		mut(&h)
		return h
	}
	cases := []struct {
		name   string
		h      structs.ServerHealth
		leader structs.RaftStats
		want   bool
	}{
		{"a follower in step", ok, leader, true},
		{"exactly 250 behind", with(func(h *structs.ServerHealth) { h.LastIndex = 750 }), leader, true},
		{"251 behind", with(func(h *structs.ServerHealth) { h.LastIndex = 749 }), leader, false},
		{"a young log", with(func(h *structs.ServerHealth) { h.LastIndex = 0 }), structs.RaftStats{LastTerm: 4, LastIndex: 100}, true},
		{"an older term", with(func(h *structs.ServerHealth) { h.LastTerm = 3 }), leader, false},
		{"contact at the threshold", with(func(h *structs.ServerHealth) { h.LastContact = 200 * time.Millisecond }), leader, true},
		{"contact too long ago", with(func(h *structs.ServerHealth) { h.LastContact = 201 * time.Millisecond }), leader, false},
		{"never contacted", with(func(h *structs.ServerHealth) { h.LastContact = -1 }), leader, false},
		{"failed in gossip", with(func(h *structs.ServerHealth) { h.SerfStatus = "failed" }), leader, false},
		{"unknown to gossip", with(func(h *structs.ServerHealth) { h.SerfStatus = "none" }), leader, false},
		{"the leader itself", with(func(h *structs.ServerHealth) { h.Leader, h.LastContact, h.LastIndex = true, 0, 1000 }), leader, true},
	}
	for _, tc := range cases {
		if got := isHealthy(tc.h, tc.leader); got != tc.want {
			t.Errorf("%s: healthy = %v, want %v", tc.name, got, tc.want)
		}
	}
	for in, want := range map[string]time.Duration{"0": 0, "never": -1, "": -1, "12.5ms": 12500 * time.Microsecond, "garbage": -1} {
		if got := parseLastContact(in); got != want {
			t.Errorf("parseLastContact(%q) = %v, want %v", in, got, want)
		}
	}
}
