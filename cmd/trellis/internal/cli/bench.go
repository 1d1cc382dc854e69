package cli

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/trellis-mesh/trellis/bench"
)

// benchCommand is `trellis bench <name>`, a thin shell over package
// bench; an interrupt stops the run (and its streams) cleanly.
func benchCommand(name string) func(args []string, env *Env) int {
	return func(args []string, env *Env) int {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return bench.Command(ctx, name, args, env.Stdout, env.Stderr)
	}
}
