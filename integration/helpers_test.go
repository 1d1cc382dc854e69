package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// These tests cover the scenario helpers themselves; they need no trellis
// binary and run with -short.

func TestKVPathAndQuery(t *testing.T) {
	tests := []struct {
		key  string
		q    url.Values
		want string
	}{
		{"a/b", nil, "/v1/kv/a/b"},
		{"a/", url.Values{"recurse": {""}}, "/v1/kv/a/?recurse"},
		{"sp ace/x?y", url.Values{"raw": {""}, "stale": {""}}, "/v1/kv/sp%20ace/x%3Fy?raw&stale"},
		{"k", url.Values{"cas": {"5"}}, "/v1/kv/k?cas=5"},
	}
	for _, tt := range tests {
		if got := kvPath(tt.key, tt.q); got != tt.want {
			t.Errorf("kvPath(%q, %v) = %q, want %q", tt.key, tt.q, got, tt.want)
		}
	}
	if got := query(modeStale, url.Values{"index": {"7"}}); got != "?index=7&stale" {
		t.Errorf("query = %q", got)
	}
	if got := query(modeDefault, nil); got != "" {
		t.Errorf("query(default) = %q, want empty", got)
	}
}

func TestReadHeadersError(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1]) //nolint:gosec // callers pass pairs; an odd count is a bug in the test and panics
		}
		return out
	}
	tests := []struct {
		name    string
		header  http.Header
		wantErr string
	}{
		{"ok", h("X-Consul-Index", "5", "X-Consul-LastContact", "0", "X-Consul-KnownLeader", "true"), ""},
		{"no index", h("X-Consul-LastContact", "0", "X-Consul-KnownLeader", "true"), "no X-Consul-Index"},
		{"zero index", h("X-Consul-Index", "0", "X-Consul-LastContact", "0", "X-Consul-KnownLeader", "true"), "is 0"},
		{"no last contact", h("X-Consul-Index", "5", "X-Consul-KnownLeader", "true"), "LastContact"},
		{"no leader", h("X-Consul-Index", "5", "X-Consul-LastContact", "3", "X-Consul-KnownLeader", "false"), "KnownLeader"},
	}
	for _, tt := range tests {
		err := response{Header: tt.header}.readHeadersError()
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestWriteJobsCoverEveryWrite(t *testing.T) {
	d := newReplicationData()
	if len(d.kv) != replKVWrites || len(d.services) != replServices {
		t.Fatalf("data has %d keys and %d services", len(d.kv), len(d.services))
	}
	if got := len(d.writeJobs(nil)); got != replKVWrites+replServices {
		t.Fatalf("%d jobs, want %d", got, replKVWrites+replServices)
	}
}

func TestRunParallelAndMissingAcked(t *testing.T) {
	var ran atomic.Int64
	err := runParallel(t.Context(), 50, 4, func(_ context.Context, i int) error {
		ran.Add(1)
		if i%10 == 3 {
			return fmt.Errorf("job %d", i)
		}
		return nil
	})
	if ran.Load() != 50 || err == nil || strings.Count(err.Error(), "job ") != 5 {
		t.Fatalf("ran %d, err %v", ran.Load(), err)
	}
	var c errorCollector
	for i := range maxReportedErrors + 3 {
		c.add(fmt.Errorf("e%d", i))
	}
	if err := c.err(); !strings.Contains(err.Error(), "and 3 more") {
		t.Fatalf("collector: %v", err)
	}

	acked := map[string]string{"a": "1", "b": "2"}
	if err := missingAcked(map[string]string{"a": "1", "b": "2", "extra": "x"}, acked); err != nil {
		t.Errorf("unacknowledged extras must be allowed: %v", err)
	}
	err = missingAcked(map[string]string{"a": "9"}, acked)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 acknowledged keys missing") || !strings.Contains(err.Error(), `"9"`) {
		t.Errorf("missingAcked = %v", err)
	}
	if !errors.Is(fmt.Errorf("x: %w", errProtocol), errProtocol) {
		t.Fatal("errProtocol does not wrap")
	}
}
