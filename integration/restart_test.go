package integration

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

const (
	restartPrefix   = "scenario3/"
	restartKeys     = 300
	restartServices = 20
)

// TestClusterFullRestart: write to a 3-server cluster, take all three down
// at once, start them again from their data dirs, and find every key and
// registration still there. Run with SIGINT (a graceful stop, which must
// finish within 10 s like Consul's) and with SIGKILL (a power cut: only
// what Raft fsynced counts, and every acknowledged write was).
func TestClusterFullRestart(t *testing.T) {
	tests := []struct {
		name string
		down func(*harness.Agent) error
	}{
		{"sigint", (*harness.Agent).Stop},
		{"sigkill", (*harness.Agent).Kill},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, leader := startCluster(t, 3)
			ctx := scenarioContext(t)
			rc := newRawClient(t)
			servers := c.Servers()

			want := map[string]string{}
			for i := range restartKeys {
				want[fmt.Sprintf("%s%04d", restartPrefix, i)] = fmt.Sprintf("durable-%d", i)
			}
			var regs []serviceReg
			for i := range restartServices {
				regs = append(regs, serviceReg{
					Node: "scenario3-node", Address: "10.30.0.1",
					ID: fmt.Sprintf("scenario3-svc-%02d", i), Name: fmt.Sprintf("scenario3-svc-%02d", i),
					Tags: []string{"scenario3"}, Port: 30000 + i,
				})
			}
			jobs := replicationData{kv: want, services: regs}.writeJobs(rc)
			err := runParallel(ctx, len(jobs), 4, func(ctx context.Context, i int) error {
				return jobs[i](ctx, servers[i%len(servers)].HTTPAddr())
			})
			if err != nil {
				t.Fatalf("writes: %v", err)
			}
			t.Logf("wrote %d keys and %d registrations; leader %s", len(want), len(regs), leader.Node())

			// All down at once, as an operator stopping the cluster would.
			downErrs := make([]error, len(servers))
			took := make([]time.Duration, len(servers))
			var wg sync.WaitGroup
			for i, s := range servers {
				wg.Go(func() {
					start := time.Now()
					downErrs[i] = tt.down(s)
					took[i] = time.Since(start)
				})
			}
			wg.Wait()
			for i, s := range servers {
				if downErrs[i] != nil {
					t.Errorf("%s: %v", s.Node(), downErrs[i])
				}
				t.Logf("%s down after %s (%v)", s.Node(), took[i].Round(time.Millisecond), s.ExitError())
			}
			if t.Failed() {
				t.FailNow()
			}

			for _, s := range servers {
				if err := s.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			newLeader := waitLeader(t, c, clusterStartTimeout)
			eventually(t, 10*time.Second, "membership after restart", func() error {
				return checkMembership(ctx, rc, c, newLeader)
			})

			// A write in the new term commits only after the leader has
			// applied everything before it, so the reads below see the
			// whole restored state (and writes work again).
			if err := rc.kvPut(ctx, newLeader.HTTPAddr(), restartPrefix+"after-restart", "ok"); err != nil {
				t.Fatalf("first write after restart: %v", err)
			}
			want[restartPrefix+"after-restart"] = "ok"

			_, idx, _, err := rc.kvList(ctx, newLeader.HTTPAddr(), restartPrefix, modeDefault)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range servers {
				got, _, _, err := rc.kvList(ctx, s.HTTPAddr(), restartPrefix, modeDefault)
				if err != nil {
					t.Fatal(err)
				}
				if err := missingAcked(got, want); err != nil {
					t.Errorf("%s, default read: %v", s.Node(), err)
				}
				catchUp, cancel := context.WithTimeout(ctx, 20*time.Second)
				err = rc.waitForIndex(catchUp, s.HTTPAddr(), kvPath(restartPrefix, url.Values{"recurse": {""}}), idx)
				cancel()
				if err != nil {
					t.Errorf("%s did not catch up: %v", s.Node(), err)
					continue
				}
				got, _, _, err = rc.kvList(ctx, s.HTTPAddr(), restartPrefix, modeStale)
				if err != nil {
					t.Fatal(err)
				}
				if err := missingAcked(got, want); err != nil {
					t.Errorf("%s, stale read: %v", s.Node(), err)
				}
				for _, reg := range regs {
					var inst []struct{ ServiceID string }
					if _, err := rc.getJSON(ctx, s.HTTPAddr(), "/v1/catalog/service/"+reg.Name+"?stale", &inst); err != nil {
						t.Errorf("%s: %v", s.Node(), err)
					} else if len(inst) != 1 || inst[0].ServiceID != reg.ID {
						t.Errorf("%s: catalog/service/%s = %+v after restart", s.Node(), reg.Name, inst)
					}
				}
			}
		})
	}
}
