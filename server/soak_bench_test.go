package server

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// soakSample is what the soak records of the process at one moment.
type soakSample struct {
	heapMB     float64 // live heap after a full GC
	goroutines int
	openFiles  int
}

func sampleProcess(b *testing.B) soakSample {
	b.Helper()
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Skipf("cannot count open files here: %v", err)
	}
	return soakSample{heapMB: float64(ms.HeapAlloc) / (1 << 20), goroutines: runtime.NumGoroutine(), openFiles: len(fds)}
}

// envInt reads a positive integer knob, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkSoakCatalogChurn is a soak, not a speed test: a 3-server
// on-disk cluster holds a catalog of TRELLIS_SOAK_SERVICES service
// instances (default 1,000 on 100 nodes) watched by 20 blocking health
// queries, and 10 % of the instances are replaced every minute for
// TRELLIS_SOAK_MINUTES minutes (default 2), as deploys do. It records
// live heap, goroutines and open files after the catalog is built and at
// the end; they must stay flat (within 50 % of the heap, 10 goroutines, 5
// files), else it fails. b.N is ignored: the soak runs once.
//
//	TRELLIS_SOAK_MINUTES=30 go test ./server -run '^$' -bench SoakCatalogChurn -benchtime 1x -timeout 40m
func BenchmarkSoakCatalogChurn(b *testing.B) {
	services := envInt("TRELLIS_SOAK_SERVICES", 1000)
	minutes := envInt("TRELLIS_SOAK_MINUTES", 2)
	servers := startTestCluster(b, 3, true)
	leader := waitForLeader(b, servers, 30*time.Second).srv
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	register := func(s *Server, slot, generation int) error {
		return structs.MethodCatalogRegister.Call(ctx, s, &structs.RegisterRequest{
			Node: fmt.Sprintf("node-%d", slot%100), Address: "10.0.0.1",
			Service: &structs.NodeService{ID: fmt.Sprintf("svc-%d-%d", slot, generation), Service: fmt.Sprintf("svc-%d", slot%20), Port: 8080},
		}, &struct{}{})
	}
	deregister := func(s *Server, slot, generation int) error {
		return structs.MethodCatalogDeregister.Call(ctx, s, &structs.DeregisterRequest{
			Node: fmt.Sprintf("node-%d", slot%100), ServiceID: fmt.Sprintf("svc-%d-%d", slot, generation),
		}, &struct{}{})
	}
	generation := make([]int, services)
	for slot := range services {
		if err := register(leader, slot, 0); err != nil {
			b.Fatal(err)
		}
	}
	var watchers sync.WaitGroup
	for w := range 20 {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			s := servers[w%3].srv
			var index uint64
			for ctx.Err() == nil {
				var out structs.IndexedCheckServiceNodes
				err := structs.MethodHealthServiceNodes.Call(ctx, s, &structs.ServiceSpecificRequest{ServiceName: fmt.Sprintf("svc-%d", w),
					QueryOptions: structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: 10 * time.Second}}, &out)
				if err == nil {
					index = out.Index
				}
			}
		}()
	}
	start := sampleProcess(b)
	b.ResetTimer()
	perMinute := max(1, services/10)
	interval := time.Minute / time.Duration(perMinute)
	tick := time.NewTicker(interval)
	end := time.Now().Add(time.Duration(minutes) * time.Minute)
	churned := 0
	for slot := 0; time.Now().Before(end); slot = (slot + 1) % services {
		<-tick.C
		s := servers[slot%3].srv
		if err := deregister(s, slot, generation[slot]); err != nil {
			b.Fatalf("deregister: %v", err)
		}
		generation[slot]++
		if err := register(s, slot, generation[slot]); err != nil {
			b.Fatalf("register: %v", err)
		}
		churned++
	}
	tick.Stop()
	b.StopTimer()
	finish := sampleProcess(b)
	cancel()
	watchers.Wait()
	b.ReportMetric(float64(churned), "replaced")
	b.ReportMetric(start.heapMB, "heap-start-MB")
	b.ReportMetric(finish.heapMB, "heap-end-MB")
	b.ReportMetric(float64(finish.goroutines-start.goroutines), "goroutines-added")
	b.ReportMetric(float64(finish.openFiles-start.openFiles), "files-added")
	if finish.heapMB > start.heapMB*1.5+1 || finish.goroutines > start.goroutines+10 || finish.openFiles > start.openFiles+5 {
		b.Fatalf("not flat: start %+v, end %+v", start, finish)
	}
}
