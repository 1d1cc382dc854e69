package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// everyKindHCL and everyKindJSON are one configuration in both formats,
// with every kind of key Trellis reads: strings, booleans, integers, a
// float, durations, lists, free maps, nested blocks two deep, and service
// and check definitions.
const everyKindHCL = `
node_name = "n1"
datacenter = "east"
server = true
bootstrap = true
bind_addr = "127.0.0.1"
client_addr = "127.0.0.1"
retry_join = ["10.0.0.1", "10.0.0.2"]
retry_interval = "5s"
node_meta {
  rack = "r1"
  "Zone-A" = "z"
}
ports {
  http = 18500
  grpc = -1
  sidecar_min_port = 22000
  sidecar_max_port = 22100
}
addresses {
  http = "127.0.0.2"
}
performance {
  raft_multiplier = 2
}
limits {
  kv_max_value_size = 1024
}
xds {
  update_max_per_second = 12.5
}
connect {
  enabled = true
  ca_config {
    leaf_cert_ttl = "24h"
  }
}
acl {
  default_policy = "deny"
}
log_level = "WARN"
log_json = true
service {
  name = "web"
  port = 8080
  connect { sidecar_service {} }
}
service {
  name = "api"
  port = 9090
  checks = [
    { ttl = "30s" },
  ]
}
check {
  id = "mem"
  ttl = "10s"
}
`

const everyKindJSON = `{
  "node_name": "n1", "datacenter": "east", "server": true, "bootstrap": true,
  "bind_addr": "127.0.0.1", "client_addr": "127.0.0.1",
  "retry_join": ["10.0.0.1", "10.0.0.2"], "retry_interval": "5s",
  "node_meta": {"rack": "r1", "Zone-A": "z"},
  "ports": {"http": 18500, "grpc": -1, "sidecar_min_port": 22000, "sidecar_max_port": 22100},
  "addresses": {"http": "127.0.0.2"},
  "performance": {"raft_multiplier": 2},
  "limits": {"kv_max_value_size": 1024},
  "xds": {"update_max_per_second": 12.5},
  "connect": {"enabled": true, "ca_config": {"leaf_cert_ttl": "24h"}},
  "acl": {"default_policy": "deny"},
  "log_level": "WARN", "log_json": true,
  "services": [
    {"name": "web", "port": 8080, "connect": {"sidecar_service": {}}},
    {"name": "api", "port": 9090, "checks": [{"ttl": "30s"}]}
  ],
  "check": {"id": "mem", "ttl": "10s"}
}`

// sameJSON reports whether two definitions hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func definitionsOf(defs []Definition) []string {
	var out []string
	for _, d := range defs {
		var v map[string]any
		_ = json.Unmarshal(d.JSON, &v)
		name, _ := v["name"].(string)
		if name == "" {
			name, _ = v["id"].(string)
		}
		src := d.Source
		if i := strings.LastIndex(src, "/"); i >= 0 {
			src = src[i+1:]
		}
		out = append(out, src+":"+name)
	}
	return out
}

// TestLoadHCLMatchesJSON: one configuration written in HCL and in JSON
// gives the same RuntimeConfig, definitions included.
func TestLoadHCLMatchesJSON(t *testing.T) {
	fromHCL, _, err := load(t, []string{"-data-dir", "$DIR/data", "-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": everyKindHCL})
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, _, err := load(t, []string{"-data-dir", "$DIR/data", "-config-file", "$DIR/c.json"}, map[string]string{"c.json": everyKindJSON})
	if err != nil {
		t.Fatal(err)
	}
	rc := fromHCL
	if rc.NodeName != "n1" || rc.Datacenter != "east" || !rc.ServerMode || rc.Ports.HTTP != 18500 || rc.Ports.GRPC != -1 ||
		rc.Ports.SidecarMin != 22000 || rc.RaftMultiplier != 2 || rc.Limits.KVMaxValueSize != 1024 ||
		rc.XDSUpdateMaxPerSecond != 12.5 || rc.Connect.LeafCertTTL != 24*time.Hour || rc.IntentionDefaultPolicy != "deny" ||
		rc.Logging != (Logging{Level: "warn", JSON: true}) || rc.RetryInterval != 5*time.Second ||
		!reflect.DeepEqual(rc.RetryJoin, []string{"10.0.0.1", "10.0.0.2"}) ||
		!reflect.DeepEqual(rc.NodeMeta, map[string]string{"rack": "r1", "Zone-A": "z"}) ||
		!reflect.DeepEqual(rc.Addresses.HTTP, []string{"127.0.0.2"}) {
		t.Errorf("HCL config read as %+v", rc)
	}
	if got := definitionsOf(rc.Services); !reflect.DeepEqual(got, []string{"c.hcl:web", "c.hcl:api"}) {
		t.Errorf("services = %q", got)
	}
	if got := definitionsOf(rc.Checks); !reflect.DeepEqual(got, []string{"c.hcl:mem"}) {
		t.Errorf("checks = %q", got)
	}
	if len(fromJSON.Services) != 2 || len(fromJSON.Checks) != 1 {
		t.Fatalf("JSON definitions: %d services, %d checks", len(fromJSON.Services), len(fromJSON.Checks))
	}
	for i := range rc.Services {
		if !sameJSON(t, rc.Services[i].JSON, fromJSON.Services[i].JSON) {
			t.Errorf("service %d: HCL %s, JSON %s", i, rc.Services[i].JSON, fromJSON.Services[i].JSON)
		}
	}
	if !sameJSON(t, rc.Checks[0].JSON, fromJSON.Checks[0].JSON) {
		t.Errorf("check: HCL %s, JSON %s", rc.Checks[0].JSON, fromJSON.Checks[0].JSON)
	}
	// Everything but the data dir (a different temp dir) and the file
	// names is the same.
	a, b := *fromHCL, *fromJSON
	a.DataDir, b.DataDir, a.NodeID, b.NodeID = "", "", "", ""
	a.ConfigFiles, b.ConfigFiles, a.Services, b.Services, a.Checks, b.Checks = nil, nil, nil, nil, nil, nil
	if !reflect.DeepEqual(a, b) {
		t.Errorf("HCL and JSON differ:\n hcl %+v\njson %+v", a, b)
	}
}

func TestLoadFormats(t *testing.T) {
	files := map[string]string{
		"a.hcl":       "node_name = \"from-a\"\nretry_join = [\"10.0.0.1\"]\nports { http = 9000 }\nservice { name = \"a\" }",
		"b.json":      `{"node_name": "from-b", "retry_join": ["10.0.0.2"], "services": [{"name": "b"}]}`,
		"d/10.hcl":    "datacenter = \"dir1\"\nnode_meta { a = \"1\" }\ncheck { id = \"c1\" ttl = \"1s\" }",
		"d/20.json":   `{"datacenter": "dir2", "node_meta": {"b": "2"}, "checks": [{"id": "c2", "ttl": "1s"}]}`,
		"d/30.hcl":    "retry_interval = \"7s\"",
		"d/notes.txt": "not config",
		"f/x.conf":    "node_name = \"from-conf\"",
		"f/y.json":    "node_name = \"hcl-in-a-json-file\"",
		"j/x.txt":     `{"node_name": "json-in-txt"}`,
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, rc *RuntimeConfig)
	}{
		{"hcl then json", []string{"-config-file", "$DIR/a.hcl", "-config-file", "$DIR/b.json"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.NodeName != "from-b" || rc.Ports.HTTP != 9000 || !reflect.DeepEqual(rc.RetryJoin, []string{"10.0.0.1", "10.0.0.2"}) {
				t.Errorf("node=%q http=%d join=%v", rc.NodeName, rc.Ports.HTTP, rc.RetryJoin)
			}
			if got := definitionsOf(rc.Services); !reflect.DeepEqual(got, []string{"a.hcl:a", "b.json:b"}) {
				t.Errorf("services = %q", got)
			}
		}},
		{"json then hcl", []string{"-config-file", "$DIR/b.json", "-config-file", "$DIR/a.hcl"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.NodeName != "from-a" || !reflect.DeepEqual(rc.RetryJoin, []string{"10.0.0.2", "10.0.0.1"}) {
				t.Errorf("node=%q join=%v", rc.NodeName, rc.RetryJoin)
			}
		}},
		{"dir with both formats in lexical order", []string{"-config-dir", "$DIR/d"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.Datacenter != "dir2" || rc.RetryInterval != 7*time.Second || len(rc.ConfigFiles) != 3 ||
				!reflect.DeepEqual(rc.NodeMeta, map[string]string{"a": "1", "b": "2"}) {
				t.Errorf("dc=%q retry=%v meta=%v files=%v", rc.Datacenter, rc.RetryInterval, rc.NodeMeta, rc.ConfigFiles)
			}
			if got := definitionsOf(rc.Checks); !reflect.DeepEqual(got, []string{"10.hcl:c1", "20.json:c2"}) {
				t.Errorf("checks = %q", got)
			}
		}},
		{"-hcl after files and flags", []string{"-config-file", "$DIR/a.hcl", "-node", "from-flag",
			"-hcl", `node_name = "from-hcl"`, "-hcl", `ports { grpc = 9502 }`, "-hcl", `service { name = "h" }`}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.NodeName != "from-hcl" || rc.Ports.HTTP != 9000 || rc.Ports.GRPC != 9502 {
				t.Errorf("node=%q http=%d grpc=%d", rc.NodeName, rc.Ports.HTTP, rc.Ports.GRPC)
			}
			if got := definitionsOf(rc.Services); !reflect.DeepEqual(got, []string{"a.hcl:a", "-hcl fragment 3:h"}) {
				t.Errorf("services = %q", got)
			}
			if len(rc.ConfigFiles) != 1 {
				t.Errorf("ConfigFiles = %q: fragments are not files", rc.ConfigFiles)
			}
		}},
		{"flags beat files, -hcl beats flags", []string{"-hcl", `node_name = "from-hcl"`, "-config-file", "$DIR/b.json", "-node", "from-flag"},
			func(t *testing.T, rc *RuntimeConfig) {
				if rc.NodeName != "from-hcl" {
					t.Errorf("node=%q", rc.NodeName)
				}
			}},
		{"-config-format hcl forces every file of a dir", []string{"-config-format", "hcl", "-config-dir", "$DIR/f"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.NodeName != "hcl-in-a-json-file" || len(rc.ConfigFiles) != 2 {
				t.Errorf("node=%q files=%q", rc.NodeName, rc.ConfigFiles)
			}
		}},
		{"-config-format json reads a file without the extension", []string{"-config-format", "json", "-config-file", "$DIR/j/x.txt"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.NodeName != "json-in-txt" {
				t.Errorf("node=%q", rc.NodeName)
			}
		}},
		{"-config-format hcl reads JSON too", []string{"-config-format", "hcl", "-config-file", "$DIR/b.json"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.NodeName != "from-b" || len(rc.Services) != 1 {
				t.Errorf("node=%q services=%d", rc.NodeName, len(rc.Services))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, err := load(t, append([]string{"-dev"}, tc.args...), files)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, rc)
		})
	}
}

func TestLoadFormatErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		files map[string]string
		is    error
		want  string // the whole message after the file name
	}{
		{"hcl wrong type", []string{"-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": "ports {\n  http = \"8500\"\n}"},
			ErrConfigFile, "c.hcl: ports.http: expected a number, got string"},
		{"hcl wrong type at top", []string{"-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": `server = "yes"`},
			ErrConfigFile, "c.hcl: server: expected a boolean, got string"},
		{"hcl list for a string", []string{"-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": `node_name = ["a"]`},
			ErrConfigFile, "c.hcl: node_name: expected a string, got array"},
		{"hcl syntax", []string{"-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": "ports {\n http = \n"},
			ErrConfigFile, "c.hcl: invalid HCL: "},
		{"hcl block twice", []string{"-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": "ports { http = 1 }\nports { grpc = 2 }"},
			ErrConfigFile, "c.hcl: ports: expected one block, got 2: merge them into one"},
		{"hcl unknown key", []string{"-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": "ports { htpp = 1 }"},
			ErrInvalidConfigKey, "invalid config key ports.htpp in $DIR/c.hcl"},
		{"-hcl wrong type", []string{"-hcl", `ports { http = true }`}, nil,
			ErrConfigFile, "-hcl fragment 1: ports.http: expected a number, got bool"},
		{"-hcl unknown key", []string{"-hcl", `bogus = 1`}, nil,
			ErrInvalidConfigKey, "invalid config key bogus in -hcl fragment 1"},
		{"service not an object", []string{"-config-file", "$DIR/c.json"}, map[string]string{"c.json": `{"service": "web"}`},
			ErrConfigFile, "c.json: service: expected an object, got string"},
		{"services of strings", []string{"-config-file", "$DIR/c.hcl"}, map[string]string{"c.hcl": `services = ["web"]`},
			ErrConfigFile, "c.hcl: services: expected an object, got string"},
		{"json wrong type keeps its line", []string{"-config-file", "$DIR/c.json"}, map[string]string{"c.json": "{\n\"ports\": {\"http\": \"8500\"}}"},
			ErrConfigFile, "c.json: ports.http: expected a number, got string (line 2)"},
		{"json in an hcl-forced dir is still json", []string{"-config-format", "json", "-config-dir", "$DIR/d"}, map[string]string{"d/a.hcl": `server = true`},
			ErrConfigFile, "a.hcl: invalid JSON at line 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := load(t, append([]string{"-dev"}, tc.args...), tc.files)
			if !errors.Is(err, tc.is) {
				t.Fatalf("Load = %v, want %v", err, tc.is)
			}
			msg := err.Error()
			want := tc.want
			if i := strings.Index(want, "$DIR/"); i >= 0 {
				// The temp dir differs per run: compare around it.
				if !strings.HasPrefix(msg, want[:i]) || !strings.HasSuffix(msg, want[i+len("$DIR"):]) {
					t.Fatalf("error %q, want %q", msg, want)
				}
				return
			}
			if !strings.HasSuffix(msg, want) && !strings.Contains(msg, want) {
				t.Fatalf("error %q, want it to end in %q", msg, want)
			}
		})
	}
}

// TestLoadConsulSampleHCL loads the example configuration file of Consul's
// agent configuration reference as it is printed there.
func TestLoadConsulSampleHCL(t *testing.T) {
	const sample = `datacenter = "east-aws"
data_dir = "/opt/consul"
log_level = "INFO"
node_name = "foobar"
server = true
watches = [
  {
    type = "checks"
    handler = "/usr/bin/health-check-handler.sh"
  }
]

telemetry {
  statsite_address = "127.0.0.1:2180"
}
`
	dir := t.TempDir()
	writeFile(t, dir, "consul.hcl", sample)
	rc, warnings, err := Load(LoadOptions{
		Args:     []string{"-config-file", dir + "/consul.hcl", "-bind", "127.0.0.1"},
		Hostname: fixedHost("h"),
		ReadOnly: true, // /opt/consul is not ours to write a node ID in
	})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Datacenter != "east-aws" || rc.DataDir != "/opt/consul" || rc.Logging.Level != "info" || rc.NodeName != "foobar" || !rc.ServerMode {
		t.Errorf("read %+v", rc)
	}
	if rc.NodeID != "" {
		t.Errorf("ReadOnly resolved a node ID %q", rc.NodeID)
	}
	if all := strings.Join(warnings, "\n"); !strings.Contains(all, "telemetry") || strings.Contains(all, "watches") {
		t.Errorf("warnings %q: want telemetry named, watches not (they run)", warnings)
	}
	want := []map[string]any{{"type": "checks", "handler": "/usr/bin/health-check-handler.sh"}}
	if !reflect.DeepEqual(rc.Watches, want) {
		t.Errorf("watches = %#v, want %#v", rc.Watches, want)
	}
}
