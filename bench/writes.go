package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// latencies collects durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	// ds is guarded by mu.
	ds []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

// writes registers Params.Registrations nodes with one service each
// through PUT /v1/catalog/register (one Raft write each) from
// Params.Writers concurrent writers, and measures the rate and each
// write's latency.
func (r *runner) writes(ctx context.Context, res *Result) error {
	p := r.cfg.Params
	var lat latencies
	start := time.Now()
	err := parallel(ctx, p.Registrations, p.Writers, func(ctx context.Context, i int) error {
		reg := &api.CatalogRegistration{
			Node:    fmt.Sprintf("%s-w-%d", r.prefix, i),
			Address: fmt.Sprintf("10.20.%d.%d", i/250%250, i%250+1),
			Service: &api.AgentService{
				ID:      fmt.Sprintf("%s-svc-%d", r.prefix, i),
				Service: fmt.Sprintf("%s-svc-%d", r.prefix, i%50),
				Port:    8080,
				Weights: api.AgentWeights{Passing: 1, Warning: 1},
			},
		}
		t0 := time.Now()
		if _, err := r.client.Catalog().Register(reg, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("register %s: %w", reg.Node, err)
		}
		lat.add(time.Since(t0))
		return nil
	})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	s := Summarize(lat.ds)
	res.add("registrations_per_s", fmt.Sprintf("catalog registrations/s (%d writers)", p.Writers), "1/s", float64(s.N)/elapsed.Seconds())
	res.addDist("write_latency", "write latency", s, false)
	return nil
}
