package httpapi

import (
	"bytes"
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
