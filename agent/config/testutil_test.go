package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The types below mirror Consul's sdk/testutil (sdk/testutil/server.go,
// TestServerConfig and friends) field for field, tags included, so that
// json.Marshal produces the exact file sdk/testutil hands to
// `consul agent -config-file`.
type tuPerformance struct {
	RaftMultiplier uint `json:"raft_multiplier,omitempty"`
}

type tuPorts struct {
	DNS          int `json:"dns,omitempty"`
	HTTP         int `json:"http,omitempty"`
	HTTPS        int `json:"https,omitempty"`
	SerfLan      int `json:"serf_lan,omitempty"`
	SerfWan      int `json:"serf_wan,omitempty"`
	Server       int `json:"server,omitempty"`
	GRPC         int `json:"grpc,omitempty"`
	GRPCTLS      int `json:"grpc_tls,omitempty"`
	ProxyMinPort int `json:"proxy_min_port,omitempty"`
	ProxyMaxPort int `json:"proxy_max_port,omitempty"`
}

type tuAddresses struct {
	HTTP string `json:"http,omitempty"`
}

type tuSegment struct {
	Name      string `json:"name"`
	Bind      string `json:"bind"`
	Port      int    `json:"port"`
	Advertise string `json:"advertise"`
}

type tuAudit struct {
	Enabled bool `json:"enabled,omitempty"`
}

type tuLocality struct {
	Region string `json:"region"`
	Zone   string `json:"zone"`
}

type tuTokens struct {
	Replication       string `json:"replication,omitempty"`
	Default           string `json:"default,omitempty"`
	Agent             string `json:"agent,omitempty"`
	InitialManagement string `json:"master,omitempty"`
	AgentRecovery     string `json:"agent_master,omitempty"`
}

type tuACLs struct {
	Enabled             bool     `json:"enabled,omitempty"`
	TokenReplication    bool     `json:"enable_token_replication,omitempty"`
	PolicyTTL           string   `json:"policy_ttl,omitempty"`
	TokenTTL            string   `json:"token_ttl,omitempty"`
	DownPolicy          string   `json:"down_policy,omitempty"`
	DefaultPolicy       string   `json:"default_policy,omitempty"`
	EnableKeyListPolicy bool     `json:"enable_key_list_policy,omitempty"`
	Tokens              tuTokens `json:"tokens,omitempty"`
	DisabledTTL         string   `json:"disabled_ttl,omitempty"`
}

type tuPeering struct {
	Enabled bool `json:"enabled,omitempty"`
}

type tuServerConfig struct {
	NodeName            string            `json:"node_name"`
	NodeID              string            `json:"node_id"`
	NodeMeta            map[string]string `json:"node_meta,omitempty"`
	NodeLocality        *tuLocality       `json:"locality,omitempty"`
	Performance         *tuPerformance    `json:"performance,omitempty"`
	Bootstrap           bool              `json:"bootstrap,omitempty"`
	Server              bool              `json:"server,omitempty"`
	Partition           string            `json:"partition,omitempty"`
	RetryJoin           []string          `json:"retry_join,omitempty"`
	DataDir             string            `json:"data_dir,omitempty"`
	Datacenter          string            `json:"datacenter,omitempty"`
	Segments            []tuSegment       `json:"segments"`
	DisableCheckpoint   bool              `json:"disable_update_check"`
	LogLevel            string            `json:"log_level,omitempty"`
	Bind                string            `json:"bind_addr,omitempty"`
	Addresses           *tuAddresses      `json:"addresses,omitempty"`
	Ports               *tuPorts          `json:"ports,omitempty"`
	RaftProtocol        int               `json:"raft_protocol,omitempty"`
	ACLDatacenter       string            `json:"acl_datacenter,omitempty"`
	PrimaryDatacenter   string            `json:"primary_datacenter,omitempty"`
	ACLDefaultPolicy    string            `json:"acl_default_policy,omitempty"`
	ACL                 tuACLs            `json:"acl,omitempty"`
	Encrypt             string            `json:"encrypt,omitempty"`
	CAFile              string            `json:"ca_file,omitempty"`
	CertFile            string            `json:"cert_file,omitempty"`
	KeyFile             string            `json:"key_file,omitempty"`
	VerifyIncoming      bool              `json:"verify_incoming,omitempty"`
	VerifyIncomingRPC   bool              `json:"verify_incoming_rpc,omitempty"`
	VerifyIncomingHTTPS bool              `json:"verify_incoming_https,omitempty"`
	VerifyOutgoing      bool              `json:"verify_outgoing,omitempty"`
	EnableScriptChecks  bool              `json:"enable_script_checks,omitempty"`
	Connect             map[string]any    `json:"connect,omitempty"`
	EnableDebug         bool              `json:"enable_debug,omitempty"`
	SkipLeaveOnInt      bool              `json:"skip_leave_on_interrupt"`
	Peering             *tuPeering        `json:"peering,omitempty"`
	Audit               *tuAudit          `json:"audit,omitempty"`
	Version             string            `json:"version,omitempty"`
}

// tuDefault is sdk/testutil's defaultServerConfig for a Consul >= 1.14
// (which is what our `version -format=json` makes it believe).
func tuDefault(dataDir string) *tuServerConfig {
	const nodeID = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
	return &tuServerConfig{
		NodeName:          "node-" + nodeID,
		NodeID:            nodeID,
		DisableCheckpoint: true,
		Performance:       &tuPerformance{RaftMultiplier: 1},
		Bootstrap:         true,
		Server:            true,
		LogLevel:          "debug",
		Bind:              "127.0.0.1",
		Addresses:         &tuAddresses{},
		Ports: &tuPorts{
			DNS: 20001, HTTP: 20002, HTTPS: 20003, SerfLan: 20004,
			SerfWan: 20005, Server: 20006, GRPC: 20007, GRPCTLS: 20008,
		},
		SkipLeaveOnInt: true,
		Connect: map[string]any{
			"enabled": true,
			"ca_config": map[string]any{
				"cluster_id": "11111111-2222-3333-4444-555555555555",
			},
		},
		Peering: &tuPeering{Enabled: true},
		Version: "1.22.0",
		DataDir: dataDir,
	}
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, string(b))
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTestutilGolden pins the exact bytes sdk/testutil writes, so that a
// change to the mirror above is noticed.
func TestTestutilGolden(t *testing.T) {
	b, err := json.Marshal(tuDefault("/tmp/TestX/data"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "testutil.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != strings.TrimSpace(string(want)) {
		t.Fatalf("marshalled testutil config:\n%s\nwant (testdata/testutil.json):\n%s", got, want)
	}
}

func TestLoadTestutilConfig(t *testing.T) {
	type check func(t *testing.T, rc *RuntimeConfig, warnings []string)
	for _, tc := range []struct {
		name     string
		edit     func(c *tuServerConfig)
		args     []string
		ignored  []string // expected in the single warning line
		checks   []check
		noWarned []string // must not be named as ignored
		refused  []string // Load must fail naming each of these
	}{
		{
			name:    "defaults",
			ignored: []string{"peering.enabled"},
			noWarned: []string{"version", "segments", "acl", "addresses", "disable_update_check",
				"skip_leave_on_interrupt", "connect"},
			checks: []check{func(t *testing.T, rc *RuntimeConfig, _ []string) {
				want := Ports{HTTP: 20002, GRPC: 20007, Server: 20006, SerfLAN: 20004,
					SidecarMin: 21000, SidecarMax: 21255,
					DNS: 20001, HTTPS: 20003, GRPCTLS: 20008, SerfWAN: 20005}
				if rc.Ports != want {
					t.Errorf("Ports = %+v, want %+v", rc.Ports, want)
				}
				if rc.NodeName != "node-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0" || rc.NodeID != "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0" {
					t.Errorf("node = %q / %q", rc.NodeName, rc.NodeID)
				}
				if !rc.ServerMode || !rc.Bootstrap || rc.BootstrapExpect != 0 || rc.DevMode {
					t.Errorf("roles: server=%v bootstrap=%v expect=%d dev=%v", rc.ServerMode, rc.Bootstrap, rc.BootstrapExpect, rc.DevMode)
				}
				if rc.RaftMultiplier != 1 || rc.Logging.Level != "debug" || !rc.SkipLeaveOnInterrupt || !rc.DisableUpdateCheck {
					t.Errorf("raft=%d log=%q skipLeave=%v noUpdate=%v", rc.RaftMultiplier, rc.Logging.Level, rc.SkipLeaveOnInterrupt, rc.DisableUpdateCheck)
				}
				if !rc.Connect.Enabled || rc.Connect.ClusterID != "11111111-2222-3333-4444-555555555555" {
					t.Errorf("Connect = %+v", rc.Connect)
				}
				if got := rc.HTTPListenAddrs(); !reflect.DeepEqual(got, []string{"127.0.0.1:20002"}) {
					t.Errorf("HTTPListenAddrs = %v", got)
				}
				if rc.RPCAdvertiseAddr() != "127.0.0.1:20006" || rc.SerfLANBindAddr() != "127.0.0.1:20004" {
					t.Errorf("rpc %s serf %s", rc.RPCAdvertiseAddr(), rc.SerfLANBindAddr())
				}
				if rc.Datacenter != "dc1" {
					t.Errorf("Datacenter = %q", rc.Datacenter)
				}
			}},
		},
		{
			name: "acl tokens and meta from a test callback",
			edit: func(c *tuServerConfig) {
				c.ACL.DefaultPolicy = "deny"
				c.ACL.Tokens.InitialManagement = "root"
				c.NodeMeta = map[string]string{"rack": "r1"}
				c.Datacenter = "DC2"
				c.Segments = []tuSegment{{Name: "alpha", Bind: "127.0.0.1", Port: 1}}
				c.Audit = &tuAudit{Enabled: true}
			},
			ignored: []string{"audit", "peering.enabled", "segments"},
			checks: []check{func(t *testing.T, rc *RuntimeConfig, _ []string) {
				if rc.Datacenter != "dc2" || rc.NodeMeta["rack"] != "r1" {
					t.Errorf("dc=%q meta=%v", rc.Datacenter, rc.NodeMeta)
				}
				// sdk/testutil writes the deprecated acl.tokens.master.
				if rc.ACL.Tokens.InitialManagement != "root" || rc.ACL.DefaultPolicy != "deny" {
					t.Errorf("ACL = %+v", rc.ACL)
				}
			}},
		},
		{
			// consul/api's ACL tests switch ACLs on in a callback.
			name: "acl from a test callback is read",
			edit: func(c *tuServerConfig) {
				c.ACL.Enabled = true
				c.ACL.DefaultPolicy = "deny"
				c.ACL.Tokens.InitialManagement = "root"
			},
			checks: []check{func(t *testing.T, rc *RuntimeConfig, _ []string) {
				if !rc.ACL.Enabled || rc.ACL.Tokens.InitialManagement != "root" || rc.ACL.DefaultPolicy != "deny" {
					t.Errorf("ACL = %+v", rc.ACL)
				}
			}},
		},
		{
			name: "tls from a test callback is read",
			edit: func(c *tuServerConfig) { c.CAFile = "/tmp/ca.pem" },
			checks: []check{func(t *testing.T, rc *RuntimeConfig, _ []string) {
				if p := rc.TLS.HTTPS; p.CAFile != "/tmp/ca.pem" || p.Keys.CAFile != "ca_file" {
					t.Errorf("TLS.HTTPS = %+v", p)
				}
			}},
			ignored: []string{"peering.enabled"},
		},
		{
			// sdk/testutil passes extra args after -config-file: flags win.
			name: "args override the file",
			args: []string{"-http-port", "20100", "-log-level", "info"},
			checks: []check{func(t *testing.T, rc *RuntimeConfig, _ []string) {
				if rc.Ports.HTTP != 20100 || rc.Logging.Level != "info" {
					t.Errorf("http=%d level=%q", rc.Ports.HTTP, rc.Logging.Level)
				}
			}},
			ignored: []string{"peering.enabled"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tuDefault(filepath.Join(dir, "data"))
			if tc.edit != nil {
				tc.edit(cfg)
			}
			file := writeJSON(t, dir, "config.json", cfg)
			rc, warnings, err := Load(LoadOptions{Args: append([]string{"-config-file", file}, tc.args...)})
			if tc.refused != nil {
				if !errors.Is(err, ErrProtectionNotProvided) {
					t.Fatalf("Load = %v, want ErrProtectionNotProvided", err)
				}
				for _, k := range tc.refused {
					if !strings.Contains(err.Error(), k) {
						t.Errorf("error does not name %q: %v", k, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			var line string
			n := 0
			for _, w := range warnings {
				if strings.Contains(w, "not implemented by Trellis") {
					line = w
					n++
				}
			}
			if n != 1 {
				t.Fatalf("want exactly one 'not implemented' warning, got %d: %q", n, warnings)
			}
			named := strings.Split(line[strings.LastIndex(line, ": ")+2:], ", ")
			for _, k := range tc.ignored {
				if !contains(named, k) {
					t.Errorf("warning does not name %q: %s", k, line)
				}
			}
			for _, k := range tc.noWarned {
				for _, n := range named {
					if n == k || strings.HasPrefix(n, k+".") {
						t.Errorf("warning names %q, which needs no warning: %s", n, line)
					}
				}
			}
			for _, c := range tc.checks {
				c(t, rc, warnings)
			}
			if rc.ConfigFiles[0] != file {
				t.Errorf("ConfigFiles = %v", rc.ConfigFiles)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestTestutilDurations makes sure the session and timing defaults survive
// a testutil file (it sets none of them).
func TestTestutilDurations(t *testing.T) {
	dir := t.TempDir()
	file := writeJSON(t, dir, "c.json", tuDefault(filepath.Join(dir, "data")))
	rc, _, err := Load(LoadOptions{Args: []string{"-config-file=" + file}})
	if err != nil {
		t.Fatal(err)
	}
	if rc.SessionTTLMin != 10*time.Second || rc.ReconnectTimeout != 72*time.Hour || rc.RetryInterval != 30*time.Second {
		t.Fatalf("durations: ttl=%v reconnect=%v retry=%v", rc.SessionTTLMin, rc.ReconnectTimeout, rc.RetryInterval)
	}
}
