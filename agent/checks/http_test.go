package checks

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

const testInterval = 20 * time.Millisecond

// httpTestHandler serves the paths the HTTP check tests probe.
func httpTestHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { _, _ = fmt.Fprint(w, "ok") })
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = fmt.Fprint(w, "slow down")
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprint(w, "down")
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { _, _ = fmt.Fprint(w, "0123456789abcdef") })
	// /echo answers 200 only when the request is what the check promised:
	// the method, headers, body, Host and Consul's default headers.
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := fmt.Sprintf("%s host=%s ua=%s accept=%s x=%s body=%s",
			r.Method, r.Host, r.UserAgent(), r.Header.Get("Accept"), r.Header.Get("X-Test"), body)
		_, _ = fmt.Fprint(w, got)
	})
	return mux
}

func TestHTTPCheckResults(t *testing.T) {
	srv := newRestartableHTTP(t, httpTestHandler())
	tests := []struct {
		name       string
		cfg        HTTPCheckConfig
		wantStatus string
		wantOutput string // exact, "%s" is the URL
		contains   string // instead of wantOutput
	}{
		{name: "2xx is passing", cfg: HTTPCheckConfig{URL: srv.url("/ok")},
			wantStatus: structs.HealthPassing, wantOutput: "HTTP GET %s: 200 OK Output: ok"},
		{name: "429 is warning", cfg: HTTPCheckConfig{URL: srv.url("/busy")},
			wantStatus: structs.HealthWarning, wantOutput: "HTTP GET %s: 429 Too Many Requests Output: slow down"},
		{name: "503 is critical", cfg: HTTPCheckConfig{URL: srv.url("/down")},
			wantStatus: structs.HealthCritical, wantOutput: "HTTP GET %s: 503 Service Unavailable Output: down"},
		{name: "404 is critical", cfg: HTTPCheckConfig{URL: srv.url("/nope")},
			wantStatus: structs.HealthCritical, contains: "404 Not Found"},
		{name: "redirects are followed", cfg: HTTPCheckConfig{URL: srv.url("/moved")},
			wantStatus: structs.HealthPassing, wantOutput: "HTTP GET %s: 200 OK Output: ok"},
		{name: "redirect loop is critical", cfg: HTTPCheckConfig{URL: srv.url("/loop")},
			wantStatus: structs.HealthCritical, contains: "stopped after 10 redirects"},
		{name: "timeout is critical", cfg: HTTPCheckConfig{URL: srv.url("/slow"), Timeout: 50 * time.Millisecond},
			wantStatus: structs.HealthCritical, contains: "Client.Timeout exceeded"},
		{name: "output keeps the end of a long body", cfg: HTTPCheckConfig{URL: srv.url("/big"), OutputMaxSize: 10},
			wantStatus: structs.HealthPassing, wantOutput: "HTTP GET %s: 200 OK Output: 6789abcdef"},
		{name: "method header body and defaults", cfg: HTTPCheckConfig{URL: srv.url("/echo"), Method: "POST",
			Header: map[string][]string{"X-Test": {"yes"}, "Host": {"example.test"}}, Body: "ping"},
			wantStatus: structs.HealthPassing,
			wantOutput: "HTTP POST %s: 200 OK Output: POST host=example.test ua=Consul Health Check accept=text/plain, text/*, */* x=yes body=ping"},
		{name: "own user agent and accept win", cfg: HTTPCheckConfig{URL: srv.url("/echo"),
			Header: map[string][]string{"User-Agent": {"probe/1"}, "Accept": {"application/json"}}},
			wantStatus: structs.HealthPassing, contains: "ua=probe/1 accept=application/json x= body="},
		{name: "bad URL is critical", cfg: HTTPCheckConfig{URL: "http://[::1"},
			wantStatus: structs.HealthCritical, contains: "missing ']'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			cfg := tc.cfg
			cfg.CheckID, cfg.Interval, cfg.Notifier = "http", testInterval, rec
			c := NewHTTPCheck(cfg)
			c.Start()
			defer c.Stop()
			u := rec.waitFor(t, "http", "a result", func(update) bool { return true })
			if u.status != tc.wantStatus {
				t.Fatalf("status %q (output %q), want %q", u.status, u.output, tc.wantStatus)
			}
			if tc.wantOutput != "" {
				if want := fmt.Sprintf(tc.wantOutput, cfg.URL); u.output != want {
					t.Fatalf("output\n%q, want\n%q", u.output, want)
				}
			} else if !strings.Contains(u.output, tc.contains) {
				t.Fatalf("output %q does not contain %q", u.output, tc.contains)
			}
		})
	}
}

func TestHTTPCheckFollowsServerStopAndStart(t *testing.T) {
	srv := newRestartableHTTP(t, httpTestHandler())
	rec := newRecorder()
	c := NewHTTPCheck(HTTPCheckConfig{CheckID: "web", URL: srv.url("/ok"), Interval: testInterval, Notifier: rec})
	c.Start()
	defer c.Stop()

	rec.waitStatus(t, "web", structs.HealthPassing)
	srv.stop()
	u := rec.waitStatus(t, "web", structs.HealthCritical)
	if !strings.Contains(u.output, "connection refused") {
		t.Fatalf("output %q", u.output)
	}
	srv.start()
	rec.waitStatus(t, "web", structs.HealthPassing)
}

func TestHTTPCheckTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(httpTestHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // failed handshakes are the point
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	// Like the agent's hook: its CA roots plus the definition's settings.
	withRoots := func(skip bool, name string) *tls.Config {
		return &tls.Config{RootCAs: roots, InsecureSkipVerify: skip, ServerName: name} //nolint:gosec // tests the definition's TLSSkipVerify
	}

	tests := []struct {
		name       string
		tlsConfig  func(bool, string) *tls.Config // nil: the Manager default
		skipVerify bool
		serverName string
		wantStatus string
		contains   string
	}{
		{name: "skip verify", skipVerify: true, wantStatus: structs.HealthPassing, contains: "200 OK"},
		{name: "unknown authority", wantStatus: structs.HealthCritical, contains: "certificate"},
		{name: "trusted root", tlsConfig: withRoots, wantStatus: structs.HealthPassing, contains: "200 OK"},
		{name: "server name matches the certificate", tlsConfig: withRoots, serverName: "example.com",
			wantStatus: structs.HealthPassing, contains: "200 OK"},
		{name: "server name does not match", tlsConfig: withRoots, serverName: "wrong.test",
			wantStatus: structs.HealthCritical, contains: "wrong.test"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			m, err := NewManager(Config{Notifier: rec, TLSConfig: tc.tlsConfig, MinInterval: testInterval})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			err = m.Add("tls", &structs.CheckType{HTTP: srv.URL + "/ok", Interval: dur(testInterval),
				TLSSkipVerify: tc.skipVerify, TLSServerName: tc.serverName}, "web")
			if err != nil {
				t.Fatal(err)
			}
			u := rec.waitFor(t, "tls", "a result", func(update) bool { return true })
			if u.status != tc.wantStatus || !strings.Contains(u.output, tc.contains) {
				t.Fatalf("got %q %q, want %q containing %q", u.status, u.output, tc.wantStatus, tc.contains)
			}
		})
	}
}
