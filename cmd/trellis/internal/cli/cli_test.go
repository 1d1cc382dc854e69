package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		stdoutHas string
		stderrHas string
	}{
		{"no args", nil, 1, "", "Usage: trellis"},
		{"help", []string{"--help"}, 0, "Available commands are:", ""},
		{"unknown", []string{"frobnicate"}, 127, "", `Unknown command: "frobnicate"`},
		{"group", []string{"kv"}, 1, "", "Usage: trellis kv <subcommand>"},
		{"group help", []string{"kv", "-h"}, 0, "    delete", ""},
		{"unknown sub", []string{"kv", "nope"}, 127, "", `Unknown command: "kv nope"`},
		{"nested group", []string{"operator", "raft"}, 1, "", "list-peers"},
		{"version flag", []string{"--version"}, 0, "Consul v1.22.0", ""},
		{"command help", []string{"kv", "get", "-h"}, 0, "", "Usage: trellis kv get"},
		{"bad flag", []string{"members", "-bogus"}, 1, "", "flag provided but not defined: -bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(tc.args, nil, "")
			if code != tc.code {
				t.Errorf("exit %d, want %d (stdout %q, stderr %q)", code, tc.code, out, errOut)
			}
			if !strings.Contains(out, tc.stdoutHas) || !strings.Contains(errOut, tc.stderrHas) {
				t.Errorf("stdout %q / stderr %q, want %q / %q", out, errOut, tc.stdoutHas, tc.stderrHas)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI([]string{"version", "-format=json"}, nil, "")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	// What sdk/testutil's findConsulVersion decodes.
	var v struct {
		Version, Revision, Prerelease, FullVersion, TrellisVersion string
		RPC                                                        struct{ Default, Min, Max int }
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if v.Version != "1.22.0" || v.TrellisVersion != "0.1.0" || v.Prerelease != "" || v.RPC.Max != 3 || !strings.Contains(v.FullVersion, "Trellis v0.1.0") {
		t.Fatalf("version json: %+v", v)
	}
	code, out, _ = runCLI([]string{"version"}, nil, "")
	if code != 0 || !strings.HasPrefix(out, "Consul v1.22.0\nTrellis v0.1.0") {
		t.Fatalf("pretty version (%d): %q", code, out)
	}
	if code, _, errOut := runCLI([]string{"version", "-format", "yaml"}, nil, ""); code != 1 || !strings.Contains(errOut, "Unknown format: yaml") {
		t.Fatalf("yaml: %d %q", code, errOut)
	}
}

func TestColumnize(t *testing.T) {
	for _, tc := range []struct {
		rows []string
		want string
	}{
		{[]string{"a\x1fbb\x1fc", "ddd\x1fe\x1ff"}, "a    bb  c\nddd  e   f"},
		{[]string{" x \x1fy", "long\x1f"}, "x     y\nlong  "},
		{[]string{"h1\x1fh2\x1fh3", "só\x1f\x1f"}, "h1  h2  h3\nsó      "},
		{nil, ""},
	} {
		if got := columnize(tc.rows); got != tc.want {
			t.Errorf("columnize(%q) = %q, want %q", tc.rows, got, tc.want)
		}
	}
}

func TestClientAddresses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     clientConfig
		wantURL string
		wantErr bool
	}{
		{"default", clientConfig{}, "http://127.0.0.1:8500", false},
		{"host port", clientConfig{addr: "10.0.0.1:8500"}, "http://10.0.0.1:8500", false},
		{"ssl env", clientConfig{addr: "10.0.0.1:8501", ssl: true}, "https://10.0.0.1:8501", false},
		{"scheme", clientConfig{addr: "https://consul.local:8501"}, "https://consul.local:8501", false},
		{"unix", clientConfig{addr: "unix:///tmp/s.sock"}, "http://unix", false},
		{"bad scheme", clientConfig{addr: "ftp://x"}, "", true},
		{"empty unix", clientConfig{addr: "unix://"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newAPIClient(tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err == nil && c.base.String() != tc.wantURL {
				t.Fatalf("base = %s, want %s", c.base.String(), tc.wantURL)
			}
		})
	}
}

func TestUnixSocketClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("unix sockets unavailable: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"Key":"k","Value":"dg=="}]`))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	code, out, errOut := runCLI([]string{"kv", "get", "k"}, map[string]string{"CONSUL_HTTP_ADDR": "unix://" + sock}, "")
	if code != 0 || out != "v\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	code, _, errOut := runCLI([]string{"members"}, map[string]string{"CONSUL_HTTP_ADDR": addr}, "")
	if code != 1 || !strings.Contains(errOut, "Error retrieving members:") || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
}

func TestTokenFile(t *testing.T) {
	f := newFakeAgent(t, map[string]reply{"PUT /v1/agent/leave": {}})
	file := filepath.Join(t.TempDir(), "tok")
	if err := writeTestFile(file, " secret \n"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"flag file", []string{"leave", "-token-file", file}, nil, "secret"},
		{"env file", []string{"leave"}, map[string]string{"CONSUL_HTTP_TOKEN_FILE": file}, "secret"},
		{"env token beats env file", []string{"leave"}, map[string]string{"CONSUL_HTTP_TOKEN_FILE": file, "CONSUL_HTTP_TOKEN": "t2"}, "t2"},
		{"flag beats env", []string{"leave", "-token", "t3"}, map[string]string{"CONSUL_HTTP_TOKEN": "t2"}, "t3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"CONSUL_HTTP_ADDR": f.addr()}
			for k, v := range tc.vars {
				vars[k] = v
			}
			before := len(f.requests())
			if code, _, errOut := runCLI(tc.args, vars, ""); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			reqs := f.requests()
			if len(reqs) != before+1 || reqs[len(reqs)-1].Token != tc.want {
				t.Fatalf("requests %+v, want token %q", reqs[before:], tc.want)
			}
		})
	}
}
