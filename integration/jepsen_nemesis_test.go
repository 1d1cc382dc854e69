package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// faultKind is what a nemesis does to its target.
type faultKind string

const (
	// faultKill is kill -9, healed by starting the server again from its
	// data dir.
	faultKill faultKind = "kill"
	// faultPause is SIGSTOP, healed by SIGCONT.
	faultPause faultKind = "pause"
)

// targetKind is how a nemesis picks its server.
type targetKind string

const (
	targetLeader   targetKind = "leader"
	targetRandom   targetKind = "random"
	targetFollower targetKind = "follower"
)

// nemesisSpec names one nemesis: a fault and a way to pick its target.
type nemesisSpec struct {
	Name   string
	Fault  faultKind
	Target targetKind
}

// jepsenNemeses are the nemeses of the matrix, in rotation order.
var jepsenNemeses = []nemesisSpec{
	{"kill-leader", faultKill, targetLeader},
	{"kill-random", faultKill, targetRandom},
	{"pause-leader", faultPause, targetLeader},
	{"pause-random", faultPause, targetRandom},
}

// pauseFollower is the stale-read self-test's nemesis: a frozen follower
// falls behind while the others keep committing, then answers from its old
// state.
var pauseFollower = nemesisSpec{"pause-follower", faultPause, targetFollower}

// noNemesis injects nothing: a baseline that tells what the faults cause
// from what the final restart alone does.
var noNemesis = nemesisSpec{Name: "none"}

func nemesisByName(name string) (nemesisSpec, error) {
	var names []string
	for _, n := range append(slices.Clone(jepsenNemeses), pauseFollower, noNemesis) {
		if n.Name == name {
			return n, nil
		}
		names = append(names, n.Name)
	}
	return nemesisSpec{}, fmt.Errorf("unknown nemesis %q (want one of %s)", name, strings.Join(names, ", "))
}

// faultEvent is one fault, as the summary file and the visualization show
// it. Skipped says why no fault was injected (no leader to pick).
type faultEvent struct {
	Nemesis string    `json:"nemesis"`
	Fault   faultKind `json:"fault"`
	Target  string    `json:"target,omitempty"`
	PID     int       `json:"pid,omitempty"`
	Start   int64     `json:"start"`
	End     int64     `json:"end"`
	Err     string    `json:"err,omitempty"`
	Skipped string    `json:"skipped,omitempty"`
}

// nemesis injects one fault every `every`, each lasting `lasting`; faults
// never overlap, so at most one server is down or frozen at a time.
type nemesis struct {
	spec    nemesisSpec
	c       *harness.Cluster
	rec     *recorder
	every   time.Duration
	lasting time.Duration
	rng     *rand.Rand

	mu     sync.Mutex
	events []faultEvent
}

// nemesisMaxFaults bounds the loop besides its context.
const nemesisMaxFaults = 10000

// leaderPickTimeout bounds the wait for a leader to pick, right after a
// previous fault healed.
const leaderPickTimeout = 2 * time.Second

// run injects faults until ctx ends. The first comes one interval in, once
// the workload is under way. A fault is always healed, even when ctx ends
// during it, so the final phase finds every server running.
func (n *nemesis) run(ctx context.Context) {
	if n.spec.Fault == "" {
		return
	}
	next := time.Now().Add(n.every)
	for range nemesisMaxFaults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		n.inject(ctx)
		next = next.Add(n.every)
		if now := time.Now(); next.Before(now) {
			next = now
		}
	}
}

func (n *nemesis) inject(ctx context.Context) {
	ev := faultEvent{Nemesis: n.spec.Name, Fault: n.spec.Fault, Start: n.rec.now()}
	target, err := n.pick(ctx)
	if err != nil {
		ev.Skipped, ev.End = err.Error(), ev.Start
		n.record(ev)
		return
	}
	ev.Target, ev.PID = target.Node(), target.PID()
	switch n.spec.Fault {
	case faultKill:
		err = target.Kill()
	case faultPause:
		err = target.Pause()
	}
	if err == nil {
		select {
		case <-ctx.Done():
		case <-time.After(n.lasting):
		}
	}
	// Healed whatever happened above: a half-done fault must not outlive
	// the nemesis.
	var healErr error
	switch n.spec.Fault {
	case faultKill:
		if !target.Running() {
			healErr = target.Start()
		}
	case faultPause:
		healErr = target.Resume()
	}
	ev.End = n.rec.now()
	if err != nil || healErr != nil {
		ev.Err = fmt.Sprintf("fault: %v; heal: %v", err, healErr)
		n.rec.problem("nemesis %s on %s: %s", n.spec.Name, target.Node(), ev.Err)
	}
	n.record(ev)
}

// pick chooses the target. The leader is what every running server
// reports (a server restarted a moment ago may not know it yet, hence the
// short wait); a paused leader could still be reported, which only makes
// that fault a no-op.
func (n *nemesis) pick(ctx context.Context) (*harness.Agent, error) {
	servers := n.c.Servers()
	if n.spec.Target == targetRandom {
		return servers[n.rng.IntN(len(servers))], nil
	}
	wctx, cancel := context.WithTimeout(ctx, leaderPickTimeout)
	defer cancel()
	leader, err := n.c.WaitForLeader(wctx)
	if err != nil {
		return nil, fmt.Errorf("no leader to pick: %w", err)
	}
	if n.spec.Target == targetLeader {
		return leader, nil
	}
	var followers []*harness.Agent
	for _, s := range servers {
		if s != leader {
			followers = append(followers, s)
		}
	}
	return followers[n.rng.IntN(len(followers))], nil
}

func (n *nemesis) record(ev faultEvent) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, ev)
}

// faults returns the faults so far; call it after run returned.
func (n *nemesis) faults() []faultEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.events)
}

// startNemesis runs the nemesis in a goroutine; the returned stop ends it,
// waits until its last fault is healed and returns the faults.
func startNemesis(ctx context.Context, n *nemesis) (stop func() []faultEvent) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { n.run(ctx) })
	return func() []faultEvent {
		cancel()
		wg.Wait()
		return n.faults()
	}
}
