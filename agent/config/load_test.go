package config

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fixedHost(name string) func() (string, error) {
	return func() (string, error) { return name, nil }
}

func ifaces(cidrs ...string) func() ([]net.Addr, error) {
	return func() ([]net.Addr, error) {
		var out []net.Addr
		for _, c := range cidrs {
			ip, n, err := net.ParseCIDR(c)
			if err != nil {
				return nil, err
			}
			n.IP = ip
			out = append(out, n)
		}
		return out, nil
	}
}

// load runs Load with a fixed host name and interfaces; files maps names
// to contents written in a temp dir, and "$DIR" in args is replaced by it.
func load(t *testing.T, args []string, files map[string]string) (*RuntimeConfig, []string, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, name, content)
	}
	expanded := make([]string, len(args))
	for i, a := range args {
		expanded[i] = strings.ReplaceAll(a, "$DIR", dir)
	}
	return Load(LoadOptions{
		Args:           expanded,
		Hostname:       fixedHost("host-a"),
		InterfaceAddrs: ifaces("127.0.0.1/8", "10.1.2.3/24", "2001:db8::1/64"),
	})
}

func TestLoadDefaults(t *testing.T) {
	rc, warnings, err := load(t, []string{"-data-dir", "$DIR/data"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings = %q", warnings)
	}
	want := &RuntimeConfig{
		NodeName:   "host-a",
		NodeID:     rc.NodeID, // random, checked below
		Datacenter: "dc1",
		DataDir:    rc.DataDir,
		Addresses: Addresses{
			Bind: "0.0.0.0", SerfLAN: "0.0.0.0", Advertise: "10.1.2.3",
			Client: []string{"127.0.0.1"}, HTTP: []string{"127.0.0.1"}, GRPC: []string{"127.0.0.1"},
			DNS: []string{"127.0.0.1"}, HTTPS: []string{"127.0.0.1"}, GRPCTLS: []string{"127.0.0.1"},
		},
		Ports: Ports{HTTP: 8500, GRPC: 8502, Server: 8300, SerfLAN: 8301, SidecarMin: 21000, SidecarMax: 21255,
			DNS: 8600, HTTPS: -1, GRPCTLS: -1, SerfWAN: 8302},
		RetryInterval:             30 * time.Second,
		LeaveOnTerminate:          true,
		ReconnectTimeout:          72 * time.Hour,
		SessionTTLMin:             10 * time.Second,
		AEInterval:                time.Minute,
		SyncCoordinateIntervalMin: 15 * time.Second,
		CheckUpdateInterval:       5 * time.Minute,
		RaftMultiplier:            5,
		Limits:                    Limits{KVMaxValueSize: 512 * 1024, TxnMaxReqLen: 512 * 1024},
		Connect:                   Connect{Enabled: true, CAProvider: "consul", LeafCertTTL: 72 * time.Hour, RootCertTTL: 87600 * time.Hour},
		IntentionDefaultPolicy:    "allow",
		ACL: ACL{DefaultPolicy: "allow", DownPolicy: "extend-cache",
			TokenTTL: 30 * time.Second, PolicyTTL: 30 * time.Second, RoleTTL: 30 * time.Second},
		XDSUpdateMaxPerSecond: 250,
		Autopilot:             Autopilot{CleanupDeadServers: true, LastContactThreshold: 200 * time.Millisecond, MaxTrailingLogs: 250, ServerStabilizationTime: 10 * time.Second},
		DNS: DNS{Domain: "consul.", RecursorTimeout: 2 * time.Second, AllowStale: true, MaxStale: 87600 * time.Hour,
			UDPAnswerLimit: 3, NodeMetaTXT: true, SOA: SOA{Refresh: 3600, Retry: 600, Expire: 86400}},
		Encrypt: Encrypt{VerifyIncoming: true, VerifyOutgoing: true},
		Logging: Logging{Level: "info"},
		TLS:     TLS{ServerName: "server.dc1.consul"},
	}
	if !reflect.DeepEqual(rc, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", rc, want)
	}
	if !IsUUID(rc.NodeID) || rc.NodeID != strings.ToLower(rc.NodeID) {
		t.Fatalf("NodeID %q", rc.NodeID)
	}
}

func TestLoadDev(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, rc *RuntimeConfig)
	}{
		{"plain", []string{"-dev"}, func(t *testing.T, rc *RuntimeConfig) {
			if !rc.DevMode || !rc.ServerMode || !rc.Bootstrap || rc.DataDir != "" {
				t.Errorf("dev=%v server=%v bootstrap=%v datadir=%q", rc.DevMode, rc.ServerMode, rc.Bootstrap, rc.DataDir)
			}
			a := rc.Addresses
			if a.Bind != "127.0.0.1" || a.Advertise != "127.0.0.1" || !reflect.DeepEqual(a.HTTP, []string{"127.0.0.1"}) {
				t.Errorf("addresses %+v", a)
			}
			if rc.NodeName != "host-a" || rc.RaftMultiplier != 1 || rc.Logging.Level != "debug" || !rc.Connect.Enabled {
				t.Errorf("node=%q raft=%d level=%q connect=%v", rc.NodeName, rc.RaftMultiplier, rc.Logging.Level, rc.Connect.Enabled)
			}
			if rc.HTTPAddrForClients() != "127.0.0.1:8500" || rc.GRPCListenAddrs()[0] != "127.0.0.1:8502" {
				t.Errorf("http %q grpc %v", rc.HTTPAddrForClients(), rc.GRPCListenAddrs())
			}
		}},
		{"node and ports", []string{"-dev", "-node", "n1", "-http-port", "18500", "-grpc-port=-1"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.NodeName != "n1" || rc.Ports.HTTP != 18500 || rc.GRPCListenAddrs() != nil {
				t.Errorf("node=%q http=%d grpc=%v", rc.NodeName, rc.Ports.HTTP, rc.GRPCListenAddrs())
			}
		}},
		{"debug on, scripts off", []string{"-dev"}, func(t *testing.T, rc *RuntimeConfig) {
			if !rc.EnableDebug || rc.EnableScriptChecks || rc.EnableLocalScriptChecks {
				t.Errorf("debug=%v scripts=%v local=%v", rc.EnableDebug, rc.EnableScriptChecks, rc.EnableLocalScriptChecks)
			}
		}},
		{"script flags", []string{"-dev", "-enable-local-script-checks"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.EnableScriptChecks || !rc.EnableLocalScriptChecks {
				t.Errorf("scripts=%v local=%v", rc.EnableScriptChecks, rc.EnableLocalScriptChecks)
			}
		}},
		{"remote scripts imply local ones", []string{"-dev", "-hcl", "enable_script_checks = true\nenable_debug = false"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.EnableDebug || !rc.EnableScriptChecks || !rc.EnableLocalScriptChecks {
				t.Errorf("debug=%v scripts=%v local=%v", rc.EnableDebug, rc.EnableScriptChecks, rc.EnableLocalScriptChecks)
			}
		}},
		{"flags beat the dev overlay", []string{"-dev", "-bind", "127.0.0.2", "-log-level", "WARN", "-client", "0.0.0.0"}, func(t *testing.T, rc *RuntimeConfig) {
			if rc.Addresses.Bind != "127.0.0.2" || rc.Addresses.Advertise != "127.0.0.2" || rc.Logging.Level != "warn" {
				t.Errorf("bind=%q adv=%q level=%q", rc.Addresses.Bind, rc.Addresses.Advertise, rc.Logging.Level)
			}
			if rc.HTTPAddrForClients() != "127.0.0.1:8500" {
				t.Errorf("HTTPAddrForClients = %q", rc.HTTPAddrForClients())
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, err := load(t, tc.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, rc)
		})
	}
}

func TestLoadPrecedence(t *testing.T) {
	files := map[string]string{
		"a.json": `{"node_name": "from-a", "datacenter": "east", "retry_join": ["10.0.0.1"],
		            "node_meta": {"a": "1", "shared": "a"}, "ports": {"http": 9000, "grpc": 9002}, "log_level": "debug"}`,
		"b.json": `{"node_name": "from-b", "retry_join": ["10.0.0.2"], "node_meta": {"b": "2", "shared": "b"},
		            "ports": {"http": 9100}, "session_ttl_min": "1s", "Server": true, "DATA_DIR": "/tmp/x"}`,
		"d/10-first.json":  `{"retry_interval": "5s", "datacenter": "dir1"}`,
		"d/20-second.json": `{"datacenter": "dir2"}`,
		"d/notes.txt":      `not config`,
	}
	for _, tc := range []struct {
		name  string
		args  []string
		check func(t *testing.T, rc *RuntimeConfig)
	}{
		{"files in order", []string{"-config-file", "$DIR/a.json", "-config-file", "$DIR/b.json", "-data-dir", "$DIR/data"},
			func(t *testing.T, rc *RuntimeConfig) {
				if rc.NodeName != "from-b" || rc.Datacenter != "east" || rc.Ports.HTTP != 9100 || rc.Ports.GRPC != 9002 {
					t.Errorf("node=%q dc=%q http=%d grpc=%d", rc.NodeName, rc.Datacenter, rc.Ports.HTTP, rc.Ports.GRPC)
				}
				if !reflect.DeepEqual(rc.RetryJoin, []string{"10.0.0.1", "10.0.0.2"}) {
					t.Errorf("RetryJoin = %v (lists append across sources)", rc.RetryJoin)
				}
				if !reflect.DeepEqual(rc.NodeMeta, map[string]string{"a": "1", "b": "2", "shared": "b"}) {
					t.Errorf("NodeMeta = %v (maps merge)", rc.NodeMeta)
				}
				if rc.SessionTTLMin != time.Second || !rc.ServerMode || rc.Logging.Level != "debug" {
					t.Errorf("ttl=%v server=%v level=%q (keys match in any case)", rc.SessionTTLMin, rc.ServerMode, rc.Logging.Level)
				}
			}},
		{"reverse order", []string{"-config-file", "$DIR/b.json", "-config-file", "$DIR/a.json", "-data-dir", "$DIR/data"},
			func(t *testing.T, rc *RuntimeConfig) {
				if rc.NodeName != "from-a" || rc.Ports.HTTP != 9000 || rc.NodeMeta["shared"] != "a" {
					t.Errorf("node=%q http=%d shared=%q", rc.NodeName, rc.Ports.HTTP, rc.NodeMeta["shared"])
				}
				if !reflect.DeepEqual(rc.RetryJoin, []string{"10.0.0.2", "10.0.0.1"}) {
					t.Errorf("RetryJoin = %v", rc.RetryJoin)
				}
			}},
		{"flags win", []string{"-config-file", "$DIR/a.json", "-node", "flag-node", "-http-port", "9999",
			"-retry-join", "10.0.0.9", "-node-meta", "shared:flag", "-datacenter", "West", "-data-dir", "$DIR/data"},
			func(t *testing.T, rc *RuntimeConfig) {
				if rc.NodeName != "flag-node" || rc.Ports.HTTP != 9999 || rc.Datacenter != "west" || rc.NodeMeta["shared"] != "flag" {
					t.Errorf("node=%q http=%d dc=%q meta=%v", rc.NodeName, rc.Ports.HTTP, rc.Datacenter, rc.NodeMeta)
				}
				if !reflect.DeepEqual(rc.RetryJoin, []string{"10.0.0.1", "10.0.0.9"}) {
					t.Errorf("RetryJoin = %v", rc.RetryJoin)
				}
			}},
		{"config dir in lexical order", []string{"-config-dir", "$DIR/d", "-data-dir", "$DIR/data"},
			func(t *testing.T, rc *RuntimeConfig) {
				if rc.Datacenter != "dir2" || rc.RetryInterval != 5*time.Second || len(rc.ConfigFiles) != 2 {
					t.Errorf("dc=%q retry=%v files=%v", rc.Datacenter, rc.RetryInterval, rc.ConfigFiles)
				}
			}},
		{"config-file naming a dir, then a file", []string{"-config-file", "$DIR/d", "-config-file", "$DIR/a.json", "-data-dir", "$DIR/data"},
			func(t *testing.T, rc *RuntimeConfig) {
				if rc.Datacenter != "east" || rc.RetryInterval != 5*time.Second {
					t.Errorf("dc=%q retry=%v", rc.Datacenter, rc.RetryInterval)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, err := load(t, tc.args, files)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, rc)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		files map[string]string
		is    error
		want  []string // substrings of the message
	}{
		{"server without data dir", []string{"-server", "-bootstrap"}, nil, ErrInvalidConfig, []string{"data_dir cannot be empty"}},
		{"client without data dir", nil, nil, ErrInvalidConfig, []string{"data_dir cannot be empty"}},
		{"bootstrap and expect", []string{"-server", "-bootstrap", "-bootstrap-expect", "3", "-data-dir", "$DIR"}, nil,
			ErrInvalidConfig, []string{"mutually exclusive"}},
		{"expect without server", []string{"-bootstrap-expect", "3", "-data-dir", "$DIR"}, nil, ErrInvalidConfig, []string{"requires 'server = true'"}},
		{"bootstrap without server", []string{"-bootstrap", "-data-dir", "$DIR"}, nil, ErrInvalidConfig, []string{"requires 'server = true'"}},
		{"expect in dev", []string{"-dev", "-bootstrap=false", "-bootstrap-expect", "3"}, nil, ErrInvalidConfig, []string{"not allowed in dev mode"}},
		{"negative expect", []string{"-server", "-bootstrap-expect=-1", "-data-dir", "$DIR"}, nil, ErrInvalidConfig, []string{"greater than or equal to zero"}},
		{"port zero", []string{"-dev", "-http-port", "0"}, nil, ErrInvalidConfig, []string{"ports.http: invalid port 0"}},
		{"port too big", []string{"-dev", "-serf-lan-port", "70000"}, nil, ErrInvalidConfig, []string{"ports.serf_lan: invalid port 70000"}},
		{"grpc -2", []string{"-dev", "-grpc-port=-2"}, nil, ErrInvalidConfig, []string{"ports.grpc", "or -1 to disable"}},
		{"port clash", []string{"-dev", "-grpc-port", "8500"}, nil, ErrInvalidConfig, []string{"ports.http and ports.grpc both use port 8500"}},
		{"bad duration", []string{"-dev", "-retry-interval", "soon"}, nil, ErrInvalidConfig, []string{`retry_interval: invalid duration "soon"`}},
		{"bare number duration", []string{"-dev"}, map[string]string{"c.json": `{"session_ttl_min": "10"}`},
			ErrInvalidConfig, []string{"session_ttl_min: invalid duration"}},
		{"negative duration", []string{"-dev", "-retry-interval", "-5s"}, nil, ErrInvalidConfig, []string{"retry_interval cannot be negative"}},
		{"short reconnect timeout", []string{"-dev"}, map[string]string{"c.json": `{"reconnect_timeout": "1h"}`},
			ErrInvalidConfig, []string{"reconnect_timeout must be >= 8h0m0s"}},
		{"raft multiplier", []string{"-dev"}, map[string]string{"c.json": `{"performance": {"raft_multiplier": 11}}`},
			ErrInvalidConfig, []string{"raft_multiplier cannot be 11"}},
		{"bad datacenter", []string{"-dev", "-datacenter", "dc 1"}, nil, ErrInvalidConfig, []string{"datacenter \"dc 1\" can only contain"}},
		{"bad node id", []string{"-dev", "-node-id", "not-a-uuid"}, nil, ErrInvalidConfig, []string{`node_id "not-a-uuid" is not a valid UUID`}},
		{"bad log level", []string{"-dev", "-log-level", "loud"}, nil, ErrInvalidConfig, []string{`invalid log level "loud"`}},
		{"bind template", []string{"-dev", "-bind", `{{ GetPrivateIP }}`}, nil, ErrInvalidConfig, []string{"templates are not supported"}},
		{"bind two", []string{"-dev", "-bind", "127.0.0.1 127.0.0.2"}, nil, ErrInvalidConfig, []string{"cannot contain multiple addresses"}},
		{"bind hostname", []string{"-dev", "-bind", "localhost"}, nil, ErrInvalidConfig, []string{`bind_addr "localhost" is not an IP address`}},
		{"advertise wildcard", []string{"-dev", "-advertise", "0.0.0.0"}, nil, ErrInvalidConfig, []string{"advertise_addr cannot be 0.0.0.0"}},
		{"client junk", []string{"-dev", "-client", "127.0.0.1 nope"}, nil, ErrInvalidConfig, []string{`client_addr: "nope" is not an IP`}},
		{"cloud join", []string{"-dev", "-retry-join", "provider=aws tag_key=x"}, nil, ErrInvalidConfig, []string{"cloud auto-join is not supported"}},
		{"ca provider", []string{"-dev"}, map[string]string{"c.json": `{"connect": {"ca_provider": "vault"}}`},
			ErrInvalidConfig, []string{`connect.ca_provider "vault" is not supported`}},
		{"meta reserved", []string{"-dev", "-node-meta", "consul-x:1"}, nil, ErrInvalidConfig, []string{"reserved for internal use"}},
		{"meta flag form", []string{"-dev", "-node-meta", "novalue"}, nil, ErrInvalidFlag, []string{"key:value"}},
		{"several problems at once", []string{"-http-port", "0", "-retry-interval", "x"}, nil, ErrInvalidConfig,
			[]string{"data_dir cannot be empty", "ports.http", "retry_interval"}},
		{"unknown flag", []string{"-bogus"}, nil, ErrInvalidFlag, []string{"flag provided but not defined: -bogus"}},
		{"extra argument", []string{"-dev", "extra"}, nil, ErrInvalidFlag, []string{"unexpected arguments: extra"}},
		{"config format", []string{"-dev", "-config-format", "yaml"}, nil, ErrInvalidFlag, []string{"-config-format must be either 'hcl' or 'json'"}},
		{"unknown key", []string{"-dev", "-config-file", "$DIR/c.json"}, map[string]string{"c.json": `{"node_name": "x", "bogus_key": 1, "ports": {"htpp": 1}}`},
			ErrInvalidConfigKey, []string{"invalid config key bogus_key in", "invalid config key ports.htpp in"}},
		{"wrong type", []string{"-dev", "-config-file", "$DIR/c.json"}, map[string]string{"c.json": "{\n\"ports\": {\"http\": \"8500\"}}"},
			ErrConfigFile, []string{"ports.http: expected a number, got string (line 2)"}},
		{"not an object", []string{"-dev", "-config-file", "$DIR/c.json"}, map[string]string{"c.json": `[1]`},
			ErrConfigFile, []string{"must hold a JSON object"}},
		{"syntax", []string{"-dev", "-config-file", "$DIR/c.json"}, map[string]string{"c.json": "{\n\"a\": }"},
			ErrConfigFile, []string{"invalid JSON at line 2"}},
		{"unknown extension", []string{"-dev", "-config-file", "$DIR/c.conf"}, map[string]string{"c.conf": `server = true`},
			ErrConfigFile, []string{`extension ".conf" is not supported`, "-config-format"}},
		{"missing file", []string{"-dev", "-config-file", "$DIR/none.json"}, nil, ErrConfigFile, []string{"no such file"}},
		{"data dir is a file", []string{"-server", "-bootstrap", "-data-dir", "$DIR/f.json"}, map[string]string{"f.json": `{}`},
			ErrInvalidConfig, []string{"is not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.files == nil {
				tc.files = map[string]string{}
			}
			if _, ok := tc.files["c.json"]; ok && !argsMention(tc.args, "c.json") {
				tc.args = append(tc.args, "-config-file", "$DIR/c.json")
			}
			_, _, err := load(t, tc.args, tc.files)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %v does not wrap %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func argsMention(args []string, s string) bool {
	for _, a := range args {
		if strings.Contains(a, s) {
			return true
		}
	}
	return false
}

func TestLoadHelp(t *testing.T) {
	var out strings.Builder
	_, _, err := Load(LoadOptions{Args: []string{"-h"}, FlagOutput: &out})
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("err = %v, want ErrHelp", err)
	}
	for _, f := range []string{"-retry-join", "-bootstrap-expect", "-config-file", "-serf-lan-port", "-log-json"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage lacks %s", f)
		}
	}
}

func TestLoadWarnings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		files   map[string]string
		want    []string // substrings, each expected in some warning
		ignored string   // the exact list in the single 'not implemented' line, "" for none
	}{
		{"nothing to say", []string{"-dev"}, nil, nil, ""},
		{"ignored keys and flags, once", []string{"-dev", "-ui", "-encrypt", "", "-https-port", "8501",
			"-config-file", "$DIR/a.json", "-config-file", "$DIR/b.json"},
			map[string]string{
				"a.json": `{"telemetry": {"statsd_address": "x"}, "acl": {"enabled": false}, "tls": {"defaults": {}}, "segments": null, "version": "1.2.3"}`,
				"b.json": `{"acl": {"tokens": {"agent": "t"}}, "connect": {"ca_config": {"cluster_id": "11111111-2222-3333-4444-555555555555", "private_key_type": "rsa"}}}`,
			}, nil,
			"-ui, connect.ca_config.private_key_type, telemetry"},
		{"settings that only relax protection are accepted", []string{"-dev", "-config-file", "$DIR/a.json"},
			map[string]string{"a.json": `{"acl": {"enabled": false}, "encrypt": "", "encrypt_verify_incoming": false,
				"verify_incoming": false, "verify_outgoing": false, "tls": {"defaults": {"verify_incoming": false}, "internal_rpc": {"verify_server_hostname": false}},
				"auto_encrypt": {"tls": false, "allow_tls": false}, "http_config": {"allow_write_http_from": []}}`},
			nil, ""},
		{"bootstrap expect 1", []string{"-server", "-bootstrap-expect", "1", "-data-dir", "$DIR/d"}, nil,
			[]string{"bootstrap_expect is set to 1"}, ""},
		{"bootstrap expect even", []string{"-server", "-bootstrap-expect", "4", "-data-dir", "$DIR/d"}, nil,
			[]string{"even number of servers"}, ""},
		{"deprecated join", []string{"-dev", "-join", "127.0.0.1:1", "-config-file", "$DIR/a.json"},
			map[string]string{"a.json": `{"start_join": ["127.0.0.1:2"]}`},
			[]string{"-join flag is deprecated", "start_join key is deprecated"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, warnings, err := load(t, tc.args, tc.files)
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(warnings, "\n")
			for _, w := range tc.want {
				if !strings.Contains(all, w) {
					t.Errorf("warnings %q lack %q", warnings, w)
				}
			}
			var lines []string
			for _, w := range warnings {
				if strings.Contains(w, "not implemented by Trellis") {
					lines = append(lines, w)
				}
			}
			switch {
			case tc.ignored == "" && len(lines) != 0:
				t.Errorf("unexpected warning %q", lines)
			case tc.ignored != "" && (len(lines) != 1 || !strings.HasSuffix(lines[0], ": "+tc.ignored)):
				t.Errorf("not-implemented warnings = %q, want one ending in %q", lines, tc.ignored)
			}
			if tc.name == "bootstrap expect 1" && (!rc.Bootstrap || rc.BootstrapExpect != 0) {
				t.Errorf("bootstrap_expect 1 gave bootstrap=%v expect=%d", rc.Bootstrap, rc.BootstrapExpect)
			}
			if tc.name == "deprecated join" && !reflect.DeepEqual(rc.RetryJoin, []string{"127.0.0.1:2", "127.0.0.1:1"}) {
				t.Errorf("RetryJoin = %v", rc.RetryJoin)
			}
		})
	}
}

func TestAdvertiseDetection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bind   string
		addrs  []string
		want   string
		errSub string
	}{
		{"one private v4", "0.0.0.0", []string{"127.0.0.1/8", "192.168.1.5/24", "8.8.8.8/32"}, "192.168.1.5", ""},
		{"cgnat", "0.0.0.0", []string{"100.64.3.4/10"}, "100.64.3.4", ""},
		{"none", "0.0.0.0", []string{"127.0.0.1/8", "8.8.8.8/32"}, "", "no private IPv4 address found"},
		{"several", "0.0.0.0", []string{"10.0.0.1/8", "172.16.0.1/12"}, "", "multiple private IPv4 addresses found (10.0.0.1, 172.16.0.1)"},
		{"v6 wildcard", "::", []string{"fd00::1/64", "2001:db8::7/64"}, "2001:db8::7", ""},
		{"explicit bind", "127.0.0.5", nil, "127.0.0.5", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, _, err := Load(LoadOptions{
				Args:           []string{"-dev", "-bind", tc.bind},
				Hostname:       fixedHost("h"),
				InterfaceAddrs: ifaces(tc.addrs...),
			})
			if tc.errSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errSub) {
					t.Fatalf("err = %v, want %q", err, tc.errSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rc.Addresses.Advertise != tc.want {
				t.Fatalf("Advertise = %q, want %q", rc.Addresses.Advertise, tc.want)
			}
		})
	}
}

func TestAddressLists(t *testing.T) {
	rc, _, err := load(t, []string{"-dev", "-client", "127.0.0.1 ::1", "-config-file", "$DIR/c.json"},
		map[string]string{"c.json": `{"addresses": {"http": "unix:///tmp/trellis.sock 127.0.0.2"}, "serf_lan": "127.0.0.3"}`})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rc.HTTPListenAddrs(), []string{"unix:///tmp/trellis.sock", "127.0.0.2:8500"}; !reflect.DeepEqual(got, want) {
		t.Errorf("HTTPListenAddrs = %v, want %v", got, want)
	}
	if got, want := rc.GRPCListenAddrs(), []string{"127.0.0.1:8502", "[::1]:8502"}; !reflect.DeepEqual(got, want) {
		t.Errorf("GRPCListenAddrs = %v, want %v", got, want)
	}
	if rc.SerfLANBindAddr() != "127.0.0.3:8301" || rc.RPCBindAddr() != "127.0.0.1:8300" || rc.SerfLANAdvertiseAddr() != "127.0.0.1:8301" {
		t.Errorf("serf %s rpc %s adv %s", rc.SerfLANBindAddr(), rc.RPCBindAddr(), rc.SerfLANAdvertiseAddr())
	}
	if rc.HTTPAddrForClients() != "unix:///tmp/trellis.sock" {
		t.Errorf("HTTPAddrForClients = %q", rc.HTTPAddrForClients())
	}
	if rc.ScaleRaft(time.Second) != time.Second {
		t.Errorf("ScaleRaft with multiplier %d", rc.RaftMultiplier)
	}
}

func TestLoadGoldenFileAsIs(t *testing.T) {
	// The literal bytes sdk/testutil writes (node_id is given, so nothing
	// is written to its data_dir).
	rc, warnings, err := Load(LoadOptions{Args: []string{"-config-file", filepath.Join("testdata", "testutil.json")}})
	if err != nil {
		t.Fatal(err)
	}
	if rc.DataDir != "/tmp/TestX/data" || rc.Ports.HTTP != 20002 || len(warnings) == 0 {
		t.Fatalf("DataDir=%q http=%d warnings=%q", rc.DataDir, rc.Ports.HTTP, warnings)
	}
	if _, err := os.Stat("/tmp/TestX/data/node-id"); err == nil {
		t.Fatal("a configured node_id must not be written to the data dir")
	}
}

func TestIntentionDefaultPolicyFollowsACLDefault(t *testing.T) {
	for _, tc := range []struct {
		file, want string
		wantErr    bool
	}{
		{`{}`, "allow", false},
		{`{"acl": {"default_policy": "deny"}}`, "deny", false},
		{`{"acl": {"default_policy": "Allow"}}`, "allow", false},
		{`{"acl": {"default_policy": "maybe"}}`, "", true},
	} {
		path := filepath.Join(t.TempDir(), "c.json")
		if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		rc, _, err := Load(LoadOptions{Args: []string{"-dev", "-node", "n", "-config-file", path}, FlagOutput: io.Discard})
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "acl.default_policy") {
				t.Errorf("%s: err = %v, want one naming acl.default_policy", tc.file, err)
			}
			continue
		}
		if err != nil || rc.IntentionDefaultPolicy != tc.want {
			t.Errorf("%s: policy %q, err %v; want %q", tc.file, rc.IntentionDefaultPolicy, err, tc.want)
		}
	}
}

func TestXDSUpdateRate(t *testing.T) {
	load := func(args ...string) *RuntimeConfig {
		t.Helper()
		rc, _, err := Load(LoadOptions{Args: args, FlagOutput: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	if got := load("-dev", "-node", "n").XDSUpdateMaxPerSecond; got != 0 {
		t.Errorf("-dev rate = %v, want 0 (off)", got)
	}
	path := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(path, []byte(`{"xds": {"update_max_per_second": 40}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := load("-dev", "-node", "n", "-config-file", path).XDSUpdateMaxPerSecond; got != 40 {
		t.Errorf("configured rate = %v, want 40", got)
	}
}

// TestAutopilotBlock: the autopilot block, in JSON or HCL, overrides
// Consul's defaults key by key; a bad duration is refused by name.
func TestAutopilotBlock(t *testing.T) {
	def := Autopilot{CleanupDeadServers: true, LastContactThreshold: 200 * time.Millisecond, MaxTrailingLogs: 250, ServerStabilizationTime: 10 * time.Second}
	for _, tc := range []struct {
		name, file, body string
		want             Autopilot
		wantErr          string
	}{
		{name: "defaults", file: "a.json", body: `{}`, want: def},
		{name: "json", file: "a.json", body: `{"autopilot": {"cleanup_dead_servers": false, "server_stabilization_time": "1ms", "min_quorum": 3}}`,
			want: Autopilot{LastContactThreshold: 200 * time.Millisecond, MaxTrailingLogs: 250, MinQuorum: 3, ServerStabilizationTime: time.Millisecond}},
		{name: "hcl", file: "a.hcl", body: "autopilot {\n  last_contact_threshold = \"1s\"\n  max_trailing_logs = 500\n}\n",
			want: Autopilot{CleanupDeadServers: true, LastContactThreshold: time.Second, MaxTrailingLogs: 500, ServerStabilizationTime: 10 * time.Second}},
		{name: "bad duration", file: "a.json", body: `{"autopilot": {"last_contact_threshold": "soon"}}`, wantErr: "autopilot.last_contact_threshold"},
		{name: "negative duration", file: "a.json", body: `{"autopilot": {"server_stabilization_time": "-1s"}}`, wantErr: "autopilot.server_stabilization_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			rc, warnings, err := Load(LoadOptions{Args: []string{"-dev", "-node", "n", "-config-file", path}, FlagOutput: io.Discard})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || rc.Autopilot != tc.want {
				t.Fatalf("autopilot %+v, err %v; want %+v", rc.Autopilot, err, tc.want)
			}
			for _, w := range warnings {
				if strings.Contains(w, "autopilot") {
					t.Fatalf("an honoured key is warned about: %s", w)
				}
			}
		})
	}
}

// TestLoadRefusesProtectionNotProvided: a setting that asks for protection
// Trellis does not provide is a start-up error naming the key (and the
// file it came from), never a warning the operator may miss.
func TestLoadRefusesProtectionNotProvided(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		file  string // a.json's content, when not empty
		wants []string
		hcl   string // a.hcl's content, when not empty
	}{
		{"auto_config", nil, `{"auto_config": {"enabled": true, "intro_token": "x"}}`, []string{"auto_config.enabled", "auto_config.intro_token"}, ""},
		{"write restriction", nil, `{"http_config": {"allow_write_http_from": ["127.0.0.0/8"]}}`, []string{"http_config.allow_write_http_from"}, ""},
		{"write restriction flag", []string{"-allow-write-http-from", "127.0.0.0/8"}, "", []string{"-allow-write-http-from"}, ""},
		{"blocked endpoints", nil, `{"http_config": {"block_endpoints": ["/v1/agent/self"]}}`, []string{"http_config.block_endpoints"}, ""},
		{"serf cidrs", nil, `{"serf_lan_allowed_cidrs": ["127.0.0.0/8"]}`, []string{"serf_lan_allowed_cidrs"}, ""},
		{"serf cidrs flag", []string{"-serf-lan-allowed-cidrs", "127.0.0.0/8"}, "", []string{"-serf-lan-allowed-cidrs"}, ""},
		{"case-insensitive", nil, `{"Auto_Config": {"Enabled": true}}`, []string{"auto_config.enabled"}, ""},
		{"hcl: auto_config", nil, "", []string{"auto_config.enabled"}, `auto_config { enabled = true }`},
		{"hcl: write restriction", nil, "", []string{"http_config.allow_write_http_from"}, `http_config { allow_write_http_from = ["127.0.0.0/8"] }`},
		{"hcl: serf cidrs", nil, "", []string{"serf_lan_allowed_cidrs"}, `serf_lan_allowed_cidrs = ["127.0.0.0/8"]`},
		{"hcl: case-insensitive", nil, "", []string{"auto_config.enabled"}, `Auto_Config { Enabled = true }`},
		{"-hcl fragment", []string{"-hcl", `auto_config { enabled = true }`}, "", []string{"auto_config.enabled", "-hcl fragment 1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-dev"}, tc.args...)
			var files map[string]string
			name := ""
			switch {
			case tc.file != "":
				name = "a.json"
				files = map[string]string{name: tc.file}
			case tc.hcl != "":
				name = "a.hcl"
				files = map[string]string{name: tc.hcl}
			}
			if name != "" {
				args = append(args, "-config-file", "$DIR/"+name)
			}
			rc, _, err := load(t, args, files)
			if !errors.Is(err, ErrProtectionNotProvided) {
				t.Fatalf("Load = %v, %v; want ErrProtectionNotProvided", rc, err)
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if name != "" && !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}
