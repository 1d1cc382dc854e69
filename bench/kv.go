package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
)

// kvValueSize is the size of every value kv puts.
const kvValueSize = 256

// kv puts Params.Puts distinct keys of 256 bytes from Params.Writers
// writers, then has Params.CASWriters writers each try Params.CASRounds
// check-and-set updates of one key (read its ModifyIndex, PUT ?cas=),
// counting the updates that won and those refused because another writer
// got in between. The run's keys are deleted at the end.
func (r *runner) kv(ctx context.Context, res *Result) error {
	p := r.cfg.Params
	kv := r.client.KV()
	root := r.prefix + "/"
	defer func() {
		// A clean-up, not a measurement: a failure leaves keys behind
		// under this run's prefix and nothing else.
		if _, err := kv.DeleteTree(root, nil); err != nil {
			r.log.Warn("cannot delete the run's keys", "prefix", root, "error", err)
		}
	}()
	value := make([]byte, kvValueSize)
	const letters = "abcdefghijklmnopqrstuvwxyz"
	for i := range value {
		value[i] = letters[r.rng.IntN(len(letters))]
	}

	var lat latencies
	start := time.Now()
	err := parallel(ctx, p.Puts, p.Writers, func(ctx context.Context, i int) error {
		pair := &api.KVPair{Key: fmt.Sprintf("%sput/%d", root, i), Value: value}
		t0 := time.Now()
		if _, err := kv.Put(pair, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("put %s: %w", pair.Key, err)
		}
		lat.add(time.Since(t0))
		return nil
	})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	s := Summarize(lat.ds)
	res.add("puts_per_s", fmt.Sprintf("256-byte KV puts/s (%d writers)", p.Writers), "1/s", float64(s.N)/elapsed.Seconds())
	res.addDist("put_latency", "put latency", s, false)

	key := root + "cas"
	if _, err := kv.Put(&api.KVPair{Key: key, Value: value}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	var won, lost atomic.Int64
	var casLat latencies
	start = time.Now()
	err = parallel(ctx, p.CASWriters*p.CASRounds, p.CASWriters, func(ctx context.Context, i int) error {
		pair, _, err := kv.Get(key, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("get %s: %w", key, err)
		}
		if pair == nil {
			return fmt.Errorf("%w: %s is gone", ErrTarget, key)
		}
		next := &api.KVPair{Key: key, Value: value, ModifyIndex: pair.ModifyIndex}
		t0 := time.Now()
		ok, _, err := kv.CAS(next, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("cas %s: %w", key, err)
		}
		casLat.add(time.Since(t0))
		if ok {
			won.Add(1)
		} else {
			lost.Add(1)
		}
		return nil
	})
	if err != nil {
		return err
	}
	casElapsed := time.Since(start)
	cs := Summarize(casLat.ds)
	res.add("cas_successes", fmt.Sprintf("CAS on one key: successes (%d writers)", p.CASWriters), "", float64(won.Load()))
	res.add("cas_conflicts", "CAS on one key: conflicts", "", float64(lost.Load()))
	res.add("cas_successes_per_s", "CAS on one key: successes/s", "1/s", float64(won.Load())/casElapsed.Seconds())
	res.add("cas_latency_p50_ms", "CAS latency p50", "ms", ms(cs.P50))
	res.add("cas_latency_p99_ms", "CAS latency p99", "ms", ms(cs.P99))
	return nil
}
