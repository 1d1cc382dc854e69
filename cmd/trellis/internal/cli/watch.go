package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

const watchHelp = `
Usage: trellis watch -type <type> [options] [handler ...]

  Watches for changes in a view of the data: -type key (-key), keyprefix
  (-prefix), services, nodes, service (-service, -tag, -passingonly),
  checks (-service or -state), event (-name), connect_roots or connect_leaf
  (-service). With a handler, each change
  runs it with the view as JSON on its standard input (Consul's watch
  format) and CONSUL_INDEX in its environment, until interrupted: through
  the shell ($SHELL, or /bin/sh) with -shell (the default), or as the
  command and arguments given with -shell=false. Without one, the current
  view is printed as JSON and the command exits.`

// watchRetry is how long the watch waits after a failed read.
const watchRetry = 5 * time.Second

// watchEvent is one user event as Consul's watch hands it on: the event
// list's JSON, the payload base64-encoded.
type watchEvent struct {
	ID            string
	Name          string
	Payload       []byte
	NodeFilter    string
	ServiceFilter string
	TagFilter     string
	Version       int
	LTime         uint64
}

// watcher yields the view after each change: its JSON and its index.
type watcher interface {
	next(ctx context.Context) ([]byte, uint64, error)
}

// watchParams are the flags that select a view.
type watchParams struct {
	typ, name, key, prefix, service, state string
	tags                                   stringList
	passingOnly                            bool
	shell                                  bool
}

func runWatch(args []string, env *Env) int {
	var hf httpFlags
	var p watchParams
	fs := newFlagSet("watch", watchHelp, env.Stderr)
	fs.StringVar(&p.typ, "type", "", "Specifies the watch type: key, keyprefix, services, nodes, service, checks, event, connect_roots or connect_leaf.")
	fs.StringVar(&p.name, "name", "", "Specifies an event name to watch (-type event).")
	fs.StringVar(&p.key, "key", "", "Specifies the key to watch (-type key).")
	fs.StringVar(&p.prefix, "prefix", "", "Specifies the key prefix to watch (-type keyprefix).")
	fs.StringVar(&p.service, "service", "", "Specifies the service to watch (-type service and connect_leaf, optionally -type checks).")
	fs.Var(&p.tags, "tag", "Specifies a service tag to filter on (-type service); may be given more than once.")
	fs.StringVar(&p.state, "state", "", "Specifies the check state to filter on (-type checks).")
	fs.BoolVar(&p.passingOnly, "passingonly", false, "Specifies if only hosts passing all checks are displayed (-type service).")
	fs.BoolVar(&p.shell, "shell", true, "Use a shell to run the handler ($SHELL, or /bin/sh); with -shell=false the arguments are run as they are.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	w, err := newWatcher(c, p)
	if err != nil {
		fmt.Fprintln(env.Stderr, err)
		return 1
	}
	ctx, release := interruptContext(env)
	defer release()
	handler := handlerArgv(fs.Args(), p.shell, env)
	for {
		view, index, err := w.next(ctx)
		if ctx.Err() != nil {
			return 0
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error querying Consul agent: %s\n", err)
			if handler == nil {
				return 1
			}
			select {
			case <-ctx.Done():
				return 0
			case <-time.After(watchRetry):
			}
			continue
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, view, "", "    "); err != nil {
			fmt.Fprintf(env.Stderr, "Error decoding the watch result: %s\n", err)
			return 1
		}
		if handler == nil {
			fmt.Fprintln(env.Stdout, buf.String())
			return 0
		}
		if err := runHandler(ctx, handler, buf.Bytes(), index, env); err != nil {
			fmt.Fprintf(env.Stderr, "Error executing handler: %s\n", err)
		}
	}
}

// newWatcher checks the flags of the -type as Consul's watch plans do and
// returns its watcher.
func newWatcher(c *apiClient, p watchParams) (watcher, error) {
	q := url.Values{}
	switch p.typ {
	case "":
		return nil, errors.New("Watch type must be specified")
	case "event":
		return &eventWatch{c: c, name: p.name}, nil
	case "key":
		if p.key == "" {
			return nil, errors.New("Failed to parse watch: Must specify a single key to watch")
		}
		return &queryWatch{c: c, path: kvPath(strings.TrimPrefix(p.key, "/")), single: true}, nil
	case "keyprefix":
		if p.prefix == "" {
			return nil, errors.New("Failed to parse watch: Must specify a single prefix to watch")
		}
		q.Set("recurse", "")
		return &queryWatch{c: c, path: kvPath(strings.TrimPrefix(p.prefix, "/")), query: q}, nil
	case "services":
		return &queryWatch{c: c, path: "/v1/catalog/services"}, nil
	case "nodes":
		return &queryWatch{c: c, path: "/v1/catalog/nodes"}, nil
	case "service":
		if p.service == "" {
			return nil, errors.New("Failed to parse watch: Must specify a single service to watch")
		}
		if len(p.tags) > 0 {
			q["tag"] = p.tags
		}
		if p.passingOnly {
			q.Set("passing", "1")
		}
		return &queryWatch{c: c, path: "/v1/health/service/" + p.service, query: q}, nil
	case "checks":
		switch {
		case p.service != "" && p.state != "":
			return nil, errors.New("Failed to parse watch: Cannot specify service and state")
		case p.service != "":
			return &queryWatch{c: c, path: "/v1/health/checks/" + p.service}, nil
		case p.state == "":
			p.state = "any"
		}
		return &queryWatch{c: c, path: "/v1/health/state/" + p.state}, nil
	case "connect_roots":
		return &queryWatch{c: c, path: "/v1/agent/connect/ca/roots"}, nil
	case "connect_leaf":
		if p.service == "" {
			return nil, errors.New("Failed to parse watch: Must specify a single service to watch")
		}
		return &queryWatch{c: c, path: "/v1/agent/connect/ca/leaf/" + p.service}, nil
	}
	return nil, fmt.Errorf("Failed to parse watch: Unsupported watch type: %s", p.typ)
}

// queryWatch follows one read endpoint with blocking queries as Consul's
// watch plans do: a view is handed on when the index moves and the answer
// differs from the last one handed on; an index that goes backwards (a
// restored snapshot, another leader) starts over from zero.
type queryWatch struct {
	c     *apiClient
	path  string
	query url.Values
	// single hands on the first element of the answer (a key's pair), or
	// null when there is none, as Consul's key watch does.
	single bool
	index  uint64
	last   []byte
}

func (w *queryWatch) next(ctx context.Context) ([]byte, uint64, error) {
	for {
		q := url.Values{}
		for k, v := range w.query {
			q[k] = v
		}
		if w.index != 0 {
			q.Set("index", strconv.FormatUint(w.index, 10))
		}
		body, h, err := w.c.do(ctx, request{method: http.MethodGet, path: w.path, query: q, withDC: true})
		switch {
		case isNotFound(err) && strings.HasPrefix(w.path, "/v1/kv/"):
			// A missing key or prefix is an empty answer, not an error.
			body = []byte("null")
		case err != nil:
			return nil, 0, err
		}
		index, perr := strconv.ParseUint(h.Get("X-Consul-Index"), 10, 64)
		if perr != nil {
			return nil, 0, fmt.Errorf("the answer of %s has no X-Consul-Index", w.path)
		}
		view, err := w.view(body)
		if err != nil {
			return nil, 0, err
		}
		prev := w.index
		switch {
		case index < prev:
			w.index = 0
			continue
		case index == prev:
			continue // the wait elapsed with nothing new
		}
		w.index = index
		if prev != 0 && bytes.Equal(view, w.last) {
			continue
		}
		w.last = view
		return view, index, nil
	}
}

func (w *queryWatch) view(body []byte) ([]byte, error) {
	if !w.single {
		return body, nil
	}
	var pairs []json.RawMessage
	if err := json.Unmarshal(body, &pairs); err != nil {
		return nil, fmt.Errorf("decoding the answer of %s: %w", w.path, err)
	}
	if len(pairs) == 0 {
		return []byte("null"), nil
	}
	return pairs[0], nil
}

// eventWatch follows /v1/event/list as Consul's event watch does: the
// first read answers every event kept, each later one blocks on the
// index and answers only the events after the last one handed on.
type eventWatch struct {
	c     *apiClient
	name  string
	index uint64
}

func (w *eventWatch) next(ctx context.Context) ([]byte, uint64, error) {
	events, index, err := w.events(ctx)
	if err != nil {
		return nil, 0, err
	}
	buf, err := json.Marshal(events)
	return buf, index, err
}

func (w *eventWatch) events(ctx context.Context) ([]watchEvent, uint64, error) {
	for {
		q := url.Values{}
		if w.name != "" {
			q.Set("name", w.name)
		}
		if w.index != 0 {
			q.Set("index", strconv.FormatUint(w.index, 10))
		}
		body, h, err := w.c.do(ctx, request{method: http.MethodGet, path: "/v1/event/list", query: q, withDC: true})
		if err != nil {
			return nil, 0, err
		}
		var events []watchEvent
		if err := json.Unmarshal(body, &events); err != nil {
			return nil, 0, fmt.Errorf("decoding the event list: %w", err)
		}
		index, err := strconv.ParseUint(h.Get("X-Consul-Index"), 10, 64)
		if err != nil {
			return nil, 0, errors.New("the event list has no X-Consul-Index")
		}
		first := w.index == 0
		last := w.index
		w.index = index
		if first {
			return events, index, nil
		}
		if index == last {
			continue // the wait elapsed with nothing new
		}
		// Only what follows the last event handed on; all of them when
		// it fell out of the agent's ring.
		for i, ev := range events {
			if structs.UserEventIndex(ev.ID) == last {
				events = events[i+1:]
				break
			}
		}
		return events, index, nil
	}
}

// handlerArgv is the command line of the handler args name: nil for none;
// with shell, the words joined and run by the user's shell, as Consul's
// watch runs them.
func handlerArgv(args []string, shell bool, env *Env) []string {
	switch {
	case len(args) == 0:
		return nil
	case !shell:
		return args
	}
	sh := "/bin/sh"
	if env.Getenv != nil {
		if v := env.Getenv("SHELL"); v != "" {
			sh = v
		}
	}
	return []string{sh, "-c", strings.Join(args, " ")}
}

// runHandler runs the handler with the watch's JSON on its standard input.
func runHandler(ctx context.Context, handler []string, input []byte, index uint64, env *Env) error {
	cmd := exec.CommandContext(ctx, handler[0], handler[1:]...) //nolint:gosec // the handler is the command the user asked watch to run
	cmd.Env = append(os.Environ(), "CONSUL_INDEX="+strconv.FormatUint(index, 10))
	cmd.Stdin = bytes.NewReader(input)
	cmd.Stdout = env.Stdout
	cmd.Stderr = env.Stderr
	return cmd.Run()
}
