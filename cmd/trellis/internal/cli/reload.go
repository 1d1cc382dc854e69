package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/trellis-mesh/trellis/agent/config"
)

const reloadHelp = `
Usage: trellis reload [options]

  Causes the agent to reload its configuration files: the services and
  checks they define are registered again, added or removed, and the log
  level follows the files. This does the same as sending SIGHUP to the
  agent.`

func runReload(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("reload", reloadHelp, env.Stderr)
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	if _, err := c.put(context.Background(), "/v1/agent/reload", nil, nil); err != nil {
		fmt.Fprintf(env.Stderr, "Error reloading: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "Configuration reload triggered")
	return 0
}

const validateHelp = `
Usage: trellis validate [options] FILE_OR_DIRECTORY...

  Performs a thorough sanity test on Trellis (Consul) configuration files.
  For each file or directory given, the command parses the contents just
  as the agent command would, and reports any error, without starting an
  agent or writing anything. Give it the complete set of files the agent
  will load: a partial fragment may not pass the agent's validation.

  Returns 0 if the configuration is valid, or 1 if there are problems.`

func runValidate(args []string, env *Env) int {
	var format string
	var quiet bool
	fs := newFlagSet("validate", validateHelp, env.Stderr)
	fs.StringVar(&format, "config-format", "", "Config files are in this format irrespective of their extension. Must be 'hcl' or 'json'")
	fs.BoolVar(&quiet, "quiet", false, "When given, a successful run will produce no output.")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	paths := fs.Args()
	if len(paths) == 0 {
		fmt.Fprintln(env.Stderr, "Must specify at least one config file or directory")
		return 1
	}
	if format != "" && format != "json" && format != "hcl" {
		fmt.Fprintln(env.Stderr, "-config-format must be either 'hcl' or 'json'")
		return 1
	}
	var loadArgs []string
	if format != "" {
		loadArgs = append(loadArgs, "-config-format", format)
	}
	for _, p := range paths {
		loadArgs = append(loadArgs, "-config-file", p)
	}
	rc, _, err := config.Load(config.LoadOptions{Args: loadArgs, ReadOnly: true})
	if err == nil && env.ValidateDefinitions != nil {
		err = env.ValidateDefinitions(rc)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "Config validation failed: %s\n", strings.TrimSpace(err.Error()))
		return 1
	}
	if !quiet {
		fmt.Fprintln(env.Stdout, "Configuration is valid!")
	}
	return 0
}
