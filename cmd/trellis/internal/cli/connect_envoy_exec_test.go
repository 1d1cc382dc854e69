//go:build unix

package cli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/xds/bootstrap"
)

// helperArgsVar carries the CLI arguments to TestConnectEnvoyHelperProcess.
const helperArgsVar = "TRELLIS_TEST_CONNECT_ENVOY_ARGS"

// TestConnectEnvoyHelperProcess is not a test: TestConnectEnvoyExec runs
// the test binary again with only this function selected, so that the CLI
// can exec into the fake envoy without replacing the test process itself.
func TestConnectEnvoyHelperProcess(t *testing.T) {
	raw := os.Getenv(helperArgsVar)
	if raw == "" {
		t.Skip("only runs as TestConnectEnvoyExec's subprocess")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		os.Exit(99)
	}
	os.Exit(Run(args, ProcessEnv(nil)))
}

// fakeEnvoy is a shell script that records its arguments and the config
// it was given, then exits 7 so the parent can tell it ran.
const fakeEnvoy = `#!/bin/sh
PATH=/usr/bin:/bin
out='%OUT%'
: > "$out/args"
for a in "$@"; do printf '%s\n' "$a" >> "$out/args"; done
prev=
for a in "$@"; do
	if [ "$prev" = "--config-path" ]; then cat "$a" > "$out/config.json"; fi
	prev=$a
done
exit 7
`

func TestConnectEnvoyExec(t *testing.T) {
	routes := map[string]reply{
		"GET /v1/agent/services":                  {body: servicesOneSidecar},
		"GET /v1/agent/service/web-sidecar-proxy": {body: webSidecar},
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantArgs []string // after --config-path <path>
	}{
		{"plain", []string{"connect", "envoy", "-sidecar-for", "web"}, []string{"--disable-hot-restart"}},
		{"pass-through options", []string{"connect", "envoy", "-sidecar-for", "web", "--", "--log-level", "debug", "--restart-epoch", "1"},
			[]string{"--log-level", "debug", "--restart-epoch", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t, routes)
			bin, out, tmp := t.TempDir(), t.TempDir(), t.TempDir()
			script := strings.ReplaceAll(fakeEnvoy, "%OUT%", out)
			if err := os.WriteFile(filepath.Join(bin, "envoy"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			argsJSON, _ := json.Marshal(tc.args)
			cmd := exec.Command(os.Args[0], "-test.run=^TestConnectEnvoyHelperProcess$")
			cmd.Env = []string{
				helperArgsVar + "=" + string(argsJSON),
				"PATH=" + bin,
				"TMPDIR=" + tmp,
				"CONSUL_HTTP_ADDR=" + f.addr(),
				"CONSUL_HTTP_TOKEN=secret-token",
				"CONSUL_GRPC_ADDR=127.0.0.1:18502",
			}
			combined, err := cmd.CombinedOutput()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
				t.Fatalf("subprocess: %v (want exit 7 from the fake envoy)\n%s", err, combined)
			}

			rawArgs, err := os.ReadFile(filepath.Join(out, "args"))
			if err != nil {
				t.Fatalf("fake envoy recorded no args: %v", err)
			}
			got := strings.Split(strings.TrimSuffix(string(rawArgs), "\n"), "\n")
			if len(got) < 2 || got[0] != "--config-path" || !regexp.MustCompile(`^/dev/fd/\d+$`).MatchString(got[1]) {
				t.Fatalf("envoy args %q, want --config-path /dev/fd/N first", got)
			}
			if strings.Join(got[2:], " ") != strings.Join(tc.wantArgs, " ") {
				t.Errorf("envoy args after the config %q, want %q", got[2:], tc.wantArgs)
			}

			cfg, err := os.ReadFile(filepath.Join(out, "config.json"))
			if err != nil {
				t.Fatalf("fake envoy could not read its config: %v", err)
			}
			b, err := bootstrap.Parse(cfg)
			if err != nil {
				t.Fatalf("config given to envoy: %v\n%s", err, cfg)
			}
			if b.GetNode().GetId() != "web-sidecar-proxy" || b.GetNode().GetCluster() != "web" ||
				adsToken(b) != "secret-token" || agentAddr(b) != "127.0.0.1:18502" {
				t.Errorf("config given to envoy: node %v, token %q, agent %s", b.GetNode(), adsToken(b), agentAddr(b))
			}
			// The bootstrap holds the token: nothing may stay on disk.
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("temp files left behind: %v", left)
			}
		})
	}
}
