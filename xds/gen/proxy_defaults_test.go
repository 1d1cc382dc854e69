package gen

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"

	"github.com/trellis-mesh/trellis/structs"
)

// TestProxyDefaultsConfig: the global proxy-defaults' opaque Config
// applies to a sidecar's public side as Consul's agent merges it into the
// registration: its keys count unless the registration sets the same key.
func TestProxyDefaultsConfig(t *testing.T) {
	const localJSON = `{"name": "local_app", "type": "STATIC", "connectTimeout": "7s",
		"loadAssignment": {"clusterName": "local_app", "endpoints": [{"lbEndpoints": [{"endpoint": {"address": {"socketAddress": {"address": "127.0.0.1", "portValue": 8080}}}}]}]}}`
	tests := []struct {
		name     string
		defaults map[string]any
		own      map[string]any
		want     time.Duration // local_app's connect timeout
	}{
		{"generated default", nil, nil, 5 * time.Second},
		{"from proxy-defaults", map[string]any{"local_connect_timeout_ms": 1234}, nil, 1234 * time.Millisecond},
		{"registration wins", map[string]any{"local_connect_timeout_ms": 1234}, map[string]any{"local_connect_timeout_ms": 999}, 999 * time.Millisecond},
		{"escape hatch from proxy-defaults", map[string]any{"envoy_local_cluster_json": localJSON}, nil, 7 * time.Second},
		{"registration's key beats the defaults' escape hatch", map[string]any{"envoy_local_cluster_json": localJSON, "local_connect_timeout_ms": 1234},
			map[string]any{"envoy_local_cluster_json": ""}, 1234 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			if tc.defaults != nil {
				w.entries = append(w.entries, &structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal, Config: tc.defaults})
			}
			svc := sidecar("web")
			svc.Proxy.Config = tc.own
			res, err := Generate(snapshot(t, w, svc, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(res); err != nil {
				t.Fatal(err)
			}
			c, ok := res[ClusterType][localAppCluster].(*clusterv3.Cluster)
			if !ok {
				t.Fatalf("no local_app cluster")
			}
			if got := c.GetConnectTimeout().AsDuration(); got != tc.want {
				t.Errorf("local_app connect timeout %v, want %v", got, tc.want)
			}
		})
	}
}
