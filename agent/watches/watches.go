// Package watches runs the watches of the agent's configuration (its
// `watches` key): each one follows a view of the cluster's data with
// blocking queries through the agent's own HTTP API, as Consul's agent
// does, and hands every change to a handler, a command or an HTTP
// endpoint.
//
// The watch types and their parameters are consul/api's watch package's
// (MPL-2.0), the one Consul's agent and its `watch` command use, so that a
// watch definition means exactly what it means to Consul.
package watches

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/hashicorp/consul/api"
	"github.com/hashicorp/consul/api/watch"

	"github.com/trellis-mesh/trellis/internal/hclogbridge"
)

// ErrInvalid marks a watch definition Consul would refuse; the message
// names the watch by its position and says what is wrong.
var ErrInvalid = errors.New("invalid watch")

// handlerTypes are the handler_type values Consul's agent runs.
const (
	handlerScript = "script"
	handlerHTTP   = "http"
)

// Config is what a Runner needs.
type Config struct {
	// Specs are the watch definitions as decoded from the config files:
	// JSON objects with Consul's keys (type, handler_type, args, ...).
	Specs []map[string]any
	// Address is the agent's own HTTP API, host:port or unix://path, that
	// the watches read through. Required when Specs is not empty.
	Address string
	// Logger receives the watches' errors and their handlers' output.
	Logger *slog.Logger
}

// Runner runs one configuration's watches until Stop.
type Runner struct {
	plans []*watch.Plan
	// cancel ends the handlers still running when Stop is called.
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Validate checks watch definitions as Consul's agent does before it runs
// them, without starting anything (trellis validate).
func Validate(specs []map[string]any) error {
	_, err := parsePlans(context.Background(), specs, slog.New(slog.DiscardHandler))
	return err
}

// Start parses every definition and, when all are valid, runs each in its
// own goroutine. One invalid definition starts none of them.
func Start(cfg Config) (*Runner, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.Specs) > 0 && cfg.Address == "" {
		return nil, fmt.Errorf("%w: watch plans require an HTTP or HTTPS endpoint", ErrInvalid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	plans, err := parsePlans(ctx, cfg.Specs, cfg.Logger)
	if err != nil {
		cancel()
		return nil, err
	}
	r := &Runner{plans: plans, cancel: cancel}
	hl := hclogbridge.New(cfg.Logger, "watch")
	for _, p := range plans {
		p.Logger = hl
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			// RunWithConfig applies the plan's datacenter and token to
			// the client, as Consul's agent does.
			if err := p.RunWithConfig(cfg.Address, &api.Config{Address: cfg.Address}); err != nil {
				cfg.Logger.Error("failed to run watch", "type", p.Type, "error", err)
			}
		}()
	}
	return r, nil
}

// Stop ends every watch, interrupting its blocking query, and waits for
// them (a handler already running is waited for too).
func (r *Runner) Stop() {
	if r == nil {
		return
	}
	for _, p := range r.plans {
		p.Stop()
	}
	r.cancel()
	r.wg.Wait()
}

// parsePlans compiles each definition into a plan with its handler.
func parsePlans(ctx context.Context, specs []map[string]any, logger *slog.Logger) ([]*watch.Plan, error) {
	plans := make([]*watch.Plan, 0, len(specs))
	for i, spec := range specs {
		p, err := parsePlan(ctx, spec, logger)
		if err != nil {
			return nil, fmt.Errorf("%w %d: %w", ErrInvalid, i+1, err)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

func parsePlan(ctx context.Context, spec map[string]any, logger *slog.Logger) (*watch.Plan, error) {
	// watch.ParseExempt consumes the map it is given.
	params := make(map[string]any, len(spec)+1)
	for k, v := range spec {
		params[k] = v
	}
	switch ht, ok := params["handler_type"]; {
	case !ok:
		params["handler_type"] = handlerScript
	case ht != handlerScript && ht != handlerHTTP:
		return nil, fmt.Errorf("Handler type '%v' not recognized", ht)
	}
	// Connect watches would hand leaf keys to any command named in a
	// config file; Consul's agent refuses them there too.
	if typ, ok := params["type"].(string); ok && strings.HasPrefix(typ, "connect_") {
		return nil, fmt.Errorf("Watch type %s is not allowed in agent config", typ)
	}
	p, err := watch.ParseExempt(params, []string{"handler", "args"})
	if err != nil {
		return nil, fmt.Errorf("Failed to parse watch: %w", err)
	}
	h, err := newHandler(ctx, p, logger)
	if err != nil {
		return nil, err
	}
	p.HybridHandler = h
	return p, nil
}
