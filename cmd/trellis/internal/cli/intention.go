package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The intention commands: intention create|check|delete|list (and get and
// match, intention_read.go), with Consul's flags, output and exit codes.
// Intentions are addressed by source and destination (the exact API);
// delete and get also take the ID of an intention created through the
// deprecated ID-based API.

// intentionJSON is an intention as /v1/connect/intentions returns it and
// as `intention create -file` reads it.
type intentionJSON struct {
	ID              string            `json:",omitempty"`
	Description     string            `json:",omitempty"`
	SourceName      string            `json:",omitempty"`
	DestinationName string            `json:",omitempty"`
	SourceType      string            `json:",omitempty"`
	Action          string            `json:",omitempty"`
	Permissions     json.RawMessage   `json:",omitempty"`
	Meta            map[string]string `json:",omitempty"`
	Precedence      int               `json:"-"`
}

func (x *intentionJSON) String() string {
	return fmt.Sprintf("%s => %s (%s)", x.SourceName, x.DestinationName, x.Action)
}

func exactQuery(src, dst string) url.Values {
	return url.Values{"source": {src}, "destination": {dst}}
}

const intentionCreateHelp = `
Usage: trellis intention create [options] SRC DST
Usage: trellis intention create [options] -file FILE...

  Create one or more intentions. The data can be specified as a single
  source and destination pair or via a set of JSON files when the "-file"
  flag is specified ("-" reads standard input).

      $ trellis intention create web db

  An "allow" intention is created by default. To create a "deny"
  intention, the "-deny" flag should be specified. If an intention
  between the same source and destination exists, creation fails unless
  "-replace" is given.`

func runIntentionCreate(args []string, env *Env) int {
	var (
		hf                           httpFlags
		allow, deny, file, doReplace bool
		meta                         keyValueFlag
	)
	fs := newFlagSet("intention create", intentionCreateHelp, env.Stderr)
	fs.BoolVar(&allow, "allow", false, "Create an intention that allows when matched.")
	fs.BoolVar(&deny, "deny", false, "Create an intention that denies when matched.")
	fs.BoolVar(&file, "file", false, "Read intention data from one or more files.")
	fs.BoolVar(&doReplace, "replace", false, "Replace matching intentions.")
	fs.Var(&meta, "meta", "Metadata to set on the intention, formatted as key=value. This flag may be specified multiple times to set multiple meta fields.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !allow && !deny {
		allow = true
	}
	if allow && deny {
		fmt.Fprintln(env.Stderr, "Only one of -allow or -deny may be specified.")
		return 1
	}
	action := "allow"
	if deny {
		action = "deny"
	}
	var ixns []*intentionJSON
	if file {
		for _, path := range fs.Args() {
			ixn, err := intentionFromFile(path, env)
			if err != nil {
				fmt.Fprintf(env.Stderr, "Error: %s\n", err)
				return 1
			}
			ixns = append(ixns, ixn)
		}
	} else {
		if fs.NArg() != 2 {
			fmt.Fprintln(env.Stderr, "Error: Must specify two arguments: source and destination")
			return 1
		}
		ixns = []*intentionJSON{{SourceName: fs.Arg(0), DestinationName: fs.Arg(1), SourceType: "consul", Action: action, Meta: meta}}
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	ctx := context.Background()
	for _, ixn := range ixns {
		q := exactQuery(ixn.SourceName, ixn.DestinationName)
		if !doReplace {
			_, _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/connect/intentions/exact", query: q, withDC: true})
			switch {
			case err == nil:
				fmt.Fprintf(env.Stderr, "Error creating intention %q: an intention from %q to %q already exists; use -replace to replace it\n",
					ixn.String(), ixn.SourceName, ixn.DestinationName)
				return 1
			case !isNotFound(err):
				fmt.Fprintf(env.Stderr, "Error creating intention %q: %s\n", ixn.String(), err)
				return 1
			}
		}
		body := *ixn
		body.SourceName, body.DestinationName = "", ""
		if _, err := c.put(ctx, "/v1/connect/intentions/exact", withDCQuery(q, c), &body); err != nil {
			fmt.Fprintf(env.Stderr, "Error creating intention %q: %s\n", ixn.String(), err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Created: %s\n", ixn.String())
	}
	return 0
}

// withDCQuery adds -datacenter to a write's query, as the official client
// does.
func withDCQuery(q url.Values, c *apiClient) url.Values {
	if c.dc != "" {
		q.Set("dc", c.dc)
	}
	return q
}

func intentionFromFile(path string, env *Env) (*intentionJSON, error) {
	data, err := loadDataSource(path, env.Stdin)
	if err != nil {
		return nil, err
	}
	var ixn intentionJSON
	if err := json.Unmarshal(data, &ixn); err != nil {
		return nil, err
	}
	if len(ixn.Permissions) > 0 && string(ixn.Permissions) != "null" {
		return nil, fmt.Errorf("cannot create L7 intention from file %q using this CLI; use 'trellis config write' instead", path)
	}
	if ixn.SourceType == "" {
		ixn.SourceType = "consul"
	}
	ixn.Permissions = nil
	return &ixn, nil
}

const intentionCheckHelp = `
Usage: trellis intention check [options] SRC DST

  Check whether a connection between SRC and DST would be allowed by
  Connect given the current configuration. Exits 0 when allowed, 1 when
  denied and 2 on errors.

      $ trellis intention check web db`

func runIntentionCheck(args []string, env *Env) int {
	var (
		hf         httpFlags
		sourceType string
	)
	fs := newFlagSet("intention check", intentionCheckHelp, env.Stderr)
	fs.StringVar(&sourceType, "source-type", "consul", "The source type. Only \"consul\" is supported.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		if code != 0 {
			return 2
		}
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(env.Stderr, "Error: command requires exactly two arguments: src and dst")
		return 2
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return 2
	}
	q := exactQuery(fs.Arg(0), fs.Arg(1))
	q.Set("source-type", sourceType)
	var out struct{ Allowed bool }
	if err := c.getJSON(context.Background(), "/v1/connect/intentions/check", q, true, &out); err != nil {
		fmt.Fprintf(env.Stderr, "Error checking the connection: %s\n", err)
		return 2
	}
	if out.Allowed {
		fmt.Fprintln(env.Stdout, "Allowed")
		return 0
	}
	fmt.Fprintln(env.Stdout, "Denied")
	return 1
}

const intentionDeleteHelp = `
Usage: trellis intention delete [options] SRC DST
       trellis intention delete [options] ID

  Delete the intention from SRC to DST, or the one with the given ID (an
  intention created through the deprecated ID-based API). This cannot be
  reversed.

      $ trellis intention delete web db`

func runIntentionDelete(args []string, env *Env) int {
	c, ref, code, ok := parseIntentionRef("intention delete", intentionDeleteHelp, args, env)
	if !ok {
		return code
	}
	req := request{method: http.MethodDelete, path: ref.path, query: withDCQuery(ref.query, c)}
	if _, _, err := c.do(context.Background(), req); err != nil {
		fmt.Fprintf(env.Stderr, "Error deleting the intention: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "Intention deleted.")
	return 0
}

// intentionRef is the intention a get or delete names: by ID (one
// argument) or by source and destination (two).
type intentionRef struct {
	path  string
	query url.Values
	// missing is Consul's message when there is no such intention.
	missing string
}

// parseIntentionRef parses the flags and arguments of a command that takes
// SRC DST or ID and connects to the agent; when !ok, the command exits
// with code.
func parseIntentionRef(name, help string, args []string, env *Env) (c *apiClient, ref intentionRef, code int, ok bool) {
	var hf httpFlags
	fs := newFlagSet(name, help, env.Stderr)
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return nil, ref, code, false
	}
	switch fs.NArg() {
	case 1:
		ref = intentionRef{path: "/v1/connect/intentions/" + fs.Arg(0), query: url.Values{},
			missing: fmt.Sprintf("Intention not found with ID %q", fs.Arg(0))}
	case 2:
		ref = intentionRef{path: "/v1/connect/intentions/exact", query: exactQuery(fs.Arg(0), fs.Arg(1)),
			missing: fmt.Sprintf("Intention not found with source %q and destination %q", fs.Arg(0), fs.Arg(1))}
	default:
		fmt.Fprintln(env.Stderr, "command requires exactly 1 or 2 arguments")
		return nil, ref, 1, false
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return nil, ref, 1, false
	}
	return c, ref, 0, true
}

const intentionListHelp = `
Usage: trellis intention list

  List all intentions, in evaluation order.`

func runIntentionList(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("intention list", intentionListHelp, env.Stderr)
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	var ixns []struct {
		ID, SourceName, Action, DestinationName string
		Precedence                              int
		Permissions                             []json.RawMessage
	}
	if err := c.getJSON(context.Background(), "/v1/connect/intentions", nil, true, &ixns); err != nil {
		fmt.Fprintf(env.Stderr, "Failed to retrieve the intentions list: %s\n", err)
		return 1
	}
	if len(ixns) == 0 {
		fmt.Fprintln(env.Stderr, "There are no intentions.")
		return 2
	}
	rows := []string{strings.Join([]string{"ID", "Source", "Action", "Destination", "Precedence"}, columnSep)}
	for _, x := range ixns {
		action := x.Action
		if action == "" && len(x.Permissions) > 0 {
			action = fmt.Sprintf("%d permissions", len(x.Permissions))
		}
		rows = append(rows, strings.Join([]string{x.ID, x.SourceName, action, x.DestinationName, fmt.Sprint(x.Precedence)}, columnSep))
	}
	fmt.Fprintln(env.Stdout, columnize(rows))
	return 0
}
