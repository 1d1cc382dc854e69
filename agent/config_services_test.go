package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/trellis-mesh/trellis/agent/config"
)

// reloadableAgent starts a -dev agent reading the HCL file it returns,
// with the reload the agent command gives it: load the same arguments
// again and apply them.
func reloadableAgent(t *testing.T, hcl string) (a *Agent, url, file string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "services.hcl")
	if err := os.WriteFile(file, []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(devArgs(t, "dev1"), "-config-file", file)
	load := func() (*config.RuntimeConfig, error) {
		rc, _, err := config.Load(config.LoadOptions{Args: args, Logger: slog.New(slog.DiscardHandler), FlagOutput: io.Discard})
		return rc, err
	}
	rc, err := load()
	if err != nil {
		t.Fatal(err)
	}
	a, err = New(Config{Runtime: rc, Reload: func() error {
		rc, err := load()
		if err != nil {
			return err
		}
		return a.ReloadConfig(rc)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		http.DefaultClient.CloseIdleConnections()
	})
	return a, "http://" + rc.HTTPAddrForClients(), file
}

// keysOf returns the sorted keys of a JSON object answered at url.
func keysOf(t *testing.T, url string) []string {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// catalogHas reports whether the catalog lists service on some node.
func catalogHas(t *testing.T, url, service string) bool {
	_, body := get(t, url+"/v1/catalog/service/"+service)
	return strings.Contains(body, `"ServiceName":"`+service+`"`)
}

// TestConfigServicesRegisterAndReload: services and checks from an HCL
// config file are in local state and in the catalog once the agent runs,
// and PUT /v1/agent/reload adds, changes and removes them as the file
// says, leaving services registered through the HTTP API alone.
func TestConfigServicesRegisterAndReload(t *testing.T) {
	_, url, file := reloadableAgent(t, `
service {
  name = "web"
  port = 8080
  connect { sidecar_service {} }
  check {
    id = "web-ttl"
    name = "web alive"
    ttl = "30s"
  }
}
service {
  name = "cache"
  port = 6379
}
check {
  id = "mem"
  name = "memory"
  ttl = "1m"
}
`)
	if got, want := keysOf(t, url+"/v1/agent/services"), []string{"cache", "web", "web-sidecar-proxy"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("services %q, want %q", got, want)
	}
	if got := keysOf(t, url+"/v1/agent/checks"); !slices.Contains(got, "mem") || !slices.Contains(got, "web-ttl") {
		t.Fatalf("checks %q", got)
	}
	waitFor(t, "web and its sidecar in the catalog", func() bool {
		return catalogHas(t, url, "web") && catalogHas(t, url, "web-sidecar-proxy") && catalogHas(t, url, "cache")
	})
	if code, body := put(t, url+"/v1/agent/service/register", `{"Name": "api", "Port": 9000}`); code != http.StatusOK {
		t.Fatalf("register api: %d %s", code, body)
	}

	// web goes, cache changes port, db comes, the node check goes.
	if err := os.WriteFile(file, []byte(`
services = [
  { name = "cache", port = 6380 },
  { name = "db", port = 5432, checks = [{ id = "db-ttl", name = "db alive", ttl = "30s" }] },
]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := put(t, url+"/v1/agent/reload", ""); code != http.StatusOK || body != "" {
		t.Fatalf("reload: %d %q", code, body)
	}
	if got, want := keysOf(t, url+"/v1/agent/services"), []string{"api", "cache", "db"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("services after reload %q, want %q", got, want)
	}
	if got := keysOf(t, url+"/v1/agent/checks"); slices.Contains(got, "mem") || slices.Contains(got, "web-ttl") || !slices.Contains(got, "db-ttl") {
		t.Fatalf("checks after reload %q", got)
	}
	if _, body := get(t, url+"/v1/agent/service/cache"); !strings.Contains(body, `"Port":6380`) {
		t.Fatalf("cache after reload: %s", body)
	}
	waitFor(t, "the catalog to follow the reload", func() bool {
		return !catalogHas(t, url, "web") && !catalogHas(t, url, "web-sidecar-proxy") && catalogHas(t, url, "db") && catalogHas(t, url, "api")
	})

	// A file that no longer loads is refused and changes nothing.
	if err := os.WriteFile(file, []byte(`service { name = "x" port = "not a number" }`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := put(t, url+"/v1/agent/reload", "")
	if code != http.StatusInternalServerError || !strings.Contains(body, file) || !strings.Contains(body, "port: expected int, got string") {
		t.Fatalf("bad reload: %d %q", code, body)
	}
	if got, want := keysOf(t, url+"/v1/agent/services"), []string{"api", "cache", "db"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("services after a failed reload %q, want %q", got, want)
	}
}

// TestConfigServiceErrorsStopTheStart: a definition that does not decode,
// or that local state refuses, fails the start, naming the file and the
// definition.
func TestConfigServiceErrorsStopTheStart(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		wants      []string
	}{
		{"wrong type", `{"service": {"name": "web", "port": "80"}}`, []string{"service 1: port: expected int, got string"}},
		{"refused", `{"service": {"name": "web", "check": {"ttl": "10s", "http": "http://x"}}}`, []string{`service "web"`}},
		{"check without a name", `{"check": {"id": "c", "ttl": "10s"}}`, []string{`check "c"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "bad.json")
			if err := os.WriteFile(file, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			args := append(devArgs(t, "n"), "-config-file", file)
			rc, _, err := config.Load(config.LoadOptions{Args: args, FlagOutput: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(Config{Runtime: rc})
			if err != nil {
				t.Fatal(err)
			}
			err = a.Start(context.Background())
			if err == nil {
				t.Fatal("the agent started")
			}
			for _, w := range append(tc.wants, file) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}
