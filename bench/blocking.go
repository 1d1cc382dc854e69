package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
)

// blockingSettle is how long blocking waits, after starting its watchers,
// before the write: no HTTP answer says a blocking query reached the
// target, so the watchers get time to, with a little more per watcher
// for the target to accept their connections.
func blockingSettle(watchers int) time.Duration {
	return time.Second + time.Duration(watchers)*2*time.Millisecond
}

// blocking starts Params.Watchers blocking queries
// (GET /v1/health/service/<s>?index=&wait=) on one service, registers one
// more instance of it, and measures, from the write's answer, when each
// watcher got a result holding the new instance (a watcher woken without
// it asks again, as consul/api's watch plans do).
func (r *runner) blocking(ctx context.Context, res *Result) error {
	p := r.cfg.Params
	svc := r.prefix + "-watched"
	reg := func(node, addr string) error {
		_, err := r.client.Catalog().Register(&api.CatalogRegistration{
			Node: node, Address: addr,
			Service: &api.AgentService{ID: node, Service: svc, Port: 8080, Weights: api.AgentWeights{Passing: 1, Warning: 1}},
		}, (&api.WriteOptions{}).WithContext(ctx))
		return err
	}
	first, second := svc+"-1", svc+"-2"
	defer func() {
		for _, node := range []string{first, second} {
			if _, err := r.client.Catalog().Deregister(&api.CatalogDeregistration{Node: node}, nil); err != nil {
				r.log.Warn("cannot deregister a node of the run", "node", node, "error", err)
			}
		}
	}()
	if err := reg(first, "10.30.0.1"); err != nil {
		return fmt.Errorf("register %s: %w", first, err)
	}
	_, meta, err := r.client.Health().Service(svc, "", false, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read %s: %w", svc, err)
	}
	index := meta.LastIndex

	wctx, cancel := context.WithTimeout(ctx, p.Wait+blockingSettle(p.Watchers))
	defer cancel()
	seen := make([]atomic.Int64, p.Watchers) // Unix ns of the result with second
	var wakeups atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, p.Watchers)
	for i := range p.Watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := index
			for {
				entries, meta, err := r.client.Health().Service(svc, "", false, (&api.QueryOptions{WaitIndex: idx, WaitTime: p.Wait}).WithContext(wctx))
				now := time.Now()
				if err != nil {
					if !errors.Is(wctx.Err(), context.DeadlineExceeded) {
						errs <- fmt.Errorf("watcher %d: %w", i, err)
					}
					return
				}
				wakeups.Add(1)
				for _, e := range entries {
					if e.Service != nil && e.Service.ID == second {
						seen[i].Store(now.UnixNano())
						return
					}
				}
				idx = meta.LastIndex
			}
		}()
	}
	select {
	case <-time.After(blockingSettle(p.Watchers)):
	case <-ctx.Done():
		wg.Wait()
		return ctx.Err()
	}
	early := wakeups.Load()
	t0 := time.Now()
	if err := reg(second, "10.30.0.2"); err != nil {
		cancel()
		wg.Wait()
		return fmt.Errorf("register %s: %w", second, err)
	}
	t1 := time.Now()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	// From the write's answer, as the figure has always been measured;
	// and from its start, which a target cannot shorten by answering the
	// write after the fan-out.
	var ds, fromStart []time.Duration
	for i := range seen {
		if at := seen[i].Load(); at != 0 {
			ds = append(ds, time.Duration(at-t1.UnixNano()))
			fromStart = append(fromStart, time.Duration(at-t0.UnixNano()))
		}
	}
	s := Summarize(ds)
	res.add("watchers", "blocking watchers", "", float64(p.Watchers))
	res.add("all_returned_ms", "time until all returned", "ms", ms(s.Max))
	res.add("all_returned_from_start_ms", "time until all returned, from the write's start", "ms", ms(Summarize(fromStart).Max))
	res.add("write_ms", "the write's latency", "ms", ms(t1.Sub(t0)))
	res.add("return_p50_ms", "return p50", "ms", ms(s.P50))
	res.add("return_p99_ms", "return p99", "ms", ms(s.P99))
	res.add("missed", "watchers that missed the change", "", float64(p.Watchers-len(ds)))
	res.add("early_wakeups", "wake-ups before the write", "", float64(early))
	return nil
}
