package cli

import "testing"

func TestMonitor(t *testing.T) {
	stream := map[string]reply{"GET /v1/agent/monitor": {body: "2026-12-01T14:00:00Z [INFO] one\n{\"msg\":\"two\"}\n"}}
	ended := "Remote side ended the monitor! This usually means that the\nremote side has exited or crashed."
	runCases(t, []cliCase{
		{name: "streams lines until the agent ends it", args: []string{"monitor"}, routes: stream,
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/monitor", Query: "loglevel=info"}},
			stdout: "2026-12-01T14:00:00Z [INFO] one\n{\"msg\":\"two\"}\n", code: 1, stderrHas: []string{ended}},
		{name: "level and json", args: []string{"monitor", "-log-level", "DEBUG", "-log-json"}, routes: stream,
			want: []sentRequest{{Method: "GET", Path: "/v1/agent/monitor", Query: "logjson=&loglevel=debug"}},
			code: 1, skipStdout: true},
		{name: "agent refuses", args: []string{"monitor", "-log-level", "loud"},
			routes: map[string]reply{"GET /v1/agent/monitor": {status: 400, body: "Unknown log level: loud"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/monitor", Query: "loglevel=loud"}}, code: 1,
			stderrHas: []string{"Error starting monitor: Unexpected response code: 400 (Unknown log level: loud)"}},
	})
}
