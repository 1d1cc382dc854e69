package agent

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/trellis-mesh/trellis/telemetry"
)

// promValue returns the value of the sample line that starts with series
// (a name with its labels, if any) in Prometheus text, and whether there
// is one.
func promValue(text, series string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		return v, err == nil
	}
	return 0, false
}

func TestMetricsAfterKVWrite(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	_, url, stop := devAgent(t)
	defer stop()
	waitFor(t, "a leader", func() bool {
		code, body := get(t, url+"/v1/status/leader")
		return code == 200 && body != `""`
	})
	req, err := http.NewRequest(http.MethodPut, url+"/v1/kv/metrics-test", strings.NewReader("v"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT /v1/kv: %d", resp.StatusCode)
	}

	code, prom := get(t, url+"/v1/agent/metrics?format=prometheus")
	if code != 200 {
		t.Fatalf("prometheus metrics: %d", code)
	}
	for _, series := range []string{"consul_kvs_apply_count", "consul_raft_apply", "consul_raft_commitTime_count", "consul_raft_state_leader", "consul_raft_last_index", "consul_server_isLeader", "consul_rpc_request"} {
		if v, ok := promValue(prom, series); !ok || v <= 0 {
			t.Errorf("prometheus %s = %v (present %v), want > 0", series, v, ok)
		}
	}
	for _, series := range []string{"consul_serf_member_join", "consul_serf_member_flap", "consul_serf_member_failed", "consul_serf_member_left", "consul_serf_member_update", "consul_raft_leader_lastContact_count", "consul_catalog_register_count", "consul_xds_server_streams"} {
		if _, ok := promValue(prom, series); !ok {
			t.Errorf("prometheus %s missing", series)
		}
	}

	code, body := get(t, url+"/v1/agent/metrics")
	if code != 200 {
		t.Fatalf("json metrics: %d", code)
	}
	var sum telemetry.Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		t.Fatalf("json metrics: %v: %.300s", err, body)
	}
	find := func(vs []telemetry.SampledValue, name string) *telemetry.SampledValue {
		for i := range vs {
			if vs[i].Name == name {
				return &vs[i]
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		in   []telemetry.SampledValue
	}{
		{"consul.raft.apply", sum.Counters},
		{"consul.kvs.apply", sum.Samples},
		{"consul.raft.commitTime", sum.Samples},
	} {
		if v := find(tc.in, tc.name); v == nil || v.Count <= 0 || v.Sum <= 0 {
			t.Errorf("json %s = %+v, want a positive Count and Sum", tc.name, v)
		}
	}
	leader := false
	for _, g := range sum.Gauges {
		if g.Name == "consul.raft.last_index" && g.Value > 0 {
			leader = true
		}
	}
	if !leader {
		t.Errorf("json gauges lack a positive consul.raft.last_index: %+v", sum.Gauges)
	}
	// Consul's runtime gauges, named with the host name as Consul's are.
	runtimeGauge := "consul." + metricsHostname() + ".runtime.alloc_bytes"
	found := false
	for _, g := range sum.Gauges {
		found = found || (g.Name == runtimeGauge && g.Value > 0)
	}
	if !found {
		t.Errorf("json gauges lack a positive %s", runtimeGauge)
	}
}
