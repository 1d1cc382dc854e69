package httpapi

import (
	"bytes"
	"context"
	"testing"
)

// TestDebugPprof: the profiles are served only with enable_debug, as
// Consul's, and the official client's Debug calls read them.
func TestDebugPprof(t *testing.T) {
	t.Run("enabled", func(t *testing.T) {
		s, _, _ := newTestServer(t, func(_ *fakeRPC, c *Config) { c.EnableDebug = true })
		c, _ := officialClient(t, s)
		d := c.Debug()
		reads := map[string]func() ([]byte, error){
			"heap":      d.Heap,
			"goroutine": d.Goroutine,
			"profile":   func() ([]byte, error) { return d.Profile(1) },
			"trace":     func() ([]byte, error) { return d.Trace(1) },
		}
		for name, read := range reads {
			b, err := read()
			if err != nil || len(b) == 0 {
				t.Errorf("%s: %d bytes, %v", name, len(b), err)
			}
		}
		// The profile is gzipped protobuf: it starts with gzip's magic.
		if b, err := d.Heap(); err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("heap is not a gzipped profile: %v", err)
		}
	})
	t.Run("disabled", func(t *testing.T) {
		runCases(t, []apiCase{
			{name: "index", path: "/debug/pprof/", wantCode: 404},
			{name: "heap", path: "/debug/pprof/heap", wantCode: 404},
			{name: "profile", path: "/debug/pprof/profile?seconds=1", wantCode: 404},
		})
	})
}

// hostFake is a HostInfo that answers a fixed document.
type hostFake map[string]any

func (h hostFake) HostInfo(context.Context) any { return map[string]any(h) }

// TestAgentHost: /v1/agent/host serves what the agent's HostInfo reports,
// through the official client, and 501 without one.
func TestAgentHost(t *testing.T) {
	s, _, _ := newTestServer(t, func(_ *fakeRPC, c *Config) {
		c.Host = hostFake{"CollectionTime": 7, "Errors": []string{}}
	})
	c, _ := officialClient(t, s)
	got, err := c.Agent().Host()
	if err != nil || got["CollectionTime"] != float64(7) {
		t.Fatalf("host %v %v", got, err)
	}
	runCases(t, []apiCase{{name: "not served", path: "/v1/agent/host", wantCode: 501, wantBody: "not served by this agent"}})
}
