package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// BenchmarkClientAgentRegistrations measures how fast one client agent
// pushes service registrations to a 3-server cluster, and the client's
// memory idle and with 1,000 local services. Registrations go to the
// client's HTTP API from 8 concurrent callers; the rate counts until every
// one is in the servers' catalog (anti-entropy's push included). The client
// has a data dir, so each registration is also fsynced locally.
//
//	go test ./integration -run '^$' -bench ClientAgentRegistrations -benchtime 1x
func BenchmarkClientAgentRegistrations(b *testing.B) {
	c, _, ctx := startBenchCluster(b, 3)
	client := c.Clients()[0]
	server := c.Servers()[0]
	time.Sleep(2 * time.Second)
	idleRSS := rssKB(b, client.PID())

	const services, callers = 1000, 8
	hc := &http.Client{Timeout: 30 * time.Second}
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for w := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < services; i += callers {
					body := fmt.Sprintf(`{"ID":"svc-%d-%d","Name":"svc-%d","Port":%d,"Check":{"TTL":"10m","Status":"passing"}}`, iter, i, i%50, 10000+i)
					req, _ := http.NewRequest(http.MethodPut, client.HTTPURL()+"/v1/agent/service/register", strings.NewReader(body))
					resp, err := hc.Do(req)
					if err != nil {
						errs <- err
						return
					}
					_ = resp.Body.Close()
					if resp.StatusCode != 200 {
						errs <- fmt.Errorf("register: %s", resp.Status)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		accepted := time.Since(start)
		// Wait until the catalog on a server holds them all.
		for {
			var ns struct{ Services map[string]any }
			resp, err := hc.Get(server.HTTPURL() + "/v1/catalog/node/" + client.Node())
			if err == nil {
				_ = json.NewDecoder(resp.Body).Decode(&ns)
				_ = resp.Body.Close()
			}
			if len(ns.Services) >= services*(iter+1) {
				break
			}
			if ctx.Err() != nil {
				b.Fatalf("catalog holds %d of %d services", len(ns.Services), services*(iter+1))
			}
			time.Sleep(20 * time.Millisecond)
		}
		synced := time.Since(start)
		b.ReportMetric(float64(services)/accepted.Seconds(), "accepted-reg/s")
		b.ReportMetric(float64(services)/synced.Seconds(), "in-catalog-reg/s")
	}
	b.StopTimer()
	time.Sleep(2 * time.Second)
	b.ReportMetric(float64(idleRSS)/1024, "idle-RSS-MB")
	b.ReportMetric(float64(rssKB(b, client.PID()))/1024, "1k-services-RSS-MB")
}

// filepathConfig writes a JSON config file for the benchmark.
func filepathConfig(tb testing.TB, v any) string {
	tb.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.CreateTemp(tb.TempDir(), "bench-*.json")
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(data); err != nil {
		tb.Fatal(err)
	}
	return f.Name()
}

// rssKB reads a process's resident set size from /proc.
func rssKB(tb testing.TB, pid int) int {
	tb.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	tb.Fatal("no VmRSS")
	return 0
}

// startBenchCluster starts a benchmark's cluster: servers servers and one
// client agent at production Raft timing, quiet logs, once a leader and
// the client are up; its port allocator serves the benchmark's other
// listeners. ctx ends with the benchmark (5 minutes at most).
func startBenchCluster(b *testing.B, servers int) (*harness.Cluster, *harness.PortAllocator, context.Context) {
	b.Helper()
	if trellisBinary == "" {
		b.Skip("no trellis binary (built by TestMain unless -short)")
	}
	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		b.Fatal(err)
	}
	cfg := filepathConfig(b, map[string]any{"performance": map[string]any{"raft_multiplier": 1}})
	c := harness.StartCluster(b, harness.ClusterConfig{
		Binary: trellisBinary, Ports: ports, Servers: servers, Clients: 1, LogLevel: "warn",
		ServerArgs: []string{"-config-file", cfg},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	if _, err := c.WaitForLeader(ctx); err != nil {
		b.Fatal(err)
	}
	if err := c.WaitForClients(ctx); err != nil {
		b.Fatal(err)
	}
	return c, ports, ctx
}
