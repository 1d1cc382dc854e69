// Command trellis is the Trellis binary: `trellis agent` runs an agent
// (server or client), and the other commands talk to a running agent over
// Consul's HTTP API with Consul's flags and output, so that scripts and
// tools written for the consul binary keep working.
//
// The commands live in internal/cli, where tests call them directly; this
// package only binds them to the process and to the agent package.
package main

import (
	"os"

	"github.com/trellis-mesh/trellis/agent"
	"github.com/trellis-mesh/trellis/cmd/trellis/internal/cli"
)

func main() {
	env := cli.ProcessEnv(newAgent)
	env.ValidateDefinitions = agent.ValidateDefinitions
	os.Exit(cli.Run(os.Args[1:], env))
}
