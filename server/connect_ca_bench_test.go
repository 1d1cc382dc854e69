package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/agent/leafcert"
	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/structs"
)

// Benchmarks of the built-in CA. Run them with
//
//	go test ./server -run '^$' -bench 'ConnectCA' -benchtime 1x -cpu 1,2
//
// (BenchmarkConnectCASign* take a normal -benchtime).

// benchCSRs makes n distinct CSRs for services of the trust domain (the
// agents' work, done before timing).
func benchCSRs(b *testing.B, td string, n int) []string {
	b.Helper()
	out := make([]string, n)
	for i := range out {
		csr, _, err := ca.NewLeafCSR(connect.NewServiceID(td, "dc1", fmt.Sprintf("svc-%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = csr
	}
	return out
}

// BenchmarkConnectCASign measures leaf signing on one server (the leader),
// rate limit off: CSR checks, ECDSA P-256 signature, serial numbers from
// the replicated counter (one Raft write per block of serials).
func BenchmarkConnectCASign(b *testing.B) {
	s := startTestCluster(b, 1, false)[0].srv
	roots := waitForCA(b, s)
	if err := setCAConfig(b, s, map[string]interface{}{"CSRMaxPerSecond": 0}); err != nil {
		b.Fatal(err)
	}
	csrs := benchCSRs(b, roots.TrustDomain, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var out structs.IssuedCert
		if err := structs.MethodConnectCASign.Call(context.Background(), s, &structs.CASignRequest{CSR: csrs[i%len(csrs)]}, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signatures/s")
}

// BenchmarkConnectCASignParallel is the same with concurrent requests (as
// many agents would send), using every core -cpu allows.
func BenchmarkConnectCASignParallel(b *testing.B) {
	s := startTestCluster(b, 1, false)[0].srv
	roots := waitForCA(b, s)
	if err := setCAConfig(b, s, map[string]interface{}{"CSRMaxPerSecond": 0}); err != nil {
		b.Fatal(err)
	}
	csrs := benchCSRs(b, roots.TrustDomain, 64)
	b.ResetTimer()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			var out structs.IssuedCert
			if err := structs.MethodConnectCASign.Call(context.Background(), s, &structs.CASignRequest{CSR: csrs[i%len(csrs)]}, &out); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "signatures/s")
}

// BenchmarkConnectCARotation1000 measures the time from a CA rotation
// (PUT of a configuration with a new key size) until 1,000 services, whose
// leaves an agent's leaf manager holds, all hold leaves of the new root.
// Variants: the server's rate limit off or at its default (50/s), and the
// agents re-issuing at once (jitter=0, the worst burst for the server) or
// spread over Consul's 30 s window (the default).
func BenchmarkConnectCARotation1000(b *testing.B) {
	const services = 1000
	cases := []struct {
		name   string
		rate   interface{} // CSRMaxPerSecond in the CA config; nil: server default
		jitter time.Duration
	}{
		{"ratelimit=off/jitter=0", 0, -1},
		{"ratelimit=50/jitter=0", nil, -1},
		{"ratelimit=off/jitter=30s", 0, 0},
		{"ratelimit=50/jitter=30s", nil, 0},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s := startTestCluster(b, 1, false)[0].srv
			waitForCA(b, s)
			// Issue the initial leaves without a limit.
			if err := setCAConfig(b, s, map[string]interface{}{"CSRMaxPerSecond": 0}); err != nil {
				b.Fatal(err)
			}
			counted := &countingRPC{s: s}
			m, err := leafcert.New(leafcert.Config{RPC: counted, Datacenter: "dc1", RootChangeJitter: tc.jitter})
			if err != nil {
				b.Fatal(err)
			}
			m.Start()
			b.Cleanup(m.Stop)
			names := make([]string, services)
			for i := range names {
				names[i] = fmt.Sprintf("svc-%d", i)
			}
			index := make([]uint64, services)
			parallel(b, services, 32, func(i int) error {
				c, err := m.Get(context.Background(), names[i], "", 0, 0)
				if err == nil {
					index[i] = c.ModifyIndex
				}
				return err
			})
			bits := 256
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				bits = map[int]int{256: 384, 384: 256}[bits]
				cfg := map[string]interface{}{"PrivateKeyType": "ec", "PrivateKeyBits": bits}
				if tc.rate != nil {
					cfg["CSRMaxPerSecond"] = tc.rate
				}
				counted.limited.Store(0)
				start := time.Now()
				if err := setCAConfig(b, s, cfg); err != nil {
					b.Fatal(err)
				}
				// Each blocking Get returns when its service holds a leaf
				// of the new root.
				parallel(b, services, services, func(i int) error {
					c, err := m.Get(context.Background(), names[i], "", index[i], 10*time.Minute)
					if err != nil {
						return err
					}
					if c.ModifyIndex <= index[i] {
						return fmt.Errorf("%s not re-issued within the wait", names[i])
					}
					index[i] = c.ModifyIndex
					return nil
				})
				b.ReportMetric(time.Since(start).Seconds(), "s/rotation")
				b.ReportMetric(float64(counted.limited.Load()), "rate-limited-CSRs")
			}
			b.StopTimer()
		})
	}
}

// countingRPC counts the signing requests the servers refused with
// ErrRateLimited.
type countingRPC struct {
	s       *Server
	limited atomic.Int64
}

func (c *countingRPC) RPC(ctx context.Context, method string, args, reply any) error {
	err := c.s.RPC(ctx, method, args, reply)
	if errors.Is(err, structs.ErrRateLimited) {
		c.limited.Add(1)
	}
	return err
}

// parallel runs fn(0..n-1) on at most workers goroutines and fails the
// benchmark on the first error.
func parallel(b *testing.B, n, workers int, fn func(i int) error) {
	b.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}
