// Command benchreport is `make bench`: it builds trellis, runs every
// benchmark of package bench against a -dev agent and then against a
// cluster of three servers with Raft on disk, each started here on
// loopback ports below 32768 and killed by PID at the end, and writes a
// dated markdown report with an SVG chart of the propagation delays.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/trellis-mesh/trellis/bench"
	"github.com/trellis-mesh/trellis/integration/harness"
)

func main() {
	out := flag.String("out", "bench/results", "Directory for the report and its chart.")
	scale := flag.String("scale", "small", "The load: tiny, small, medium or large.")
	seed := flag.Uint64("seed", 1, "Seeds the run's choices.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(ctx, logger, *out, *scale, *seed); err != nil {
		logger.Error("benchreport failed", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, out, scale string, seed uint64) error {
	params, err := bench.ScaleParams(scale)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "trellis-bench-")
	if err != nil {
		return fmt.Errorf("benchreport: temp dir: %w", err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	logger.Info("building trellis")
	binary, err := harness.BuildBinary(ctx, harness.BuildConfig{OutDir: dir})
	if err != nil {
		return err
	}
	ports, err := harness.NewPortAllocator(harness.PortAllocatorConfig{})
	if err != nil {
		return err
	}
	runAll := func(t bench.Target) ([]*bench.Result, error) {
		var results []*bench.Result
		for _, name := range bench.Benchmarks() {
			logger.Info("running", "bench", name, "target", t.Name)
			r, err := bench.Run(ctx, name, bench.Config{Target: t, Params: params, Seed: seed, Logger: logger})
			if err != nil {
				return nil, err
			}
			if err := bench.WriteTable(os.Stdout, []*bench.Result{r}); err != nil {
				return nil, err
			}
			results = append(results, r)
		}
		return results, nil
	}

	report := bench.Report{Date: time.Now(), Scale: scale, Seed: seed,
		Setup: "Every benchmark ran once against a fresh `trellis agent -dev`, then against a fresh " +
			"cluster of three `trellis agent -server` processes with Raft on disk (measured through " +
			"server-0, whose process the RSS and CPU figures are of), all on 127.0.0.1 of the same machine as the tool."}
	dev, err := startAgents(ctx, binary, dir, ports, 0)
	if err != nil {
		return err
	}
	devResults, err := runAll(dev.target("trellis -dev"))
	dev.kill(logger)
	if err != nil {
		return err
	}
	report.Sections = append(report.Sections, bench.Section{Title: "`trellis agent -dev`", Results: devResults})

	cluster, err := startAgents(ctx, binary, dir, ports, 3)
	if err != nil {
		return err
	}
	clusterResults, err := runAll(cluster.target("trellis 3 servers"))
	cluster.kill(logger)
	if err != nil {
		return err
	}
	report.Sections = append(report.Sections, bench.Section{Title: "3 servers, Raft on disk", Results: clusterResults})

	if err := os.MkdirAll(out, 0o750); err != nil {
		return fmt.Errorf("benchreport: %w", err)
	}
	date := report.Date.UTC().Format("2006-01-02")
	report.Chart = date + "-propagation.svg"
	var series []bench.Series
	for _, s := range report.Sections {
		for _, r := range s.Results {
			if r.Bench == "xds" {
				series = append(series, bench.Series{Name: s.Title, Delays: r.Propagation})
			}
		}
	}
	if err := writeFile(filepath.Join(out, report.Chart), func(f *os.File) error {
		return bench.WriteSVG(f, "Endpoint-change propagation, cumulative share of affected streams", series)
	}); err != nil {
		return err
	}
	path := filepath.Join(out, date+".md")
	if err := writeFile(path, func(f *os.File) error { return report.WriteMarkdown(f) }); err != nil {
		return err
	}
	logger.Info("report written", "path", path)
	return nil
}

func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path) //nolint:gosec // the report file this tool was asked to write
	if err != nil {
		return fmt.Errorf("benchreport: %w", err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("benchreport: write %s: %w", path, err)
	}
	return f.Close()
}

// agents are the processes of one target: a -dev agent, or servers of
// which the first is measured.
type agents struct {
	procs []*harness.Process
	cfgs  []harness.AgentConfig
}

// startAgents starts a -dev agent (servers 0) or that many servers with
// data dirs under dir, and waits for a leader and the CA's roots.
func startAgents(ctx context.Context, binary, dir string, ports *harness.PortAllocator, servers int) (*agents, error) {
	a := &agents{}
	var cfgs []harness.AgentConfig
	if servers == 0 {
		p, err := harness.AllocateAgentPorts(ports)
		if err != nil {
			return nil, err
		}
		cfgs = append(cfgs, harness.AgentConfig{Binary: binary, Mode: harness.ModeDev, Node: "bench-dev", Ports: p, LogLevel: "warn"})
	}
	var serf []string
	for i := range servers {
		p, err := harness.AllocateAgentPorts(ports)
		if err != nil {
			return nil, err
		}
		node := fmt.Sprintf("bench-server-%d", i)
		data := filepath.Join(dir, node)
		if err := os.MkdirAll(data, 0o750); err != nil {
			return nil, fmt.Errorf("benchreport: %w", err)
		}
		cfgs = append(cfgs, harness.AgentConfig{Binary: binary, Mode: harness.ModeServer, Node: node, DataDir: data, Ports: p, BootstrapExpect: servers, LogLevel: "warn"})
		serf = append(serf, fmt.Sprintf("%s:%d", harness.Loopback, p.SerfLAN))
	}
	for i := range cfgs {
		for j, s := range serf {
			if j != i {
				cfgs[i].RetryJoin = append(cfgs[i].RetryJoin, s)
			}
		}
		cfgs[i].LogPath = filepath.Join(dir, cfgs[i].Node+".log")
		p, err := harness.StartProcess(harness.ProcessConfig{Name: cfgs[i].Node, Path: binary, Args: cfgs[i].Args(), LogPath: cfgs[i].LogPath})
		if err != nil {
			a.kill(slog.New(slog.DiscardHandler))
			return nil, err
		}
		a.procs = append(a.procs, p)
		a.cfgs = append(a.cfgs, cfgs[i])
	}
	if err := a.waitReady(ctx); err != nil {
		a.kill(slog.New(slog.DiscardHandler))
		return nil, err
	}
	return a, nil
}

// target is the first agent, measured.
func (a *agents) target(name string) bench.Target {
	p := a.cfgs[0].Ports
	return bench.Target{
		Name:     name,
		HTTPAddr: fmt.Sprintf("%s:%d", harness.Loopback, p.HTTP),
		GRPCAddr: fmt.Sprintf("%s:%d", harness.Loopback, p.GRPC),
		PID:      a.procs[0].PID(),
	}
}

// waitReady waits until the measured agent knows a leader and serves the
// CA's roots, for at most two minutes.
func (a *agents) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	addr := a.target("").HTTPAddr
	for {
		for _, p := range a.procs {
			if err := p.UnexpectedExit(); err != nil {
				return err
			}
		}
		var roots struct{ ActiveRootID string }
		if leader, err := harness.StatusLeader(ctx, addr); err == nil && leader != "" {
			if err := harness.GetJSON(ctx, addr, "/v1/connect/ca/roots", &roots); err == nil && roots.ActiveRootID != "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return errors.New("benchreport: no leader and CA roots within two minutes")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kill kills every process by its PID and waits for it.
func (a *agents) kill(logger *slog.Logger) {
	for _, p := range a.procs {
		if err := p.Kill(); err != nil {
			logger.Warn("cannot kill an agent", "name", p.Name(), "error", err)
		}
	}
}
