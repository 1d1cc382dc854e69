package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// benchmarkWrites drives b.N writes through a 3-server on-disk cluster from
// 32 concurrent writers spread over all three servers (followers forward to
// the leader), and reports throughput and p99 latency. Raft batches the
// concurrent applies into shared AppendEntries and fsyncs, so throughput
// should be far above one write per fsync.
//
//	go test ./server -run '^$' -bench 'Writes' -benchtime 5000x
func benchmarkWrites(b *testing.B, writers int, write func(s *Server, i int) error) {
	benchmarkOps(b, writers, "writes/s", nil, write)
}

// benchmarkOps runs b.N calls of op from workers goroutines spread over a
// 3-server on-disk cluster (after setup, when set) and reports unit,
// p50 and p99.
func benchmarkOps(b *testing.B, workers int, unit string, setup func(b *testing.B, leader *Server), op func(s *Server, i int) error) {
	servers := startTestCluster(b, 3, true)
	if setup != nil {
		setup(b, waitForLeader(b, servers, 30*time.Second).srv)
	}
	lat := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	var failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := servers[w%3].srv
			// Each worker makes its share of the calls, so that the
			// leader's workers, whose calls need no forward, cannot take
			// most of them and hide what the followers' calls cost.
			for i := w; i < b.N; i += workers {
				t0 := time.Now()
				if err := op(s, i); err != nil {
					failed.Add(1)
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d calls failed", failed.Load())
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
}

func kvWrite(s *Server, i int) error {
	var ok bool
	return structs.MethodKVSApply.Call(context.Background(), s, &structs.KVSRequest{
		Op: structs.KVSet, DirEnt: structs.DirEntry{Key: fmt.Sprintf("bench/%d", i), Value: []byte("some value of a typical size for a config key")},
	}, &ok)
}

// BenchmarkKVWrites is the 32-writer load; BenchmarkKVWritesOneWriter is the
// same with one writer, i.e. about one write per fsync: their writes/s ratio
// is what batching buys.
func BenchmarkKVWrites(b *testing.B) { benchmarkWrites(b, 32, kvWrite) }

func BenchmarkKVWritesOneWriter(b *testing.B) { benchmarkWrites(b, 1, kvWrite) }

func BenchmarkCatalogWrites(b *testing.B) {
	benchmarkWrites(b, 32, func(s *Server, i int) error {
		return structs.MethodCatalogRegister.Call(context.Background(), s, &structs.RegisterRequest{
			Node: fmt.Sprintf("node-%d", i%100), Address: "10.0.0.1",
			Service: &structs.NodeService{ID: fmt.Sprintf("web-%d", i), Service: "web", Port: 8080},
		}, &struct{}{})
	})
}

// BenchmarkKVReads is the cost of each read mode: 32 readers spread over
// the three servers read one of 100 keys. Default reads go to the leader,
// which answers within its lease or after a quorum round; ?consistent
// reads always wait for a round (shared by the reads that arrive during
// one); ?stale reads are answered by the server asked.
//
//	go test ./server -run '^$' -bench 'KVReads' -benchtime 20000x
func BenchmarkKVReads(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts structs.QueryOptions
	}{
		{"default", structs.QueryOptions{}},
		{"stale", structs.QueryOptions{AllowStale: true}},
		{"consistent", structs.QueryOptions{RequireConsistent: true}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			setup := func(b *testing.B, leader *Server) {
				for i := range 100 {
					if err := kvWrite(leader, i); err != nil {
						b.Fatal(err)
					}
				}
			}
			benchmarkOps(b, 32, "reads/s", setup, func(s *Server, i int) error {
				var out structs.IndexedDirEntries
				return structs.MethodKVSGet.Call(context.Background(), s, &structs.KeyRequest{
					Key: fmt.Sprintf("bench/%d", i%100), QueryOptions: mode.opts}, &out)
			})
		})
	}
}
