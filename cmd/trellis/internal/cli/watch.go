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
Usage: trellis watch -type event [options] [handler ...]

  Watches for changes in a view of the data. Only -type event is supported:
  the user events this agent received, optionally of one -name. With a
  handler, each change runs it through "sh -c" with the new events as JSON
  on its standard input (Consul's watch format) and CONSUL_INDEX in its
  environment, until interrupted. Without one, the current events are
  printed as JSON and the command exits.`

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

func runWatch(args []string, env *Env) int {
	var hf httpFlags
	var typ, name string
	fs := newFlagSet("watch", watchHelp, env.Stderr)
	fs.StringVar(&typ, "type", "", "Specifies the watch type. Only \"event\" is supported.")
	fs.StringVar(&name, "name", "", "Specifies an event name to watch (-type event).")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch typ {
	case "":
		fmt.Fprintln(env.Stderr, "Watch type must be specified")
		return 1
	case "event":
	default:
		fmt.Fprintf(env.Stderr, "Unsupported watch type: %q (only \"event\" is supported)\n", typ)
		return 1
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error connecting to Consul agent: %s\n", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs, stop := env.Signals()
	defer stop()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	w := eventWatch{c: c, name: name}
	handler := strings.Join(fs.Args(), " ")
	for {
		events, index, err := w.next(ctx)
		if ctx.Err() != nil {
			return 0
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error querying Consul agent: %s\n", err)
			if handler == "" {
				return 1
			}
			select {
			case <-ctx.Done():
				return 0
			case <-time.After(watchRetry):
			}
			continue
		}
		buf, _ := json.MarshalIndent(events, "", "    ")
		if handler == "" {
			fmt.Fprintln(env.Stdout, string(buf))
			return 0
		}
		if err := runHandler(ctx, handler, buf, index, env); err != nil {
			fmt.Fprintf(env.Stderr, "Error executing handler: %s\n", err)
		}
	}
}

// eventWatch follows /v1/event/list as Consul's event watch does: the
// first read answers every event kept, each later one blocks on the
// index and answers only the events after the last one handed on.
type eventWatch struct {
	c     *apiClient
	name  string
	index uint64
}

func (w *eventWatch) next(ctx context.Context) ([]watchEvent, uint64, error) {
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

// runHandler runs the handler with the watch's JSON on its standard input.
func runHandler(ctx context.Context, handler string, input []byte, index uint64, env *Env) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", handler) //nolint:gosec // the handler is the command the user asked watch to run
	cmd.Env = append(os.Environ(), "CONSUL_INDEX="+strconv.FormatUint(index, 10))
	cmd.Stdin = bytes.NewReader(input)
	cmd.Stdout = env.Stdout
	cmd.Stderr = env.Stderr
	return cmd.Run()
}
