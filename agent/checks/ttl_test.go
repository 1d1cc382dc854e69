package checks

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func TestTTLCheck(t *testing.T) {
	const ttl = 100 * time.Millisecond
	tests := []struct {
		name   string
		maxOut int // 0: the default
		run    func(t *testing.T, c *TTLCheck, rec *recorder)
	}{
		{"expires without any update", 0, func(t *testing.T, c *TTLCheck, rec *recorder) {
			u := rec.waitStatus(t, "ttl", structs.HealthCritical)
			if u.output != "TTL expired" {
				t.Fatalf("output %q", u.output)
			}
			// The timer is not re-armed until the next update.
			time.Sleep(3 * ttl)
			if n := len(rec.all("ttl")); n != 1 {
				t.Fatalf("%d updates after one expiry, want 1", n)
			}
		}},
		{"status then expiry keeps the last output", 0, func(t *testing.T, c *TTLCheck, rec *recorder) {
			if _, err := c.SetStatus(structs.HealthPassing, "all good"); err != nil {
				t.Fatal(err)
			}
			if u := rec.all("ttl"); len(u) != 1 || u[0].status != structs.HealthPassing || u[0].output != "all good" {
				t.Fatalf("updates %+v", u)
			}
			u := rec.waitStatus(t, "ttl", structs.HealthCritical)
			if want := "TTL expired (last output before timeout follows): all good"; u.output != want {
				t.Fatalf("output %q, want %q", u.output, want)
			}
			// An update after expiry re-arms the TTL.
			if _, err := c.SetStatus(structs.HealthWarning, "again"); err != nil {
				t.Fatal(err)
			}
			rec.waitStatus(t, "ttl", structs.HealthWarning)
			u = rec.waitStatus(t, "ttl", structs.HealthCritical)
			if want := "TTL expired (last output before timeout follows): again"; u.output != want {
				t.Fatalf("output %q, want %q", u.output, want)
			}
		}},
		{"updates within the TTL keep it alive", 0, func(t *testing.T, c *TTLCheck, rec *recorder) {
			for range 15 { // 15 x 20ms = 3 TTLs
				if _, err := c.SetStatus(structs.HealthPassing, "ok"); err != nil {
					t.Fatal(err)
				}
				time.Sleep(ttl / 5)
			}
			for _, u := range rec.all("ttl") {
				if u.status != structs.HealthPassing {
					t.Fatalf("TTL lapsed despite updates: %+v", u)
				}
			}
		}},
		{"output is truncated as Consul", 5, func(t *testing.T, c *TTLCheck, rec *recorder) {
			out, err := c.SetStatus(structs.HealthPassing, "0123456789")
			if err != nil {
				t.Fatal(err)
			}
			want := "01234 ... (captured 5 of 10 bytes)"
			if out != want || rec.all("ttl")[0].output != want {
				t.Fatalf("returned %q, stored %q, want %q", out, rec.all("ttl")[0].output, want)
			}
		}},
		{"nothing after Stop", 0, func(t *testing.T, c *TTLCheck, rec *recorder) {
			c.Stop()
			if _, err := c.SetStatus(structs.HealthPassing, "late"); !errors.Is(err, ErrStopped) {
				t.Fatalf("SetStatus after Stop: %v, want ErrStopped", err)
			}
			time.Sleep(2 * ttl)
			if u := rec.all("ttl"); len(u) != 0 {
				t.Fatalf("updates after Stop: %+v", u)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			c := NewTTLCheck(TTLCheckConfig{CheckID: "ttl", TTL: ttl, OutputMaxSize: tc.maxOut, Notifier: rec})
			c.Start()
			defer c.Stop()
			tc.run(t, c, rec)
		})
	}
}

// TestTTLChecksHoldNoGoroutine: a waiting TTL is a runtime timer, so an
// agent with a TTL check per sidecar keeps no goroutine per check; expiry
// and Stop still work.
func TestTTLChecksHoldNoGoroutine(t *testing.T) {
	const n = 500
	rec := newRecorder()
	before := runtime.NumGoroutine()
	checks := make([]*TTLCheck, n)
	for i := range checks {
		checks[i] = NewTTLCheck(TTLCheckConfig{CheckID: fmt.Sprintf("ttl-%d", i), TTL: time.Hour, Notifier: rec})
		checks[i].Start()
	}
	if grown := runtime.NumGoroutine() - before; grown > n/10 {
		t.Errorf("%d TTL checks started %d goroutines", n, grown)
	}
	short := NewTTLCheck(TTLCheckConfig{CheckID: "short", TTL: 20 * time.Millisecond, Notifier: rec})
	short.Start()
	rec.waitStatus(t, "short", structs.HealthCritical)
	short.Stop()
	for _, c := range checks {
		c.Stop()
	}
}
