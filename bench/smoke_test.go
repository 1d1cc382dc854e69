package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/agent"
	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/integration/harness"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startDevAgent starts an in-process -dev agent on free loopback ports
// below 32768 and waits for its leader and CA roots; it is shut down when
// the test ends.
func startDevAgent(t *testing.T) Target {
	t.Helper()
	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"-dev", "-node", "bench-dev", "-log-level", "warn", "-serf-wan-port", "-1"}
	for _, flag := range []string{"-http-port", "-server-port", "-serf-lan-port", "-grpc-port", "-dns-port"} {
		p, err := ports.Port()
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, flag, strconv.Itoa(p))
	}
	rc, _, err := config.Load(config.LoadOptions{Args: args, Logger: slog.New(slog.DiscardHandler), FlagOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Runtime: rc})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Shutdown() })
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, err := api.NewClient(&api.Config{Address: rc.HTTPAddrForClients(), Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		leader, err := client.Status().Leader()
		if err == nil && leader != "" {
			if roots, _, err := client.Connect().CARoots(nil); err == nil && roots.ActiveRootID != "" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no leader and CA roots within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return Target{Name: "dev", HTTPAddr: rc.HTTPAddrForClients(), GRPCAddr: rc.GRPCListenAddrs()[0], PID: os.Getpid()}
}

// TestSmoke runs every benchmark at the tiny scale against a -dev agent
// through the same entry point as `trellis bench`: each must finish, print
// its table and a RESULT line holding its figures, and see every change
// it made. It says nothing about speed.
func TestSmoke(t *testing.T) {
	target := startDevAgent(t)
	want := map[string][]string{
		"writes":   {"registrations_per_s", "write_latency_p99_ms"},
		"kv":       {"puts_per_s", "cas_successes", "cas_conflicts", "cas_latency_p99_ms"},
		"blocking": {"all_returned_ms", "all_returned_from_start_ms", "write_ms", "missed"},
		"xds": {"first_config_p99_ms", "first_config_kb", "propagation_p99_ms", "propagation_missed",
			"messages_per_change", "kb_per_change", "reconnects_first", "reconnects_changes", "rss_per_proxy_kb", "cpu_per_change_ms"},
	}
	for _, name := range Benchmarks() {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := []string{"-scale", "tiny", "-seed", "7", "-name", target.Name,
				"-http-addr", target.HTTPAddr, "-grpc-addr", target.GRPCAddr, "-pid", strconv.Itoa(target.PID)}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if code := Command(ctx, name, args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			out := stdout.String()
			i := strings.LastIndex(out, "RESULT ")
			if i < 0 || !strings.HasSuffix(out, "\n") {
				t.Fatalf("no RESULT line in\n%s", out)
			}
			var line resultLine
			if err := json.Unmarshal([]byte(strings.TrimSpace(out[i+len("RESULT "):])), &line); err != nil {
				t.Fatalf("RESULT line: %v\n%s", err, out)
			}
			if line.Bench != name || line.Scale != "tiny" || line.Seed != 7 || len(line.Targets) != 1 || line.Targets[0].Name != "dev" {
				t.Fatalf("RESULT line %+v, want bench %s, scale tiny, seed 7, one target named dev", line, name)
			}
			figs := line.Targets[0].Figures
			for _, key := range want[name] {
				if _, ok := figs[key]; !ok {
					t.Errorf("RESULT has no %s: %v", key, figs)
				}
			}
			for _, key := range []string{"missed", "propagation_missed", "first_config_missing"} {
				if v, ok := figs[key]; ok && v != 0 {
					t.Errorf("%s = %v, want 0", key, v)
				}
			}
			if name == "kv" && figs["cas_successes"] < 1 {
				t.Errorf("no CAS succeeded: %v", figs)
			}
			if !strings.Contains(out, "unit") {
				t.Errorf("no table header in\n%s", out)
			}
		})
	}
}
