package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

const intentionGetHelp = `
Usage: trellis intention get [options] SRC DST
Usage: trellis intention get [options] ID

  Read and show the details about an intention. The intention can be looked
  up via an exact source/destination match or via the unique intention ID
  (of an intention created through the deprecated ID-based API).

      $ trellis intention get web db`

func runIntentionGet(args []string, env *Env) int {
	c, ref, code, ok := parseIntentionRef("intention get", intentionGetHelp, args, env)
	if !ok {
		return code
	}
	var ixn structs.Intention
	switch err := c.getJSON(context.Background(), ref.path, ref.query, true, &ixn); {
	case isNotFound(err):
		fmt.Fprintln(env.Stderr, ref.missing)
		return 1
	case err != nil:
		fmt.Fprintf(env.Stderr, "Error reading the intention: %s\n", err)
		return 1
	}
	rows := []string{"Source:" + columnSep + ixn.SourceName, "Destination:" + columnSep + ixn.DestinationName}
	if ixn.Action != "" {
		rows = append(rows, "Action:"+columnSep+string(ixn.Action))
	}
	if ixn.ID != "" {
		rows = append(rows, "ID:"+columnSep+ixn.ID)
	}
	if ixn.Description != "" {
		rows = append(rows, "Description:"+columnSep+ixn.Description)
	}
	for _, k := range slices.Sorted(maps.Keys(ixn.Meta)) {
		rows = append(rows, fmt.Sprintf("Meta[%s]:%s%s", k, columnSep, ixn.Meta[k]))
	}
	rows = append(rows, "Created At:"+columnSep+ixn.CreatedAt.Local().Format(time.RFC850))
	fmt.Fprintln(env.Stdout, columnize(rows))
	if len(ixn.Permissions) > 0 {
		b, err := json.MarshalIndent(ixn.Permissions, "", "  ")
		if err != nil {
			fmt.Fprintln(env.Stderr, err)
			return 1
		}
		fmt.Fprintln(env.Stdout, "Permissions:\n"+string(b))
	}
	return 0
}

const intentionMatchHelp = `
Usage: trellis intention match [options] SRC|DST

  Show the list of intentions that would be enforced for a given source
  or destination. The intentions are listed in the order they would be
  evaluated.

      $ trellis intention match db
      $ trellis intention match -source web`

func runIntentionMatch(args []string, env *Env) int {
	var (
		hf                  httpFlags
		source, destination bool
	)
	fs := newFlagSet("intention match", intentionMatchHelp, env.Stderr)
	fs.BoolVar(&source, "source", false, "Match intentions with the given source.")
	fs.BoolVar(&destination, "destination", false, "Match intentions with the given destination.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(env.Stderr, "Error: command requires exactly one argument: src or dst")
		return 1
	}
	if source && destination {
		fmt.Fprintln(env.Stderr, "Error: only one of -source or -destination may be specified")
		return 1
	}
	by := "destination"
	if source {
		by = "source"
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	name := fs.Arg(0)
	var matches map[string]structs.Intentions
	if err := c.getJSON(context.Background(), "/v1/connect/intentions/match", url.Values{"by": {by}, "name": {name}}, true, &matches); err != nil {
		fmt.Fprintf(env.Stderr, "Error matching the connection: %s\n", err)
		return 1
	}
	for _, ixn := range matches[name] {
		fmt.Fprintln(env.Stdout, ixn)
	}
	return 0
}
