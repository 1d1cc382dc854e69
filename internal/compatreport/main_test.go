package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	tests := []struct {
		name         string
		events       string
		wantSummary  string
		wantFailures string
	}{
		{
			name: "pass skip and a testify failure with its message",
			events: `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"output","Package":"p","Test":"TestC/sub","Output":"    kv_test.go:52: \n"}
{"Action":"output","Package":"p","Test":"TestC/sub","Output":"        \tError Trace:\tkv_test.go:52\n"}
{"Action":"output","Package":"p","Test":"TestC/sub","Output":"        \tError:      \tNot equal: \n"}
{"Action":"output","Package":"p","Test":"TestC/sub","Output":"        \t            \texpected: 1\n"}
{"Action":"output","Package":"p","Test":"TestC/sub","Output":"        \tTest:       \tTestC/sub\n"}
{"Action":"fail","Package":"p","Test":"TestC/sub"}
{"Action":"fail","Package":"p","Test":"TestC"}
`,
			wantSummary:  "compat: 1 passed, 1 failed, 1 skipped of 3 top-level tests",
			wantFailures: "p TestC: kv_test.go:52: Not equal: expected: 1\n",
		},
		{
			name: "an agent that refused to start and a nested retry message",
			events: `{"Action":"run","Package":"p","Test":"TestACL"}
{"Action":"output","Package":"p","Test":"TestACL","Output":"    retry.go:219: server.go:342: CONFIG JSON: {}\n"}
{"Action":"output","Package":"p","Test":"TestACL","Output":"        retry.go:62: Failed to start server: api unavailable\n"}
{"Action":"output","Package":"p","Test":"TestACL","Output":"==> Error loading configuration:\n"}
{"Action":"output","Package":"p","Test":"TestACL","Output":"protection not provided: acl.enabled\n"}
{"Action":"fail","Package":"p","Test":"TestACL"}
{"Action":"run","Package":"p","Test":"TestRetry"}
{"Action":"output","Package":"p","Test":"TestRetry","Output":"    retry.go:219: retry.go:39: \n"}
{"Action":"output","Package":"p","Test":"TestRetry","Output":"        \tError:      \tReceived unexpected error:\n"}
{"Action":"output","Package":"p","Test":"TestRetry","Output":"        \t            \tUnexpected response code: 404 ()\n"}
{"Action":"fail","Package":"p","Test":"TestRetry"}
`,
			wantSummary: "compat: 0 passed, 2 failed, 0 skipped of 2 top-level tests",
			wantFailures: "p TestACL: retry.go:62: Failed to start server: api unavailable | consul: protection not provided: acl.enabled\n" +
				"p TestRetry: retry.go:219: retry.go:39: Received unexpected error: Unexpected response code: 404 ()\n",
		},
		{
			name: "a hung test fails with the timeout and a build failure shows",
			events: `{"Action":"run","Package":"w","Test":"TestEventWatch"}
{"Action":"output","Package":"w","Output":"panic: test timed out after 15m0s\n"}
{"Action":"fail","Package":"w"}
{"Action":"output","Package":"b","Output":"b/x.go:1:1: syntax error\n"}
{"Action":"fail","Package":"b"}
not json
`,
			wantSummary: "compat: 0 passed, 2 failed, 0 skipped of 2 top-level tests",
			wantFailures: "b (package): b/x.go:1:1: syntax error\n" +
				"w TestEventWatch: did not finish: panic: test timed out after 15m0s\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in, failures := filepath.Join(dir, "in.json"), filepath.Join(dir, "failures.txt")
			if err := os.WriteFile(in, []byte(tt.events), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := run(in, failures, &out); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.wantSummary) {
				t.Errorf("summary:\n%s\nwant a line %q", out.String(), tt.wantSummary)
			}
			got, err := os.ReadFile(failures)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.wantFailures {
				t.Errorf("failures:\n%s\nwant:\n%s", got, tt.wantFailures)
			}
		})
	}
}

// TestReportDirectory: with one file a run, a run's timeout is the reason
// of that run's unfinished test only.
func TestReportDirectory(t *testing.T) {
	dir := t.TempDir()
	runs := map[string]string{
		"a.json": `{"Action":"run","Package":"p","Test":"TestHangs"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 5m0s\n"}
{"Action":"fail","Package":"p"}
`,
		"b.json": `{"Action":"run","Package":"p","Test":"TestCrashes"}
{"Action":"output","Package":"p","Output":"panic: runtime error: invalid memory address\n"}
{"Action":"fail","Package":"p"}
`,
		"c.json": `{"Action":"run","Package":"p","Test":"TestPasses"}
{"Action":"pass","Package":"p","Test":"TestPasses"}
{"Action":"pass","Package":"p"}
`,
	}
	for name, body := range runs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	failures := filepath.Join(t.TempDir(), "failures.txt")
	var out bytes.Buffer
	if err := run(dir, failures, &out); err != nil {
		t.Fatal(err)
	}
	if want := "compat: 1 passed, 2 failed, 0 skipped of 3 top-level tests"; !strings.Contains(out.String(), want) {
		t.Errorf("summary:\n%s\nwant %q", out.String(), want)
	}
	got, err := os.ReadFile(failures)
	if err != nil {
		t.Fatal(err)
	}
	want := "p TestCrashes: did not finish: panic: runtime error: invalid memory address\n" +
		"p TestHangs: did not finish: panic: test timed out after 5m0s\n"
	if string(got) != want {
		t.Errorf("failures:\n%s\nwant:\n%s", got, want)
	}
}
