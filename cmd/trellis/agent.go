package main

import (
	"log/slog"

	"github.com/trellis-mesh/trellis/agent"
	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/cmd/trellis/internal/cli"
)

// newAgent builds the agent for `trellis agent`. It is the only place the
// binary depends on the agent package, which keeps the CLI testable on its
// own.
func newAgent(rc *config.RuntimeConfig, logger *slog.Logger, reload func() error) (cli.Agent, error) {
	a, err := agent.New(agent.Config{Runtime: rc, Logger: logger, Reload: reload})
	if err != nil {
		return nil, err
	}
	return a, nil
}
