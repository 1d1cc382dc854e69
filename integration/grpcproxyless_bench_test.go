package integration

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// BenchmarkGRPCProxylessEndpointChange measures, with grpc-go's own xDS
// client on a client agent, the time from a catalog change (a new api
// instance registered on the agent) to the client's balancer sending an
// RPC to it, p50 and p99 over 20 changes; and the agent's resident memory
// per extra gRPC client stream (20 more clients, each its own xDS
// client and stream).
//
//	go test ./integration -run '^$' -bench GRPCProxylessEndpointChange -benchtime 1x
func BenchmarkGRPCProxylessEndpointChange(b *testing.B) {
	c, ports, ctx := startBenchCluster(b, 1)
	client := c.Clients()[0]
	put := func(path, body string) {
		b.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPut, client.HTTPURL()+path, strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == 200 {
					return
				}
				err = fmt.Errorf("%s", resp.Status)
			}
			if time.Now().After(deadline) {
				b.Fatalf("PUT %s: %v", path, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	register := func(id string, port int) {
		put("/v1/agent/service/register", fmt.Sprintf(`{"ID":%q,"Name":"api","Address":"127.0.0.1","Port":%d,"Connect":{"Native":true}}`, id, port))
	}
	// The CA may still be coming up: service-defaults is the first write.
	put("/v1/config", `{"Kind":"service-defaults","Name":"api","Protocol":"grpc"}`)
	put("/v1/agent/service/register", `{"ID":"web","Name":"web","Port":7000,"Connect":{"Native":true}}`)
	first := startGRPCBackend(b, ports, nil)
	register("api-0", portOf(b, first.addr))

	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, trellisBinary, "connect", "grpc-bootstrap", "-service-id", "web",
		"-http-addr", client.HTTPAddr(), "-grpc-addr", client.GRPCAddr())
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		b.Fatalf("grpc-bootstrap: %v: %s", err, errOut.String())
	}
	bootstrap := out.Bytes()
	conn := dialXDS(b, bootstrap, "api", false)
	// reached waits until an RPC lands on backend.
	reached := func(conn *grpc.ClientConn, backend *grpcBackend) time.Duration {
		start := time.Now()
		for time.Since(start) < 30*time.Second {
			p, err := rpc(ctx, conn)
			if err == nil && p.Addr.String() == backend.addr {
				return time.Since(start)
			}
		}
		b.Fatalf("no RPC reached %s", backend.addr)
		return 0
	}
	reached(conn, first)

	const changes, extraStreams = 20, 20
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		var lat []time.Duration
		for i := range changes {
			backend := startGRPCBackend(b, ports, nil)
			start := time.Now()
			register(fmt.Sprintf("api-%d-%d", iter, i+1), portOf(b, backend.addr))
			reached(conn, backend)
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
	b.StopTimer()

	time.Sleep(time.Second)
	before := rssKB(b, client.PID())
	for range extraStreams {
		conn := dialXDS(b, bootstrap, "api", false)
		reached(conn, first)
	}
	time.Sleep(time.Second)
	after := rssKB(b, client.PID())
	b.ReportMetric(float64(after-before)/extraStreams, "agent-RSS-KB/stream")
}
