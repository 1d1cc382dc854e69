package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// checkMembership verifies, on every running server, that
// /v1/status/leader names leader, /v1/status/peers lists exactly the
// cluster's servers, and /v1/operator/raft/configuration has each of them
// (by node name and address) as a voter, with leader as the one Leader.
func checkMembership(ctx context.Context, rc *rawClient, c *harness.Cluster, leader *harness.Agent) error {
	wantAddrs := map[string]string{} // server address -> node name
	for _, s := range c.Servers() {
		wantAddrs[s.ServerAddr()] = s.Node()
	}
	want := slices.Sorted(maps.Keys(wantAddrs))
	var errs []error
	for _, s := range c.RunningServers() {
		got, err := harness.StatusLeader(ctx, s.HTTPAddr())
		if err != nil {
			errs = append(errs, err)
		} else if got != leader.ServerAddr() {
			errs = append(errs, fmt.Errorf("%s: leader %q, want %q", s.Node(), got, leader.ServerAddr()))
		}
		peers, err := harness.StatusPeers(ctx, s.HTTPAddr())
		if err != nil {
			errs = append(errs, err)
		} else if slices.Sort(peers); !slices.Equal(peers, want) {
			errs = append(errs, fmt.Errorf("%s: peers %v, want %v", s.Node(), peers, want))
		}
		var cfg raftConfiguration
		if _, err := rc.getJSON(ctx, s.HTTPAddr(), "/v1/operator/raft/configuration", &cfg); err != nil {
			errs = append(errs, err)
			continue
		}
		if len(cfg.Servers) != len(want) {
			errs = append(errs, fmt.Errorf("%s: raft configuration has %d servers, want %d: %+v", s.Node(), len(cfg.Servers), len(want), cfg.Servers))
		}
		leaders := 0
		for _, rs := range cfg.Servers {
			node, ok := wantAddrs[rs.Address]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%s: raft configuration lists unknown address %q", s.Node(), rs.Address))
			case rs.Node != node:
				errs = append(errs, fmt.Errorf("%s: raft server %s has Node %q, want %q", s.Node(), rs.Address, rs.Node, node))
			}
			if !rs.Voter {
				errs = append(errs, fmt.Errorf("%s: raft server %s (%s) is not a voter", s.Node(), rs.Node, rs.Address))
			}
			if rs.Leader {
				leaders++
				if rs.Address != leader.ServerAddr() {
					errs = append(errs, fmt.Errorf("%s: raft configuration marks %s leader, want %s", s.Node(), rs.Address, leader.ServerAddr()))
				}
			}
		}
		if leaders != 1 {
			errs = append(errs, fmt.Errorf("%s: raft configuration has %d leaders, want 1", s.Node(), leaders))
		}
	}
	return errors.Join(errs...)
}

// maxReportedErrors caps the errors a bulk check reports, so a total
// failure does not print hundreds of lines.
const maxReportedErrors = 10

// errorCollector gathers errors from goroutines, keeping the first few and
// counting the rest.
type errorCollector struct {
	mu      sync.Mutex
	errs    []error
	dropped int
}

func (c *errorCollector) add(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) < maxReportedErrors {
		c.errs = append(c.errs, err)
		return
	}
	c.dropped++
}

func (c *errorCollector) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) == 0 {
		return nil
	}
	if c.dropped > 0 {
		return errors.Join(append(c.errs, fmt.Errorf("... and %d more errors", c.dropped))...)
	}
	return errors.Join(c.errs...)
}

// runParallel calls fn(ctx, i) for every i in [0, n) from `workers`
// goroutines, waits for all of them and returns the errors.
func runParallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	jobs := make(chan int)
	var errs errorCollector
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				errs.add(fn(ctx, i))
			}
		})
	}
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			errs.add(fmt.Errorf("job %d not run: %w", i, ctx.Err()))
		}
	}
	close(jobs)
	wg.Wait()
	return errs.err()
}
