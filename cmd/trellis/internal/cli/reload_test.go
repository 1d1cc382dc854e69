package cli

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/agent/config"
)

func TestReloadCommand(t *testing.T) {
	runCases(t, []cliCase{
		{name: "reload", args: []string{"reload"},
			routes: map[string]reply{"PUT /v1/agent/reload": {}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/reload"}},
			stdout: "Configuration reload triggered\n"},
		{name: "failed", args: []string{"reload"},
			routes: map[string]reply{"PUT /v1/agent/reload": {status: 500, body: "bad file"}},
			want:   []sentRequest{{Method: "PUT", Path: "/v1/agent/reload"}}, code: 1,
			stderrHas: []string{"Error reloading: Unexpected response code: 500 (bad file)"}},
	})
}

func TestValidateCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dataDir := filepath.Join(dir, "data")
	write("good/a.hcl", "bind_addr = \"127.0.0.1\"\ndata_dir = \""+dataDir+"\"\nserver = true\nbootstrap = true\nservice { name = \"web\" }")
	write("good/b.json", `{"node_name": "n1"}`)
	conf := write("conf/x.conf", "bind_addr = \"127.0.0.1\"\ndata_dir = \""+dataDir+"\"")
	bad := write("bad.hcl", "ports { http = \"x\" }")
	noDataDir := write("nodata.json", `{"server": true}`)
	badService := write("badsvc.hcl", "bind_addr = \"127.0.0.1\"\ndata_dir = \""+dataDir+"\"\nservice { name = \"web\" port = \"x\" }")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"dir of both formats", []string{filepath.Join(dir, "good")}, 0, "Configuration is valid!\n", ""},
		{"quiet", []string{"-quiet", filepath.Join(dir, "good")}, 0, "", ""},
		{"forced format", []string{"-config-format", "hcl", conf}, 0, "Configuration is valid!\n", ""},
		{"wrong type", []string{bad}, 1, "", "Config validation failed: invalid config file: " + bad + ": ports.http: expected a number, got string"},
		{"invalid as a whole", []string{noDataDir}, 1, "", "Config validation failed: invalid configuration: data_dir cannot be empty"},
		{"bad service", []string{badService}, 1, "", "Config validation failed: definitions: " + badService},
		{"nothing given", nil, 1, "", "Must specify at least one config file or directory"},
		{"bad format", []string{"-config-format", "yaml", conf}, 1, "", "-config-format must be either 'hcl' or 'json'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := Env{Stdout: &stdout, Stderr: &stderr, ValidateDefinitions: func(rc *config.RuntimeConfig) error {
				for _, d := range rc.Services {
					if strings.Contains(string(d.JSON), `"x"`) {
						return errors.New("definitions: " + d.Source)
					}
				}
				return nil
			}}
			if code := Run(append([]string{"validate"}, tc.args...), env); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			if stdout.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.stdout)
			}
			if !strings.HasPrefix(stderr.String(), tc.stderr) {
				t.Errorf("stderr %q, want it to start with %q", stderr.String(), tc.stderr)
			}
			if _, err := os.Stat(dataDir); err == nil {
				t.Errorf("validate wrote to the data dir")
			}
		})
	}
}
