package server

import (
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestIsHealthy: Consul's autopilot rules with its defaults (200 ms since
// the leader's last contact, 250 entries behind, same term, alive) and
// with a configuration that moves the thresholds.
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
		conf   func(*structs.AutopilotConfig) // changes to the defaults
	}{
		{"a follower in step", ok, leader, true, nil},
		{"exactly 250 behind", with(func(h *structs.ServerHealth) { h.LastIndex = 750 }), leader, true, nil},
		{"251 behind", with(func(h *structs.ServerHealth) { h.LastIndex = 749 }), leader, false, nil},
		{"a young log", with(func(h *structs.ServerHealth) { h.LastIndex = 0 }), structs.RaftStats{LastTerm: 4, LastIndex: 100}, true, nil},
		{"an older term", with(func(h *structs.ServerHealth) { h.LastTerm = 3 }), leader, false, nil},
		{"contact at the threshold", with(func(h *structs.ServerHealth) { h.LastContact = 200 * time.Millisecond }), leader, true, nil},
		{"contact too long ago", with(func(h *structs.ServerHealth) { h.LastContact = 201 * time.Millisecond }), leader, false, nil},
		{"never contacted", with(func(h *structs.ServerHealth) { h.LastContact = -1 }), leader, false, nil},
		{"failed in gossip", with(func(h *structs.ServerHealth) { h.SerfStatus = "failed" }), leader, false, nil},
		{"unknown to gossip", with(func(h *structs.ServerHealth) { h.SerfStatus = "none" }), leader, false, nil},
		{"the leader itself", with(func(h *structs.ServerHealth) { h.Leader, h.LastContact, h.LastIndex = true, 0, 1000 }), leader, true, nil},
		// The configuration's thresholds, not the defaults, decide.
		{"contact within a raised threshold", with(func(h *structs.ServerHealth) { h.LastContact = time.Second }), leader, true, func(c *structs.AutopilotConfig) { c.LastContactThreshold = 2 * time.Second }},
		{"in step but past a lowered threshold", with(func(h *structs.ServerHealth) { h.LastContact = 100 * time.Millisecond }), leader, false, func(c *structs.AutopilotConfig) { c.LastContactThreshold = 50 * time.Millisecond }},
		{"251 behind, 300 allowed", with(func(h *structs.ServerHealth) { h.LastIndex = 749 }), leader, true, func(c *structs.AutopilotConfig) { c.MaxTrailingLogs = 300 }},
		{"10 behind, 5 allowed", with(func(h *structs.ServerHealth) { h.LastIndex = 990 }), leader, false, func(c *structs.AutopilotConfig) { c.MaxTrailingLogs = 5 }},
	}
	for _, tc := range cases {
		conf := structs.DefaultAutopilotConfig()
		if tc.conf != nil {
			tc.conf(&conf)
		}
		if got := isHealthy(tc.h, tc.leader, conf); got != tc.want {
			t.Errorf("%s: healthy = %v, want %v", tc.name, got, tc.want)
		}
	}
	for in, want := range map[string]time.Duration{"0": 0, "never": -1, "": -1, "12.5ms": 12500 * time.Microsecond, "garbage": -1} {
		if got := parseLastContact(in); got != want {
			t.Errorf("parseLastContact(%q) = %v, want %v", in, got, want)
		}
	}
}
