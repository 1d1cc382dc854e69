package watches

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"

	"github.com/hashicorp/consul/api/watch"
)

// maxOutput bounds how much of a handler's output, or of an HTTP
// handler's error answer, is logged.
const maxOutput = 4 << 10

// newHandler builds the plan's handler from its exempt parameters:
// handler (a shell command, deprecated) or args (argv) for a script
// handler, http_handler_config for an HTTP one.
//
// A handler still running when ctx ends is killed (script) or cancelled
// (HTTP), so that stopping the watches never waits on a stuck handler.
func newHandler(ctx context.Context, p *watch.Plan, logger *slog.Logger) (watch.HybridHandlerFunc, error) {
	run, err := newRunFunc(p, logger)
	if err != nil {
		return nil, err
	}
	logger = logger.With("watch_type", p.Type)
	return func(v watch.BlockingParamVal, result any) {
		input, err := json.Marshal(result)
		if err != nil {
			logger.Error("failed to encode data for watch handler", "error", err)
			return
		}
		// Hash-based views (agent_service) have no index; Consul's agent
		// hands them 0.
		var index uint64
		if idx, ok := v.(watch.WaitIndexVal); ok {
			index = uint64(idx)
		}
		if err := run(ctx, index, input); err != nil {
			logger.Error("watch handler failed", "error", err)
		}
	}, nil
}

// runFunc hands one view, as JSON, to the handler.
type runFunc func(ctx context.Context, index uint64, input []byte) error

func newRunFunc(p *watch.Plan, logger *slog.Logger) (runFunc, error) {
	if p.HandlerType == handlerHTTP {
		conf, ok := p.Exempt["http_handler_config"].(*watch.HttpHandlerConfig)
		if !ok {
			return nil, errors.New("Handler type 'http' requires 'http_handler_config' to be set")
		}
		for _, k := range []string{"handler", "args"} {
			if _, ok := p.Exempt[k]; ok {
				return nil, fmt.Errorf("Handler type 'http' does not take %q", k)
			}
		}
		return httpHandler(conf, logger), nil
	}
	handler, hasHandler := p.Exempt["handler"]
	args, hasArgs := p.Exempt["args"]
	switch {
	case hasHandler && hasArgs:
		return nil, errors.New("Cannot define both watch handler and args")
	case hasHandler:
		cmd, ok := handler.(string)
		if !ok || cmd == "" {
			return nil, errors.New("Watch handler must be a string")
		}
		logger.Warn("the 'handler' field in watches is deprecated; use 'args'", "handler", cmd)
		return scriptHandler([]string{"/bin/sh", "-c", cmd}, logger), nil
	case hasArgs:
		argv, err := stringList(args)
		if err != nil {
			return nil, fmt.Errorf("Failed to parse 'args': %w", err)
		}
		return scriptHandler(argv, logger), nil
	}
	return nil, errors.New("Must define a watch handler")
}

// stringList reads args: a list of strings, as JSON and HCL decode it.
func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		if s, ok := v.([]string); ok {
			list = make([]any, len(s))
			for i := range s {
				list[i] = s[i]
			}
		} else {
			return nil, errors.New("must be a list of strings")
		}
	}
	if len(list) == 0 {
		return nil, errors.New("must not be empty")
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("element %d is not a string", i)
		}
		out[i] = s
	}
	return out, nil
}

// scriptHandler runs argv with the view on its standard input and
// CONSUL_INDEX in its environment, and logs what it printed.
func scriptHandler(argv []string, logger *slog.Logger) runFunc {
	return func(ctx context.Context, index uint64, input []byte) error {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // runs the handler the agent's config file names
		cmd.Env = append(os.Environ(), "CONSUL_INDEX="+strconv.FormatUint(index, 10))
		cmd.Stdin = bytes.NewReader(input)
		var out limitedBuffer
		cmd.Stdout = &out
		cmd.Stderr = &out
		err := cmd.Run()
		logger.Debug("watch handler output", "handler", argv, "output", out.String())
		if err != nil {
			return fmt.Errorf("running %q: %w", argv, err)
		}
		return nil
	}
}

// httpHandler sends the view to conf's endpoint with X-Consul-Index.
func httpHandler(conf *watch.HttpHandlerConfig, logger *slog.Logger) runFunc {
	client := &http.Client{Timeout: conf.Timeout}
	if conf.TLSSkipVerify {
		client.Transport = &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // tls_skip_verify asks for it
		}
	}
	return func(ctx context.Context, index uint64, input []byte) error {
		req, err := http.NewRequestWithContext(ctx, conf.Method, conf.Path, bytes.NewReader(input))
		if err != nil {
			return fmt.Errorf("building the request to %s: %w", conf.Path, err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, vs := range conf.Header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		req.Header.Set("X-Consul-Index", strconv.FormatUint(index, 10))
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("sending the view to %s: %w", conf.Path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxOutput))
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("%s answered %s: %s", conf.Path, resp.Status, body)
		}
		logger.Debug("watch handler output", "path", conf.Path, "status", resp.StatusCode, "output", string(body))
		return nil
	}
}

// limitedBuffer keeps the first maxOutput bytes written to it and drops
// the rest, so that a chatty handler cannot grow the agent's memory.
type limitedBuffer struct {
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *limitedBuffer) String() string { return b.buf.String() }
