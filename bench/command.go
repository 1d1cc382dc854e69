package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
)

// Options are the flags every subcommand takes.
type Options struct {
	Targets []Target
	Scale   string
	Seed    uint64
	Params  Params
}

// ParseTargets builds the targets from the comma-separated lists of the
// flags: one target per HTTP address, and per target its gRPC address,
// PID and name at the same position (a list may be empty, or as long as
// the HTTP list).
func ParseTargets(httpAddrs, grpcAddrs, pids, names, token string) ([]Target, error) {
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	hs, gs, ps, ns := split(httpAddrs), split(grpcAddrs), split(pids), split(names)
	if len(hs) == 0 {
		return nil, fmt.Errorf("%w: -http-addr is required", ErrInvalidParams)
	}
	for flagName, l := range map[string][]string{"-grpc-addr": gs, "-pid": ps, "-name": ns} {
		if len(l) != 0 && len(l) != len(hs) {
			return nil, fmt.Errorf("%w: %s lists %d values for %d -http-addr targets", ErrInvalidParams, flagName, len(l), len(hs))
		}
	}
	ts := make([]Target, len(hs))
	for i, h := range hs {
		ts[i] = Target{HTTPAddr: strings.TrimPrefix(strings.TrimSpace(h), "http://"), Token: token}
		if gs != nil {
			ts[i].GRPCAddr = strings.TrimSpace(gs[i])
		}
		if ns != nil {
			ts[i].Name = strings.TrimSpace(ns[i])
		}
		if ps != nil {
			pid, err := strconv.Atoi(strings.TrimSpace(ps[i]))
			if err != nil || pid < 0 {
				return nil, fmt.Errorf("%w: -pid %q is not a process ID", ErrInvalidParams, ps[i])
			}
			ts[i].PID = pid
		}
	}
	return ts, nil
}

// Command is `trellis bench <name> [flags]`: it parses the flags, runs
// benchmark name on each target in turn, prints the table and the
// RESULT line to stdout and progress to stderr, and returns the exit
// code (0, or 1 on a bad flag or a failed run).
func Command(ctx context.Context, name string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http-addr", "127.0.0.1:8500", "The target's HTTP API, host:port; a comma-separated list measures several targets in turn.")
	grpcAddr := fs.String("grpc-addr", "127.0.0.1:8502", "The target's xDS gRPC port, host:port (xds); one per -http-addr target.")
	pids := fs.String("pid", "", "The target's process ID, whose RSS and CPU are read from /proc; one per -http-addr target.")
	names := fs.String("name", "", "The targets' names in the table and the RESULT line; one per -http-addr target.")
	token := fs.String("token", "", "An ACL token sent with every request and ADS stream.")
	scale := fs.String("scale", "small", "The load: tiny, small, medium or large.")
	seed := fs.Uint64("seed", 1, "Seeds the run's choices (upstreams, changed backends, values).")
	verbose := fs.Bool("v", false, "Log progress to stderr.")
	fs.Usage = func() {
		_, _ = fmt.Fprintf(stderr, "Usage: trellis bench %s [options]\n\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	if name == "xds" && *grpcAddr == "" {
		_, _ = fmt.Fprintln(stderr, "bench xds: -grpc-addr is required")
		return 1
	}
	targets, err := ParseTargets(*httpAddr, *grpcAddr, *pids, *names, *token)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	params, err := ScaleParams(*scale)
	if err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var results []*Result
	for _, t := range targets {
		res, err := Run(ctx, name, Config{Target: t, Params: params, Seed: *seed, Logger: logger})
		if err != nil {
			_, _ = fmt.Fprintln(stderr, err)
			return 1
		}
		results = append(results, res)
	}
	if err := WriteTable(stdout, results); err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	if err := WriteResultLine(stdout, *scale, *seed, params, results); err != nil {
		_, _ = fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
