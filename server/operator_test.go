package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestAutopilotConfiguration: the leader stores the configured defaults
// first thing; a set replaces them, a check-and-set wins only at the
// stored ModifyIndex, and the leader's health view uses what is stored.
func TestAutopilotConfiguration(t *testing.T) {
	configured := structs.DefaultAutopilotConfig()
	configured.CleanupDeadServers = false
	configured.MaxTrailingLogs = 77
	servers := startTestCluster(t, 1, false, func(ts *testServer) { ts.autopilot = &configured })
	s := servers[0].srv
	get := func() structs.AutopilotConfig {
		t.Helper()
		var out structs.AutopilotConfigResponse
		rpc(t, s, structs.MethodOperatorAutopilotGetConfiguration, &structs.DCSpecificRequest{}, &out)
		if out.Index != out.Config.ModifyIndex {
			t.Fatalf("index %d, config %+v", out.Index, out.Config)
		}
		return out.Config
	}
	initial := get()
	if initial.CleanupDeadServers || initial.MaxTrailingLogs != 77 || initial.LastContactThreshold != 200*time.Millisecond ||
		initial.CreateIndex == 0 || initial.CreateIndex != initial.ModifyIndex {
		t.Fatalf("initial configuration %+v, want the configured defaults", initial)
	}
	next := initial
	next.MaxTrailingLogs = 10
	steps := []struct {
		name      string
		req       structs.AutopilotSetConfigRequest
		want      bool
		wantTrail uint64
	}{
		{"stale cas loses", structs.AutopilotSetConfigRequest{Config: withModify(next, initial.ModifyIndex-1), CAS: true}, false, 77},
		{"cas 0 loses once one is stored", structs.AutopilotSetConfigRequest{Config: withModify(next, 0), CAS: true}, false, 77},
		{"cas at the stored index wins", structs.AutopilotSetConfigRequest{Config: withModify(next, initial.ModifyIndex), CAS: true}, true, 10},
		{"set writes whatever the index", structs.AutopilotSetConfigRequest{Config: withModify(structs.AutopilotConfig{MaxTrailingLogs: 3, LastContactThreshold: time.Hour}, 1)}, true, 3},
	}
	for _, st := range steps {
		var ok bool
		rpc(t, s, structs.MethodOperatorAutopilotSetConfiguration, &st.req, &ok)
		if got := get(); ok != st.want || got.MaxTrailingLogs != st.wantTrail || got.CreateIndex != initial.CreateIndex {
			t.Fatalf("%s: reply %v, stored %+v", st.name, ok, got)
		}
	}
	if c := s.autopilotConfig(); c.LastContactThreshold != time.Hour || c.MaxTrailingLogs != 3 {
		t.Fatalf("the leader acts on %+v, not the stored configuration", c)
	}
}

func withModify(c structs.AutopilotConfig, modify uint64) structs.AutopilotConfig {
	c.ModifyIndex = modify
	return c
}

// TestOperatorUsageAndAutopilotState: usage counts the catalog, and the
// autopilot state of a lone server names it as leader and only voter,
// with its catalog metadata.
func TestOperatorUsageAndAutopilotState(t *testing.T) {
	servers := startTestCluster(t, 1, false)
	ts := servers[0]
	waitForSerfHealth(t, ts.srv, ts.name)
	for _, svc := range []*structs.NodeService{
		{ID: "redis1", Service: "redis"}, {ID: "redis2", Service: "redis"},
		{ID: "p1", Service: "proxy", Kind: structs.ServiceKindConnectProxy, Proxy: structs.ConnectProxyConfig{DestinationServiceName: "redis"}},
	} {
		rpc(t, ts.srv, structs.MethodCatalogRegister, &structs.RegisterRequest{Node: "n1", Address: "10.0.0.1", Service: svc}, &struct{}{})
	}
	var usage structs.UsageResponse
	rpc(t, ts.srv, structs.MethodOperatorUsage, &structs.DCSpecificRequest{}, &usage)
	u := usage.Usage
	if u.Nodes != 2 || u.Services != 3 || u.ServiceInstances != 4 || u.BillableServiceInstances != 2 ||
		u.ConnectServiceInstances["connect-proxy"] != 1 || usage.Index == 0 || !usage.KnownLeader {
		t.Fatalf("usage %+v", usage)
	}

	var st structs.AutopilotState
	waitFor(t, 10*time.Second, "a healthy autopilot state", func() bool {
		st = structs.AutopilotState{}
		rpc(t, ts.srv, structs.MethodOperatorAutopilotState, &structs.DCSpecificRequest{}, &st)
		return st.Healthy
	})
	srv, ok := st.Servers[ts.id]
	if !ok || st.Leader != ts.id || len(st.Voters) != 1 || st.Voters[0] != ts.id || st.FailureTolerance != 0 ||
		st.OptimisticFailureTolerance != 0 || srv.Name != ts.name || srv.NodeStatus != "alive" || srv.Status != structs.AutopilotStatusLeader ||
		srv.NodeType != structs.AutopilotTypeVoter || !srv.Healthy || srv.Meta == nil {
		t.Fatalf("autopilot state %+v", st)
	}
}

// TestRaftTransferLeader: leadership moves to the named voter or to any
// other; a transfer to no other voter is refused. After a transfer the
// old leader answers no read from its lease: a write acknowledged by the
// new leader is seen by a default read through the old one.
func TestRaftTransferLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server cluster")
	}
	servers := startTestCluster(t, 3, false)
	leader := waitForLeader(t, servers, 30*time.Second)
	transfer := func(via *testServer, id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var ok bool
		err := structs.MethodOperatorRaftTransferLeader.Call(ctx, via.srv, &structs.RaftTransferLeaderRequest{ID: id}, &ok)
		if err == nil && !ok {
			t.Fatalf("transfer to %q: no error, no success", id)
		}
		return err
	}
	for _, tc := range []struct {
		name string
		id   string
	}{
		{"unknown server", "no-such-id"},
		{"the leader itself", leader.id},
	} {
		if err := transfer(leader, tc.id); !errors.Is(err, ErrTransferTarget) {
			t.Fatalf("%s: %v, want a refusal", tc.name, err)
		}
	}

	for round, pick := range []func(old *testServer) *testServer{
		// To a named follower, asked through another follower (the
		// call is forwarded to the leader).
		func(old *testServer) *testServer {
			for _, ts := range servers {
				if ts != old {
					return ts
				}
			}
			return nil
		},
		// To whichever voter Raft picks.
		func(*testServer) *testServer { return nil },
	} {
		old := leader
		// A default read on the old leader first, so that it holds a
		// lease when the transfer begins.
		kvPut(t, old.srv, "k", "before")
		if e := kvGet(t, old.srv, "k", false); e == nil || string(e.Value) != "before" {
			t.Fatalf("round %d: read before the transfer: %+v", round, e)
		}
		target := pick(old)
		via, id := old, ""
		if target != nil {
			id = target.id
			for _, ts := range servers {
				if ts != old && ts != target {
					via = ts
				}
			}
		}
		if err := transfer(via, id); err != nil {
			t.Fatalf("round %d: transfer: %v", round, err)
		}
		var next *testServer
		waitFor(t, 30*time.Second, "a new leader", func() bool {
			for _, ts := range servers {
				if ts.srv.IsLeader() && ts != old {
					next = ts
				}
			}
			return next != nil
		})
		if target != nil && next != target {
			t.Fatalf("round %d: leadership went to %s, not %s", round, next.name, target.name)
		}
		if old.srv.reads.relinquished.Load() == 0 {
			t.Fatalf("round %d: the old leader kept its lease", round)
		}
		kvPut(t, next.srv, "k", "after")
		if e := kvGet(t, old.srv, "k", false); e == nil || string(e.Value) != "after" {
			t.Fatalf("round %d: a default read via the old leader is stale: %+v", round, e)
		}
		leader = waitForLeader(t, servers, 30*time.Second)
	}
}
