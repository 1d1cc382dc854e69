package cli

import (
	"context"
	"fmt"
	"sort"
)

const infoHelp = `
Usage: trellis info [options]

  Provides debugging information for operators: the sections of the agent's
  statistics (agent, build, consul, raft, serf_lan, runtime), as
  /v1/agent/self reports them.`

func runInfo(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("info", infoHelp, env.Stderr)
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	var self struct {
		Stats map[string]map[string]any
	}
	if err := c.getJSON(context.Background(), "/v1/agent/self", nil, false, &self); err != nil {
		fmt.Fprintf(env.Stderr, "Error querying agent: %s\n", err)
		return 1
	}
	for _, section := range sortedKeys(self.Stats) {
		fmt.Fprintf(env.Stdout, "%s:\n", section)
		vals := self.Stats[section]
		for _, k := range sortedKeys(vals) {
			fmt.Fprintf(env.Stdout, "\t%s = %v\n", k, vals[k])
		}
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
