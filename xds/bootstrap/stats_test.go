package bootstrap

import (
	"regexp"
	"strings"
	"testing"
)

// extractTags applies the regex tags to a stat name as Envoy does: a tag
// whose regex matches takes its value from the second capture group.
func extractTags(t *testing.T, cfg Config, stat string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, tag := range statsTags(cfg.withDefaults()) {
		if tag.GetRegex() == "" {
			continue
		}
		re, err := regexp.Compile(tag.GetRegex())
		if err != nil {
			t.Fatalf("tag %s: %v", tag.GetTagName(), err)
		}
		if re.NumSubexp() < 2 {
			t.Fatalf("tag %s has %d groups, Envoy needs the name part and the value", tag.GetTagName(), re.NumSubexp())
		}
		if m := re.FindStringSubmatch(stat); m != nil && m[2] != "" {
			got[tag.GetTagName()] = m[2]
		}
	}
	return got
}

func TestStatsTagsExtractConsulNames(t *testing.T) {
	const td = "11111111-2222-3333-4444-555555555555"
	// Without the deprecated consul.<tag> family: TestDeprecatedTagsMirror
	// checks it separately.
	cfg := Config{ProxyID: "web-sidecar-proxy", ProxyCluster: "web", OmitDeprecatedTags: true}
	for _, tc := range []struct {
		stat string
		want map[string]string
	}{
		{"cluster.api.default.dc1.internal." + td + ".consul.upstream_cx_total", map[string]string{
			"consul.destination.service": "api", "consul.destination.namespace": "default",
			"consul.destination.datacenter": "dc1", "consul.destination.routing_type": "internal",
			"consul.destination.trust_domain": td, "consul.destination.target": "api.default.dc1",
			"consul.destination.full_target": "api.default.dc1.internal." + td,
		}},
		{"cluster.v2.api.default.dc2.internal." + td + ".consul.upstream_rq_total", map[string]string{
			"consul.destination.service_subset": "v2", "consul.destination.service": "api",
			"consul.destination.namespace": "default", "consul.destination.datacenter": "dc2",
			"consul.destination.routing_type": "internal", "consul.destination.trust_domain": td,
			"consul.destination.target": "v2.api.default.dc2", "consul.destination.full_target": "v2.api.default.dc2.internal." + td,
		}},
		// Transparent-proxy passthrough clusters count as destinations.
		{"cluster.passthrough~api.default.dc1.internal." + td + ".consul.upstream_cx_total", map[string]string{
			"consul.destination.service": "api", "consul.destination.namespace": "default",
			"consul.destination.datacenter": "dc1", "consul.destination.routing_type": "internal",
			"consul.destination.trust_domain": td, "consul.destination.target": "api.default.dc1",
			"consul.destination.full_target": "api.default.dc1.internal." + td,
		}},
		{"cluster.3f9c1b~api.default.dc1.internal." + td + ".consul.upstream_cx_total", map[string]string{
			"consul.destination.custom_hash": "3f9c1b", "consul.destination.service": "api",
			"consul.destination.namespace": "default", "consul.destination.datacenter": "dc1",
			"consul.destination.routing_type": "internal", "consul.destination.trust_domain": td,
			"consul.destination.target": "3f9c1b~api.default.dc1", "consul.destination.full_target": "3f9c1b~api.default.dc1.internal." + td,
		}},
		{"tcp.upstream.db.default.default.dc1.downstream_cx_total", map[string]string{
			"consul.upstream.service": "db", "consul.upstream.namespace": "default",
			"consul.upstream.partition": "default", "consul.upstream.datacenter": "dc1",
		}},
		{"http.upstream.api.dc3.downstream_rq_total", map[string]string{
			"consul.upstream.service": "api", "consul.upstream.datacenter": "dc3",
		}},
		{"cluster.local_app.upstream_cx_total", map[string]string{}},
		{"listener.127.0.0.1_21000.downstream_cx_total", map[string]string{}},
	} {
		t.Run(tc.stat, func(t *testing.T) {
			got := extractTags(t, cfg, tc.stat)
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("tag %s = %q, want %q", k, got[k], v)
				}
			}
			for k, v := range got {
				if _, ok := tc.want[k]; !ok {
					t.Errorf("unexpected tag %s = %q", k, v)
				}
			}
		})
	}
}

func TestOmitDeprecatedTags(t *testing.T) {
	names := func(cfg Config) map[string]bool {
		out := map[string]bool{}
		for _, tag := range statsTags(cfg.withDefaults()) {
			if out[tag.GetTagName()] {
				t.Errorf("tag %s twice", tag.GetTagName())
			}
			out[tag.GetTagName()] = true
		}
		return out
	}
	all := names(Config{ProxyID: "p", ProxyCluster: "s"})
	trimmed := names(Config{ProxyID: "p", ProxyCluster: "s", OmitDeprecatedTags: true})
	for _, old := range []string{"consul.service", "consul.full_target", "consul.custom_hash"} {
		if !all[old] || trimmed[old] {
			t.Errorf("deprecated tag %s: present by default %v, present when omitted %v", old, all[old], trimmed[old])
		}
	}
	if all["consul.partition"] {
		t.Error("Consul never had a deprecated consul.partition tag")
	}
	if !trimmed["consul.destination.service"] || !trimmed["local_cluster"] {
		t.Error("omitting deprecated tags removed current ones")
	}
	if out, err := Generate(Config{ProxyID: "p", ProxyCluster: "s", OmitDeprecatedTags: true}); err != nil {
		t.Fatalf("Generate: %v\n%s", err, out)
	}
}

// TestDeprecatedTagsMirror checks that each consul.<tag> reads the same
// value as consul.destination.<tag> on a plain cluster name.
func TestDeprecatedTagsMirror(t *testing.T) {
	got := extractTags(t, Config{ProxyID: "p", ProxyCluster: "s"},
		"cluster.v2.api.default.dc2.internal.11111111-2222-3333-4444-555555555555.consul.upstream_rq_total")
	n := 0
	for k, v := range got {
		rest, ok := strings.CutPrefix(k, "consul.destination.")
		if !ok {
			continue
		}
		n++
		if got["consul."+rest] != v {
			t.Errorf("consul.%s = %q, consul.destination.%s = %q", rest, got["consul."+rest], rest, v)
		}
	}
	if n != 8 { // subset, service, namespace, datacenter, routing, trust domain, target, full target
		t.Errorf("%d destination tags matched, want 8: %v", n, got)
	}
}
