package agent

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// coordinateRateTarget is how many coordinate reports a second the whole
// cluster aims at (Consul's sync_coordinate_rate_target): an agent's
// interval grows with the member count beyond the minimum so that a large
// cluster does not flood the leader.
const coordinateRateTarget = 64.0

// coordinateUpdateTimeout bounds one report; a report that fails waits
// for the next interval.
const coordinateUpdateTimeout = 30 * time.Second

// startCoordinates starts the loop that reports this agent's Serf
// coordinate to the servers; the agent's Shutdown stops it.
func (a *Agent) startCoordinates() {
	ctx, cancel := context.WithCancel(context.Background())
	a.stopCoordinates = cancel
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.coordinateLoop(ctx)
	}()
}

func (a *Agent) coordinateLoop(ctx context.Context) {
	for {
		intv := coordinateInterval(a.rc.SyncCoordinateIntervalMin, len(a.members.Members()))
		// A random stagger keeps agents started together from reporting
		// together.
		t := time.NewTimer(intv + rand.N(intv)) //nolint:gosec // a stagger needs no unpredictability
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		a.sendCoordinate(ctx)
	}
}

// coordinateInterval is the minimum, or longer when members/rate target
// is.
func coordinateInterval(minimum time.Duration, members int) time.Duration {
	if minimum <= 0 {
		minimum = 15 * time.Second
	}
	scaled := time.Duration(float64(members) / coordinateRateTarget * float64(time.Second))
	return max(minimum, scaled)
}

func (a *Agent) sendCoordinate(ctx context.Context) {
	c, err := a.gossip.Coordinate()
	if err != nil {
		a.logger.Warn("cannot read this agent's coordinate", "error", err)
		return
	}
	if !c.IsValid() {
		a.logger.Warn("not reporting an invalid coordinate", "coordinate", c)
		return
	}
	req := structs.CoordinateUpdateRequest{
		Node:         a.rc.NodeName,
		Coord:        c,
		WriteRequest: structs.WriteRequest{Datacenter: a.rc.Datacenter, Token: a.tokens.AgentToken()},
	}
	rctx, cancel := context.WithTimeout(ctx, coordinateUpdateTimeout)
	defer cancel()
	if err := structs.MethodCoordinateUpdate.Call(rctx, a, &req, &struct{}{}); err != nil && ctx.Err() == nil {
		a.logger.Warn("coordinate update failed", "error", err)
	}
}
