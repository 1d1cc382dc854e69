package integration

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// Final-read phases, recorded in jepsenOp.Phase.
const (
	// phaseRestart: reads in the run's modes right after the full restart,
	// as soon as the servers agree on a leader.
	phaseRestart = "after-restart"
	// phaseCaughtUp: ?stale and default reads once every server has
	// applied a write made after the restart.
	phaseCaughtUp = "caught-up"
)

// Bounds of the final phase.
const (
	finalReadAttempts = 20
	finalRetryPause   = 250 * time.Millisecond
	catchUpTimeout    = 20 * time.Second
	// sentinelKey is written after the restart: once a server holds it,
	// it has applied every earlier entry, the workload's included.
	sentinelKey = "jepsen-sentinel"
)

// finalReads takes the whole cluster down with kill -9, starts it again and
// reads every key from every server, appending the reads to the history:
// porcupine then checks that each holds the last acknowledged write or a
// later unknown one. It returns the keys on which servers disagree once
// caught up.
func finalReads(ctx context.Context, c *harness.Cluster, kv kvOps, clients int, keys []string, plan readPlan) ([]string, error) {
	servers := c.Servers()
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.Kill() })
	}
	wg.Wait()
	for i, s := range servers {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if err := s.Start(); err != nil {
			return nil, err
		}
	}
	lctx, cancel := context.WithTimeout(ctx, clusterStartTimeout)
	leader, err := c.WaitForLeader(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("no leader after the full restart: %w", err)
	}

	// One process per server's reader: its reads are sequential.
	procs := make([]int, len(servers))
	for i := range servers {
		procs[i] = kv.rec.newProcess()
	}
	readAll := func(mode readMode, phase string) map[string][]jepsenOp {
		got := map[string][]jepsenOp{}
		for _, key := range keys {
			for i, s := range servers {
				if o, ok := kv.readRetrying(ctx, s, clients+i, procs[i], key, mode, phase); ok {
					got[key] = append(got[key], o)
				}
			}
		}
		return got
	}
	for _, mode := range plan.modes() {
		readAll(mode, phaseRestart+" "+mode.String())
	}

	idx, err := kv.writeSentinel(ctx, leader)
	if err != nil {
		return nil, err
	}
	for _, s := range servers {
		cctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
		err := kv.rc.waitForIndex(cctx, s.HTTPAddr(), kvPath(sentinelKey, nil), idx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s did not catch up after the restart: %w", s.Node(), err)
		}
	}
	stale := readAll(modeStale, phaseCaughtUp+" stale")
	def := readAll(modeDefault, phaseCaughtUp+" default")
	var disagree []string
	for _, key := range keys {
		if d := disagreement(key, append(stale[key], def[key]...)); d != "" {
			disagree = append(disagree, d)
		}
	}
	return disagree, nil
}

// readRetrying reads until it gets an answer: right after the restart a
// server may not know the leader yet.
func (k kvOps) readRetrying(ctx context.Context, srv *harness.Agent, client, process int, key string, mode readMode, phase string) (jepsenOp, bool) {
	for range finalReadAttempts {
		o := k.read(ctx, srv, client, process, key, mode, phase)
		if o.Outcome == outcomeOK {
			return o, true
		}
		select {
		case <-ctx.Done():
			return o, false
		case <-time.After(finalRetryPause):
		}
	}
	k.rec.problem("final read of %s on %s (%s) never answered", key, srv.Node(), phase)
	return jepsenOp{}, false
}

// writeSentinel writes sentinelKey through the leader and returns its
// ModifyIndex, as read back from the leader's own store.
func (k kvOps) writeSentinel(ctx context.Context, leader *harness.Agent) (uint64, error) {
	var lastErr error
	for range finalReadAttempts {
		err := k.rc.kvPut(ctx, leader.HTTPAddr(), sentinelKey, "after-restart")
		if err == nil {
			var entries []kvEntry
			_, err = k.rc.getJSON(ctx, leader.HTTPAddr(), kvPath(sentinelKey, url.Values{"stale": {""}}), &entries)
			if err == nil && len(entries) == 1 {
				return entries[0].ModifyIndex, nil
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(finalRetryPause):
		}
	}
	return 0, fmt.Errorf("sentinel write after the restart: %w", lastErr)
}

// disagreement describes the reads of key when they are not all the same
// value at the same index, "" when they are.
func disagreement(key string, reads []jepsenOp) string {
	seen := map[string][]string{}
	for _, o := range reads {
		v := fmt.Sprintf("%s@%d", showValue(o.Value), o.Index)
		seen[v] = append(seen[v], fmt.Sprintf("%s (%s)", o.Server, o.Mode))
	}
	if len(seen) < 2 {
		return ""
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(seen)) {
		parts = append(parts, fmt.Sprintf("%s from %s", v, strings.Join(seen[v], ", ")))
	}
	return fmt.Sprintf("key %s: %s", key, strings.Join(parts, "; "))
}
