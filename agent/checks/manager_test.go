package checks

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/structs"
)

func TestManagerAddPicksRunner(t *testing.T) {
	full := Config{Notifier: newRecorder(), AliasSource: newLocalState(), RPC: newCatalogRPC(), MinInterval: testInterval}
	tests := []struct {
		name    string
		cfg     Config
		id      string
		def     *structs.CheckType
		want    string // runner type, "" when Add must fail
		wantErr error
	}{
		{"ttl", full, "c", &structs.CheckType{TTL: dur(time.Minute)}, "*checks.TTLCheck", nil},
		{"http", full, "c", &structs.CheckType{HTTP: "http://127.0.0.1:1/", Interval: dur(time.Minute)}, "*checks.HTTPCheck", nil},
		{"tcp", full, "c", &structs.CheckType{TCP: "127.0.0.1:1", Interval: dur(time.Minute)}, "*checks.TCPCheck", nil},
		{"grpc", full, "c", &structs.CheckType{GRPC: "127.0.0.1:1", Interval: dur(time.Minute)}, "*checks.GRPCCheck", nil},
		{"alias of a local service", full, "c", &structs.CheckType{AliasService: "web"}, "*checks.AliasCheck", nil},
		{"alias of a node", full, "c", &structs.CheckType{AliasNode: "n2", AliasService: "web"}, "*checks.AliasCheck", nil},
		{"nil definition", full, "c", nil, "", ErrInvalidCheck},
		{"missing ID", full, "", &structs.CheckType{TTL: dur(time.Minute)}, "", ErrInvalidCheck},
		{"http without interval", full, "c", &structs.CheckType{HTTP: "http://127.0.0.1:1/"}, "", ErrInvalidCheck},
		{"no type", full, "c", &structs.CheckType{Name: "nothing"}, "", ErrInvalidCheck},
		{"script", full, "c", &structs.CheckType{ScriptArgs: []string{"true"}, Interval: dur(time.Minute)}, "*checks.ScriptCheck", nil},
		{"docker", full, "c", &structs.CheckType{ScriptArgs: []string{"true"}, DockerContainerID: "f972c95ebf0e", Shell: "/bin/bash", Interval: dur(time.Minute)}, "*checks.ScriptCheck", nil},
		{"node alias without RPC", Config{Notifier: newRecorder(), AliasSource: newLocalState()}, "c",
			&structs.CheckType{AliasNode: "n2"}, "", ErrInvalidCheck},
		{"local alias without source", Config{Notifier: newRecorder(), RPC: newCatalogRPC()}, "c",
			&structs.CheckType{AliasService: "web"}, "", ErrInvalidCheck},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewManager(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			err = m.Add(tc.id, tc.def, "web")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Add: %v, want %v", err, tc.wantErr)
				}
				if m.Has(tc.id) {
					t.Fatal("failed Add left a runner")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%T", m.runners[tc.id].runner); got != tc.want {
				t.Fatalf("runner %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := NewManager(Config{}); err == nil {
		t.Fatal("NewManager without a Notifier succeeded")
	}
}

func TestManagerIntervalAndOutputLimits(t *testing.T) {
	tests := []struct {
		name         string
		minInterval  time.Duration
		interval     time.Duration
		agentMax     int
		checkMax     int
		wantInterval time.Duration
		wantMaxOut   int
		wantWarning  bool
	}{
		{"Consul's 1s minimum", 0, 100 * time.Millisecond, 0, 0, time.Second, DefaultOutputMaxSize, true},
		{"above the minimum", 0, 5 * time.Second, 0, 0, 5 * time.Second, DefaultOutputMaxSize, false},
		{"lowered minimum", 50 * time.Millisecond, 10 * time.Millisecond, 0, 0, 50 * time.Millisecond, DefaultOutputMaxSize, true},
		{"check lowers the output cap", 0, time.Second, 100, 10, time.Second, 10, false},
		{"check cannot raise the output cap", 0, time.Second, 100, 1000, time.Second, 100, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			m, err := NewManager(Config{Notifier: newRecorder(), MinInterval: tc.minInterval,
				OutputMaxSize: tc.agentMax, Logger: testLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			// Nothing listens on port 1: the check only has to exist.
			if err := m.Add("h", &structs.CheckType{HTTP: "http://127.0.0.1:1/", Interval: dur(tc.interval),
				OutputMaxSize: tc.checkMax}, ""); err != nil {
				t.Fatal(err)
			}
			h := m.runners["h"].runner.(*HTTPCheck)
			if h.interval != tc.wantInterval || h.maxOut != tc.wantMaxOut {
				t.Fatalf("interval %v max output %d, want %v %d", h.interval, h.maxOut, tc.wantInterval, tc.wantMaxOut)
			}
			if got := strings.Contains(logs.String(), "check has interval below minimum"); got != tc.wantWarning {
				t.Fatalf("warning logged = %v, want %v; logs:\n%s", got, tc.wantWarning, logs.String())
			}
		})
	}
}

func TestManagerUpdateTTL(t *testing.T) {
	rec := newRecorder()
	m, err := NewManager(Config{Notifier: rec, MinInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if err := m.Add("ttl", &structs.CheckType{TTL: dur(time.Minute)}, "web"); err != nil {
		t.Fatal(err)
	}
	if err := m.Add("tcp", &structs.CheckType{TCP: "127.0.0.1:1", Interval: dur(time.Minute)}, "web"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, id, status string
		wantErr          error
		wantText         string
	}{
		{"pass", "ttl", structs.HealthPassing, nil, ""},
		{"warn", "ttl", structs.HealthWarning, nil, ""},
		{"fail", "ttl", structs.HealthCritical, nil, ""},
		{"bad status", "ttl", "maintenance", ErrInvalidStatus, `Invalid check status: "maintenance"`},
		{"unknown check", "nope", structs.HealthPassing, ErrCheckNotFound, `Unknown check ID "nope"`},
		{"not a TTL check", "tcp", structs.HealthPassing, ErrNotTTL, `CheckID "tcp" does not have associated TTL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.all(tc.id))
			err := m.UpdateTTL(tc.id, tc.status, "note "+tc.name)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || err.Error() != tc.wantText {
					t.Fatalf("UpdateTTL: %v, want %v with text %q", err, tc.wantErr, tc.wantText)
				}
				if len(rec.all(tc.id)) != before {
					t.Fatal("a failed update reached the notifier")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			all := rec.all(tc.id)
			if u := all[len(all)-1]; u.status != tc.status || u.output != "note "+tc.name {
				t.Fatalf("last update %+v", u)
			}
		})
	}
}

func TestManagerReplaceRemoveStop(t *testing.T) {
	rec := newRecorder()
	m, err := NewManager(Config{Notifier: rec, MinInterval: testInterval})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Add("c", &structs.CheckType{TTL: dur(time.Minute)}, ""); err != nil {
		t.Fatal(err)
	}
	old := m.runners["c"].ttl

	// Re-adding the same ID replaces the runner: the old one is stopped.
	if err := m.Add("c", &structs.CheckType{TCP: "127.0.0.1:1", Interval: dur(time.Minute)}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := old.SetStatus(structs.HealthPassing, ""); !errors.Is(err, ErrStopped) {
		t.Fatalf("replaced TTL runner still accepts updates: %v", err)
	}
	if err := m.UpdateTTL("c", structs.HealthPassing, ""); !errors.Is(err, ErrNotTTL) {
		t.Fatalf("UpdateTTL on the replacement: %v", err)
	}

	if !m.Remove("c") || m.Has("c") || m.Remove("c") {
		t.Fatal("Remove did not forget the check exactly once")
	}
	if err := m.UpdateTTL("c", structs.HealthPassing, ""); !errors.Is(err, ErrCheckNotFound) {
		t.Fatalf("UpdateTTL after Remove: %v", err)
	}

	m.Stop()
	m.Stop() // idempotent
	if err := m.Add("d", &structs.CheckType{TTL: dur(time.Minute)}, ""); !errors.Is(err, ErrStopped) {
		t.Fatalf("Add after Stop: %v", err)
	}
}

// seqServer answers with the sequence number of each request, passing or
// failing as the test says, and remembers where each run of the current
// status began.
type seqServer struct {
	seq       atomic.Int64
	mu        sync.Mutex
	failing   bool
	flipSeq   int64 // first request served with the current status
	flipArmed bool
}

func (s *seqServer) set(failing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing, s.flipArmed = failing, true
}

func (s *seqServer) firstOfRun() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flipSeq
}

func (s *seqServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.seq.Add(1)
	s.mu.Lock()
	failing := s.failing
	if s.flipArmed {
		s.flipSeq, s.flipArmed = n, false
	}
	s.mu.Unlock()
	if failing {
		w.WriteHeader(http.StatusInternalServerError)
	}
	_, _ = fmt.Fprintf(w, "seq=%d", n)
}

func seqOf(t *testing.T, output string) int64 {
	t.Helper()
	_, after, ok := strings.Cut(output, "seq=")
	if !ok {
		t.Fatalf("no sequence number in %q", output)
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestManagerThresholds(t *testing.T) {
	srv := &seqServer{}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	rec := newRecorder()
	m, err := NewManager(Config{Notifier: rec, MinInterval: testInterval})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	srv.set(false)
	err = m.Add("h", &structs.CheckType{HTTP: hs.URL, Interval: dur(testInterval),
		SuccessBeforePassing: 2, FailuresBeforeCritical: 3}, "")
	if err != nil {
		t.Fatal(err)
	}

	// The first result goes through at once (Consul starts the counters
	// at their thresholds).
	u := rec.waitStatus(t, "h", structs.HealthPassing)
	if seqOf(t, u.output) != 1 {
		t.Fatalf("first passing result came from request %d", seqOf(t, u.output))
	}

	// Critical only on the third consecutive failure.
	srv.set(true)
	u = rec.waitStatus(t, "h", structs.HealthCritical)
	if got, first := seqOf(t, u.output), srv.firstOfRun(); got != first+2 {
		t.Fatalf("critical reported at request %d, failures began at %d (want the 3rd)", got, first)
	}

	// Passing again only on the second consecutive success.
	srv.set(false)
	u = rec.waitStatus(t, "h", structs.HealthPassing)
	if got, first := seqOf(t, u.output), srv.firstOfRun(); got != first+1 {
		t.Fatalf("passing reported at request %d, successes began at %d (want the 2nd)", got, first)
	}
}

// TestManagerStopLeavesNoGoroutines runs one check of every kind against
// real servers, stops the Manager and checks that nothing of ours is left.
func TestManagerStopLeavesNoGoroutines(t *testing.T) {
	baseline := goleak.IgnoreCurrent()

	hs := httptest.NewServer(httpTestHandler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := startGRPCHealth(t)
	st := newLocalState()
	st.setService("web", true)
	cat := newCatalogRPC()
	cat.setCheck("n2", "serfHealth", "", structs.HealthPassing)

	rec := newRecorder()
	m, err := NewManager(Config{Notifier: rec, AliasSource: st, RPC: cat, MinInterval: testInterval})
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]*structs.CheckType{
		"ttl":         {TTL: dur(time.Minute)},
		"http":        {HTTP: hs.URL + "/slow", Interval: dur(testInterval)}, // in flight at Stop
		"tcp":         {TCP: ln.Addr().String(), Interval: dur(testInterval)},
		"grpc":        {GRPC: g.addr, Interval: dur(testInterval)},
		"alias-local": {AliasService: "web"},
		"alias-node":  {AliasNode: "n2"},
	}
	for id, def := range defs {
		if err := m.Add(id, def, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"tcp", "grpc", "alias-local", "alias-node"} {
		rec.waitStatus(t, id, structs.HealthPassing)
	}
	waitUntil(t, "the alias query to block", func() bool { _, b := cat.stats(); return b == 1 })

	m.Stop()
	counts := map[string]int{}
	for id := range defs {
		counts[id] = len(rec.all(id))
	}
	time.Sleep(5 * testInterval)
	for id := range defs {
		if n := len(rec.all(id)); n != counts[id] {
			t.Fatalf("check %s reported %d times after Stop", id, n-counts[id])
		}
	}

	hs.Close()
	_ = ln.Close()
	g.stop()
	goleak.VerifyNone(t, baseline)
}

func TestDefaults(t *testing.T) {
	rec := newRecorder()
	h := NewHTTPCheck(HTTPCheckConfig{CheckID: "h", URL: "http://127.0.0.1:1/", Interval: time.Second, Notifier: rec})
	tc := NewTCPCheck(TCPCheckConfig{CheckID: "t", Address: "127.0.0.1:1", Interval: time.Second, Notifier: rec})
	g := NewGRPCCheck(GRPCCheckConfig{CheckID: "g", Target: "127.0.0.1:1/svc", Interval: time.Second, Notifier: rec})
	ttl := NewTTLCheck(TTLCheckConfig{CheckID: "ttl", TTL: time.Second, Notifier: rec})
	tests := []struct {
		name      string
		got, want any
	}{
		{"HTTP method", h.method, "GET"},
		{"HTTP timeout", h.client.Timeout, 10 * time.Second},
		{"HTTP output cap", h.maxOut, 4096},
		{"HTTP keep-alives off", h.transport.DisableKeepAlives, true},
		{"TCP timeout", tc.dialer.Timeout, 10 * time.Second},
		{"gRPC timeout", g.timeout, 10 * time.Second},
		{"gRPC server", g.server, "127.0.0.1:1"},
		{"gRPC service", g.service, "svc"},
		{"TTL output cap", ttl.maxOut, 4096},
		{"initial status", InitialStatus(&structs.CheckType{TTL: dur(time.Second)}), structs.HealthCritical},
		{"initial status given", InitialStatus(&structs.CheckType{TTL: dur(time.Second), Status: "passing"}), structs.HealthPassing},
		{"initial status of nil", InitialStatus(nil), structs.HealthCritical},
	}
	for _, c := range tests {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}
