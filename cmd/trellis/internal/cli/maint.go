package cli

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

const maintHelp = `
Usage: trellis maint [options]

  Places a node or service into maintenance mode (-enable) or takes it out
  (-disable). Without either, lists what is in maintenance on the agent.`

func runMaint(args []string, env *Env) int {
	var hf httpFlags
	var enable, disable bool
	var reason, serviceID string
	fs := newFlagSet("maint", maintHelp, env.Stderr)
	fs.BoolVar(&enable, "enable", false, "Enable maintenance mode.")
	fs.BoolVar(&disable, "disable", false, "Disable maintenance mode.")
	fs.StringVar(&reason, "reason", "", "Text describing the maintenance reason.")
	fs.StringVar(&serviceID, "service", "", "Control maintenance mode for a specific service ID.")
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case enable && disable:
		fmt.Fprintln(env.Stderr, "Only one of -enable or -disable may be provided")
		return 1
	case !enable && reason != "":
		fmt.Fprintln(env.Stderr, "Reason may only be provided with -enable")
		return 1
	case !enable && !disable && serviceID != "":
		fmt.Fprintln(env.Stderr, "Service requires either -enable or -disable")
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	ctx := context.Background()
	if !enable && !disable {
		return listMaintenance(ctx, c, env)
	}

	path, what := "/v1/agent/maintenance", "node"
	if serviceID != "" {
		path, what = "/v1/agent/service/maintenance/"+serviceID, "service"
	}
	q := url.Values{"enable": {fmt.Sprint(enable)}}
	if enable {
		// The official client always sends reason, even empty.
		q.Set("reason", reason)
	}
	if _, err := c.put(ctx, path, q, nil); err != nil {
		verb := "enabling"
		if disable {
			verb = "disabling"
		}
		fmt.Fprintf(env.Stderr, "Error %s %s maintenance: %s\n", verb, what, err)
		return 1
	}
	state := "enabled"
	if disable {
		state = "disabled"
	}
	if serviceID == "" {
		fmt.Fprintf(env.Stdout, "Node maintenance is now %s\n", state)
	} else {
		fmt.Fprintf(env.Stdout, "Service maintenance is now %s for %q\n", state, serviceID)
	}
	return 0
}

// listMaintenance prints the node and services in maintenance, found by
// the critical checks maintenance mode registers.
func listMaintenance(ctx context.Context, c *apiClient, env *Env) int {
	var self struct{ Config struct{ NodeName string } }
	if err := c.getJSON(ctx, "/v1/agent/self", nil, false, &self); err != nil {
		fmt.Fprintf(env.Stderr, "Error querying Consul agent: %s\n", err)
		return 1
	}
	var checks map[string]struct {
		CheckID   string
		ServiceID string
		Notes     string
	}
	if err := c.getJSON(ctx, "/v1/agent/checks", nil, false, &checks); err != nil {
		fmt.Fprintf(env.Stderr, "Error getting checks: %s\n", err)
		return 1
	}
	ids := make([]string, 0, len(checks))
	for id := range checks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ch := checks[id]
		switch {
		case ch.CheckID == "_node_maintenance":
			fmt.Fprintf(env.Stdout, "Node:\n  Name:   %s\n  Reason: %s\n\n", self.Config.NodeName, ch.Notes)
		case strings.HasPrefix(ch.CheckID, "_service_maintenance:"):
			fmt.Fprintf(env.Stdout, "Service:\n  ID:     %s\n  Reason: %s\n\n", ch.ServiceID, ch.Notes)
		}
	}
	return 0
}
