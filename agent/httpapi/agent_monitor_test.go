package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeMonitor hands out one channel the test feeds.
type fakeMonitor struct {
	lines chan []byte
	mu    sync.Mutex
	// level, json and cancelled record the subscription; guarded by mu.
	level     string
	json      bool
	cancelled bool
}

func (f *fakeMonitor) Subscribe(level string, json bool) (<-chan []byte, func(), error) {
	if level != "info" && level != "debug" {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownLogLevel, level)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.level, f.json = level, json
	return f.lines, func() { f.mu.Lock(); f.cancelled = true; f.mu.Unlock() }, nil
}

func TestAgentMonitor(t *testing.T) {
	runCases(t, []apiCase{
		{name: "not served", path: "/v1/agent/monitor", wantCode: 501, wantBody: "not served by this agent"},
		{name: "unknown level", path: "/v1/agent/monitor?loglevel=bogus",
			setup:    func(_ *fakeRPC, c *Config) { c.Monitor = &fakeMonitor{} },
			wantCode: 400, wantBody: "Unknown log level: bogus"},
		{name: "PUT is 405", method: "PUT", path: "/v1/agent/monitor",
			setup:    func(_ *fakeRPC, c *Config) { c.Monitor = &fakeMonitor{} },
			wantCode: 405, wantBody: "method PUT not allowed"},
	})
}

func TestAgentMonitorStreams(t *testing.T) {
	tests := []struct {
		name      string
		query     string
		level     string
		json      bool
		endByStop bool // the agent stops (channel closed) rather than the client leaving
	}{
		{name: "default level, agent stops", query: "", level: "info", endByStop: true},
		{name: "debug json, client leaves", query: "?loglevel=debug&logjson", level: "debug", json: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &fakeMonitor{lines: make(chan []byte, 4)}
			s, _, _ := newTestServer(t, func(_ *fakeRPC, c *Config) { c.Monitor = m })
			srv := httptest.NewServer(s)
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/agent/monitor"+tt.query, nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			r := bufio.NewReader(resp.Body)
			for _, want := range []string{"first line\n", "second line\n"} {
				m.lines <- []byte(want)
				got, err := r.ReadString('\n')
				if err != nil || got != want {
					t.Fatalf("read %q (%v), want %q", got, err, want)
				}
			}
			if tt.endByStop {
				close(m.lines)
				if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
					t.Fatalf("after the stream ended: %q %v", rest, err)
				}
			} else {
				cancel()
			}
			srv.Close() // waits for the handler to return
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.level != tt.level || m.json != tt.json || !m.cancelled {
				t.Fatalf("subscription level %q json %v cancelled %v", m.level, m.json, m.cancelled)
			}
		})
	}
}
