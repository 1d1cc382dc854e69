package cli

import "testing"

func TestInfo(t *testing.T) {
	self := `{"Config":{},"Stats":{"raft":{"state":"Leader","term":"2"},"agent":{"services":"1","checks":"0"},"runtime":{"goroutines":12}}}`
	runCases(t, []cliCase{
		{name: "sections and keys sorted", args: []string{"info"},
			routes: map[string]reply{"GET /v1/agent/self": {body: self}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/self"}},
			stdout: "agent:\n\tchecks = 0\n\tservices = 1\nraft:\n\tstate = Leader\n\tterm = 2\nruntime:\n\tgoroutines = 12\n"},
		{name: "agent error", args: []string{"info"},
			routes: map[string]reply{"GET /v1/agent/self": {status: 403, body: "Permission denied"}},
			want:   []sentRequest{{Method: "GET", Path: "/v1/agent/self"}}, code: 1,
			stderrHas: []string{"Error querying agent: Unexpected response code: 403 (Permission denied)"}},
	})
}
