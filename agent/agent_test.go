package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/integration/harness"
)

// devAgent starts an in-process -dev agent on free loopback ports. It is
// shut down when the test ends, or earlier by calling stop.
func devAgent(t *testing.T, configJSON ...string) (a *Agent, url string, stop func()) {
	t.Helper()
	args := devArgs(t, "dev1")
	for i, c := range configJSON {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("extra-%d.json", i))
		if err := os.WriteFile(path, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-config-file", path)
	}
	rc, _, err := config.Load(config.LoadOptions{Args: args, Logger: slog.New(slog.DiscardHandler), FlagOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	a, err = New(Config{Runtime: rc})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		if err := a.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
	}
	t.Cleanup(stop)
	return a, "http://" + rc.HTTPAddrForClients(), stop
}

// devArgs are the flags of a -dev agent named node on free loopback ports.
func devArgs(t *testing.T, node string) []string {
	t.Helper()
	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-dev", "-node", node}
	for _, flag := range []string{"-http-port", "-server-port", "-serf-lan-port", "-serf-wan-port", "-grpc-port", "-dns-port"} {
		p, err := ports.Port()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, flag, strconv.Itoa(p))
	}
	return args
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestDevAgentServesAndStopsCleanly(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, url, stop := devAgent(t)
	defer stop()
	{
		waitFor(t, "a leader", func() bool {
			code, body := get(t, url+"/v1/status/leader")
			return code == 200 && body != `""`
		})
		waitFor(t, "own node with serfHealth", func() bool {
			_, body := get(t, url+"/v1/health/node/dev1")
			return strings.Contains(body, `"serfHealth"`) && strings.Contains(body, `"passing"`)
		})
		// The DNS interface answers from the same catalog, on UDP and TCP.
		for _, network := range []string{"udp", "tcp"} {
			c := &dns.Client{Net: network, Timeout: 5 * time.Second}
			r, _, err := c.Exchange(new(dns.Msg).SetQuestion("dev1.node.consul.", dns.TypeA), a.rc.DNSListenAddrs()[0])
			if err != nil || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "127.0.0.1") {
				t.Fatalf("DNS over %s: %v %v", network, r, err)
			}
		}
		code, body := get(t, url+"/v1/agent/members")
		if code != 200 || !strings.Contains(body, `"Name":"dev1"`) {
			t.Fatalf("members: %d %s", code, body)
		}
		code, body = get(t, url+"/v1/agent/metrics?format=prometheus")
		if code != 200 || !strings.Contains(body, "consul_rpc_request ") || !strings.Contains(body, "consul_server_isLeader 1") {
			t.Fatalf("prometheus metrics: %d %.400s", code, body)
		}
		code, body = get(t, url+"/v1/agent/metrics")
		if code != 200 || !strings.Contains(body, `"Counters"`) || !strings.Contains(body, `"consul.rpc.request"`) {
			t.Fatalf("json metrics: %d %.400s", code, body)
		}
	}
}
