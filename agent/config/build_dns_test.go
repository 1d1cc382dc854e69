package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoadDNS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		file    string
		check   func(*testing.T, *RuntimeConfig)
		wantErr string
	}{
		{name: "flags", args: []string{"-dns-port", "8653", "-domain", "Example.COM", "-alt-domain", "alt",
			"-recursor", "8.8.8.8", "-recursor", "[2001:db8::53]:5353", "-client", "127.0.0.2"},
			check: func(t *testing.T, rc *RuntimeConfig) {
				d := rc.DNS
				if d.Domain != "example.com." || d.AltDomain != "alt." ||
					!reflect.DeepEqual(d.Recursors, []string{"8.8.8.8:53", "[2001:db8::53]:5353"}) {
					t.Errorf("DNS = %+v", d)
				}
				if got := rc.DNSListenAddrs(); !reflect.DeepEqual(got, []string{"127.0.0.2:8653"}) {
					t.Errorf("DNSListenAddrs = %v", got)
				}
			}},
		{name: "dns_config", file: `{"addresses": {"dns": "127.0.0.3"}, "recursors": ["1.1.1.1:53"], "dns_config": {
			"allow_stale": false, "max_stale": "5s", "node_ttl": "10s", "service_ttl": {"*": "5s", "web": "30s"},
			"only_passing": true, "enable_truncate": true, "udp_answer_limit": 5, "a_record_limit": 2,
			"enable_additional_node_meta_txt": false, "disable_compression": true,
			"recursor_strategy": "random", "recursor_timeout": "1s",
			"soa": {"refresh": 1, "retry": 2, "expire": 3, "min_ttl": 4}}}`,
			check: func(t *testing.T, rc *RuntimeConfig) {
				want := DNS{Domain: "consul.", Recursors: []string{"1.1.1.1:53"}, RecursorRandom: true,
					RecursorTimeout: time.Second, NodeTTL: 10 * time.Second,
					ServiceTTL: map[string]time.Duration{"*": 5 * time.Second, "web": 30 * time.Second},
					MaxStale:   5 * time.Second, OnlyPassing: true, EnableTruncate: true, UDPAnswerLimit: 5, ARecordLimit: 2,
					DisableCompression: true, SOA: SOA{Refresh: 1, Retry: 2, Expire: 3, MinTTL: 4}}
				if !reflect.DeepEqual(rc.DNS, want) {
					t.Errorf("DNS =\n%+v, want\n%+v", rc.DNS, want)
				}
				if got := rc.DNSListenAddrs(); !reflect.DeepEqual(got, []string{"127.0.0.3:8600"}) {
					t.Errorf("DNSListenAddrs = %v", got)
				}
			}},
		{name: "disabled", args: []string{"-dns-port", "-1"}, check: func(t *testing.T, rc *RuntimeConfig) {
			if got := rc.DNSListenAddrs(); got != nil {
				t.Errorf("DNSListenAddrs = %v", got)
			}
		}},
		{name: "hostname recursor", args: []string{"-recursor", "dns.google"}, wantErr: `recursors: "dns.google" is not an IP address`},
		{name: "bad ttl", file: `{"dns_config": {"service_ttl": {"web": "soon"}}}`, wantErr: "dns_config.service_ttl.web: invalid duration"},
		{name: "bad strategy", file: `{"dns_config": {"recursor_strategy": "fastest"}}`, wantErr: "dns_config.recursor_strategy"},
		{name: "same alt domain", args: []string{"-alt-domain", "CONSUL"}, wantErr: "alt_domain \"CONSUL\" cannot be the same as domain"},
		{name: "negative limit", file: `{"dns_config": {"udp_answer_limit": -1}}`, wantErr: "dns_config.udp_answer_limit cannot be negative"},
		{name: "port clash with http", args: []string{"-dns-port", "8500"}, wantErr: "ports.http and ports.dns both use port 8500"},
		{name: "unknown dns_config key", file: `{"dns_config": {"only_pasing": true}}`, wantErr: "dns_config.only_pasing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-dev"}, tc.args...)
			var files map[string]string
			if tc.file != "" {
				files = map[string]string{"c.json": tc.file}
				args = append(args, "-config-file", "$DIR/c.json")
			}
			rc, warnings, err := load(t, args, files)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range warnings {
				if strings.Contains(w, "dns") || strings.Contains(w, "domain") || strings.Contains(w, "recursor") {
					t.Errorf("warning names a served DNS setting: %s", w)
				}
			}
			tc.check(t, rc)
		})
	}
}
