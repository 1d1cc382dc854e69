package server

import (
	"testing"
	"time"
)

// TestRaftTimeouts: Consul's raft_multiplier scales the production
// timeouts; -dev's single in-memory server takes tens of milliseconds, and
// the lease Raft's leader keeps stays shorter than its heartbeat timeout
// (hashicorp/raft refuses a configuration where it is not).
func TestRaftTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		cfg                     Config
		heartbeat, election, ll time.Duration
	}{
		{"default", Config{RaftMultiplier: 1}, time.Second, time.Second, 500 * time.Millisecond},
		{"multiplier 5", Config{RaftMultiplier: 5}, 5 * time.Second, 5 * time.Second, 2500 * time.Millisecond},
		{"dev", Config{RaftMultiplier: 1, InMemory: true, DevTiming: true}, 50 * time.Millisecond, 50 * time.Millisecond, 25 * time.Millisecond},
		{"in memory alone keeps the production timing", Config{RaftMultiplier: 1, InMemory: true}, time.Second, time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{cfg: tc.cfg, logger: testLogger(t, "raft")}
			c := s.raftConfig()
			if c.HeartbeatTimeout != tc.heartbeat || c.ElectionTimeout != tc.election || c.LeaderLeaseTimeout != tc.ll {
				t.Fatalf("timeouts %s/%s/%s, want %s/%s/%s", c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, tc.heartbeat, tc.election, tc.ll)
			}
			if c.LeaderLeaseTimeout > c.HeartbeatTimeout {
				t.Fatal("leader lease longer than the heartbeat timeout")
			}
		})
	}
}
