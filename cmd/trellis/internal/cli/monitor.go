package cli

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

const monitorHelp = `
Usage: trellis monitor [options]

  Shows recent log messages of the agent and streams them until
  interrupted. -log-level picks the lowest level shown (trace, debug,
  info, warn, err); -log-json prints them as JSON lines.`

func runMonitor(args []string, env *Env) int {
	var hf httpFlags
	var level string
	var logJSON bool
	fs := newFlagSet("monitor", monitorHelp, env.Stderr)
	fs.StringVar(&level, "log-level", "INFO", "Log level of the agent.")
	fs.BoolVar(&logJSON, "log-json", false, "Output logs in JSON format.")
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	ctx, release := interruptContext(env)
	defer release()
	q := url.Values{"loglevel": {strings.ToLower(level)}}
	if logJSON {
		q.Set("logjson", "")
	}
	resp, err := c.open(ctx, request{method: http.MethodGet, path: "/v1/agent/monitor", query: q})
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error starting monitor: %s\n", err)
		return 1
	}
	defer func() { _ = resp.Body.Close() }()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fmt.Fprintln(env.Stdout, sc.Text())
	}
	if ctx.Err() != nil {
		return 0
	}
	fmt.Fprintln(env.Stderr, "Remote side ended the monitor! This usually means that the\nremote side has exited or crashed.")
	return 1
}
