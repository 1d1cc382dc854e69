package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
)

const eventHelp = `
Usage: trellis event [options] [payload]

  Dispatches a custom user event across the datacenter. An event must have
  a name, and may carry a payload (at most one argument). -node, -service
  and -tag are regular expressions the receiving agents match against
  their own node and local services.`

// eventAnswer is the part of /v1/event/fire's answer the command prints.
type eventAnswer struct {
	ID string
}

func runEvent(args []string, env *Env) int {
	var hf httpFlags
	var name, node, service, tag string
	fs := newFlagSet("event", eventHelp, env.Stderr)
	fs.StringVar(&name, "name", "", "Name of the event.")
	fs.StringVar(&node, "node", "", "Regular expression to filter on node names.")
	fs.StringVar(&service, "service", "", "Regular expression to filter on service instances.")
	fs.StringVar(&tag, "tag", "", "Regular expression to filter on service tags. Must be used with -service.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	// The checks Consul's command makes before it sends anything.
	switch {
	case name == "":
		fmt.Fprintln(env.Stderr, "Event name must be specified")
		return 1
	case tag != "" && service == "":
		fmt.Fprintln(env.Stderr, "Cannot provide tag filter without service filter.")
		return 1
	case fs.NArg() > 1:
		fmt.Fprintln(env.Stderr, "Too many command line arguments.")
		return 1
	}
	for _, f := range []struct{ what, expr string }{{"node", node}, {"service", service}, {"tag", tag}} {
		if _, err := regexp.Compile(f.expr); err != nil {
			fmt.Fprintf(env.Stderr, "Failed to compile %s filter regexp: %v\n", f.what, err)
			return 1
		}
	}
	var payload []byte
	if fs.NArg() == 1 {
		payload = []byte(fs.Arg(0))
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	q := url.Values{}
	for k, v := range map[string]string{"node": node, "service": service, "tag": tag} {
		if v != "" {
			q.Set(k, v)
		}
	}
	r := request{method: http.MethodPut, path: "/v1/event/fire/" + name, query: q, withDC: true, contentType: "application/octet-stream"}
	if payload != nil {
		r.body = bytes.NewReader(payload)
	}
	body, _, err := c.do(context.Background(), r)
	var out eventAnswer
	if err == nil {
		err = json.Unmarshal(body, &out)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error firing event: %s\n", err)
		return 1
	}
	fmt.Fprintf(env.Stdout, "Event ID: %s\n", out.ID)
	return 0
}
