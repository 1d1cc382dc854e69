package query

import (
	"reflect"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

func TestMergeServiceConfig(t *testing.T) {
	pd := &structs.ProxyConfigEntry{
		Config: map[string]any{"protocol": "HTTP", "k": "v"}, Mode: structs.ProxyModeTransparent,
		MeshGateway: structs.MeshGatewayConfig{Mode: "local"}, Expose: structs.ExposeConfig{Checks: true},
	}
	cases := []struct {
		name      string
		pd        *structs.ProxyConfigEntry
		sd        *structs.ServiceConfigEntry
		upstreams []string
		want      *structs.ServiceConfigResponse
	}{
		{
			name: "nothing configured",
			want: &structs.ServiceConfigResponse{Protocol: "tcp"},
		},
		{
			name: "proxy-defaults only",
			pd:   pd,
			want: &structs.ServiceConfigResponse{
				ProxyConfig: map[string]any{"protocol": "HTTP", "k": "v"}, Protocol: "http", Mode: structs.ProxyModeTransparent,
				MeshGateway: structs.MeshGatewayConfig{Mode: "local"}, Expose: structs.ExposeConfig{Checks: true},
			},
		},
		{
			name: "service-defaults win where set",
			pd:   pd,
			sd: &structs.ServiceConfigEntry{Protocol: "grpc", Mode: structs.ProxyModeDirect,
				MutualTLSMode: structs.MutualTLSModeStrict},
			want: &structs.ServiceConfigResponse{
				ProxyConfig: map[string]any{"protocol": "grpc", "k": "v"}, Protocol: "grpc", Mode: structs.ProxyModeDirect,
				MutualTLSMode: structs.MutualTLSModeStrict, MeshGateway: structs.MeshGatewayConfig{Mode: "local"},
				Expose: structs.ExposeConfig{Checks: true},
			},
		},
		{
			name: "expose: checks ORed, paths kept unless service-defaults lists some",
			pd:   &structs.ProxyConfigEntry{Expose: structs.ExposeConfig{Paths: []structs.ExposePath{{Path: "/health", LocalPathPort: 8080, ListenerPort: 21500}}}},
			sd:   &structs.ServiceConfigEntry{Expose: structs.ExposeConfig{Checks: true}},
			want: &structs.ServiceConfigResponse{Protocol: "tcp",
				Expose: structs.ExposeConfig{Checks: true, Paths: []structs.ExposePath{{Path: "/health", LocalPathPort: 8080, ListenerPort: 21500}}}},
		},
		{
			name: "expose: service-defaults' paths replace proxy-defaults'",
			pd:   &structs.ProxyConfigEntry{Expose: structs.ExposeConfig{Checks: true, Paths: []structs.ExposePath{{Path: "/health", LocalPathPort: 8080, ListenerPort: 21500}}}},
			sd:   &structs.ServiceConfigEntry{Expose: structs.ExposeConfig{Paths: []structs.ExposePath{{Path: "/ready", LocalPathPort: 8080, ListenerPort: 21501}}}},
			want: &structs.ServiceConfigResponse{Protocol: "tcp",
				Expose: structs.ExposeConfig{Checks: true, Paths: []structs.ExposePath{{Path: "/ready", LocalPathPort: 8080, ListenerPort: 21501}}}},
		},
		{
			name: "access logs come from proxy-defaults, service-defaults has none",
			pd: &structs.ProxyConfigEntry{AccessLogs: structs.AccessLogsConfig{
				Enabled: true, Type: structs.FileLogSinkType, Path: "/var/log/envoy.log", TextFormat: "%START_TIME%",
			}},
			sd: &structs.ServiceConfigEntry{Protocol: "http"},
			want: &structs.ServiceConfigResponse{
				ProxyConfig: map[string]any{"protocol": "http"}, Protocol: "http",
				AccessLogs: structs.AccessLogsConfig{Enabled: true, Type: structs.FileLogSinkType, Path: "/var/log/envoy.log", TextFormat: "%START_TIME%"},
			},
		},
		{
			name: "upstream defaults overlaid with overrides",
			sd: &structs.ServiceConfigEntry{UpstreamConfig: &structs.UpstreamConfiguration{
				Defaults: &structs.UpstreamConfig{ConnectTimeoutMs: 1000, Protocol: "http"},
				Overrides: []*structs.UpstreamConfig{
					{Name: "api", ConnectTimeoutMs: 2000},
					{Name: "only-override", MeshGateway: structs.MeshGatewayConfig{Mode: "remote"}},
				},
			}},
			upstreams: []string{"api", "db"},
			want: &structs.ServiceConfigResponse{
				Protocol: "tcp",
				UpstreamConfigs: map[string]*structs.UpstreamConfig{
					"api":           {Name: "api", ConnectTimeoutMs: 2000, Protocol: "http"},
					"db":            {Name: "db", ConnectTimeoutMs: 1000, Protocol: "http"},
					"only-override": {Name: "only-override", ConnectTimeoutMs: 1000, Protocol: "http", MeshGateway: structs.MeshGatewayConfig{Mode: "remote"}},
				},
				UpstreamDefaults: &structs.UpstreamConfig{ConnectTimeoutMs: 1000, Protocol: "http"},
			},
		},
		{
			name: "override without defaults; unnamed upstream absent",
			sd: &structs.ServiceConfigEntry{UpstreamConfig: &structs.UpstreamConfiguration{
				Overrides: []*structs.UpstreamConfig{{Name: "api", Protocol: "http2"}},
			}},
			upstreams: []string{"api", "db"},
			want: &structs.ServiceConfigResponse{
				Protocol:        "tcp",
				UpstreamConfigs: map[string]*structs.UpstreamConfig{"api": {Name: "api", Protocol: "http2"}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := MergeServiceConfig(tc.pd, tc.sd, tc.upstreams)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if pd.Config["protocol"] != "HTTP" {
		t.Fatal("the proxy-defaults entry was modified")
	}
}
