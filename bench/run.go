package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"
)

// Config is one benchmark run against one target.
type Config struct {
	Target Target
	Params Params
	// Seed makes the run's choices (which upstreams each frontend has,
	// which backend changes, the values written) repeatable.
	Seed uint64
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Benchmarks lists the benchmarks by name, in the order `make bench`
// runs them.
func Benchmarks() []string { return []string{"writes", "kv", "blocking", "xds"} }

// Run runs the benchmark named bench ("writes", "kv", "blocking", "xds").
func Run(ctx context.Context, bench string, cfg Config) (*Result, error) {
	if err := cfg.Params.check(bench); err != nil {
		return nil, err
	}
	if cfg.Target.HTTPAddr == "" {
		return nil, fmt.Errorf("%w: %s needs the target's HTTP address", ErrInvalidParams, bench)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Logger = cfg.Logger.With("component", "bench", "bench", bench, "target", cfg.Target.label())
	r := newRunner(cfg)
	defer r.close()
	res := &Result{Bench: bench, Target: cfg.Target}
	var err error
	switch bench {
	case "writes":
		err = r.writes(ctx, res)
	case "kv":
		err = r.kv(ctx, res)
	case "blocking":
		err = r.blocking(ctx, res)
	case "xds":
		if cfg.Target.GRPCAddr == "" {
			return nil, fmt.Errorf("%w: xds needs the target's gRPC address", ErrInvalidParams)
		}
		err = r.xds(ctx, res)
	default:
		return nil, fmt.Errorf("%w: unknown benchmark %q", ErrInvalidParams, bench)
	}
	if err != nil {
		return nil, fmt.Errorf("bench %s on %s: %w", bench, cfg.Target.label(), err)
	}
	return res, nil
}

// runner holds what one run shares: its client, its random source, and
// a prefix that keeps its names apart from earlier runs' on the same
// target.
type runner struct {
	cfg    Config
	log    *slog.Logger
	tr     *http.Transport
	client *api.Client
	rng    *rand.Rand
	prefix string
	// lastChanged is the backend the last xds change added an instance
	// to, which the next change removes.
	lastChanged int
}

func newRunner(cfg Config) *runner {
	// Enough idle connections for every concurrent caller of any
	// benchmark, so that none pays a new connection per request.
	conns := max(cfg.Params.Writers, cfg.Params.CASWriters, cfg.Params.Watchers, 8) + 4
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute}
	// api.NewClient fails only for an unparsable TLS setup, which this
	// configuration has none of.
	client, _ := api.NewClient(&api.Config{Address: cfg.Target.HTTPAddr, Token: cfg.Target.Token, Transport: tr})
	return &runner{
		cfg:    cfg,
		log:    cfg.Logger,
		tr:     tr,
		client: client,
		rng:    rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), //nolint:gosec // a seeded, repeatable load pattern, not a secret
		prefix: "bench-" + strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36),
	}
}

func (r *runner) close() { r.tr.CloseIdleConnections() }

// proc samples the target's process; with no PID it returns a zero
// sample, and a failure is logged (the figures then read as zero) rather
// than failing a run that measured everything else.
func (r *runner) proc() (ProcSample, bool) {
	if r.cfg.Target.PID == 0 {
		return ProcSample{}, false
	}
	s, err := ReadProc(r.cfg.Target.PID)
	if err != nil {
		r.log.Warn("cannot read the target's process", "pid", r.cfg.Target.PID, "error", err)
		return ProcSample{}, false
	}
	return s, true
}

// parallel runs n jobs on w workers, job i calling f(i), and returns the
// first error; the others stop taking jobs once one failed.
func parallel(ctx context.Context, n, w int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan int)
	done := make(chan struct{})
	for range w {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range jobs {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	for range w {
		<-done
	}
	return context.Cause(ctx)
}
