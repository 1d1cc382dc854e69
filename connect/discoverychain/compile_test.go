package discoverychain

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const testTrustDomain = "11111111-2222-3333-4444-555555555555.consul"

func httpDefaults(names ...string) []structs.ConfigEntry {
	var out []structs.ConfigEntry
	for _, n := range names {
		out = append(out, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: n, Protocol: "http"})
	}
	return out
}

func TestCompileGolden(t *testing.T) {
	cases := []struct {
		name    string
		service string
		req     func(*CompileRequest)
		entries []structs.ConfigEntry
	}{
		{name: "plain", service: "web"},
		{
			name: "split", service: "web",
			entries: append(httpDefaults("web", "web-v2"),
				&structs.ServiceSplitterConfigEntry{Name: "web", Splits: []structs.ServiceSplit{
					{Weight: 90}, {Weight: 10, Service: "web-v2", RequestHeaders: &structs.HTTPHeaderModifiers{Set: map[string]string{"x-canary": "1"}}},
				}}),
		},
		{
			name: "routed", service: "web",
			entries: append(httpDefaults("web", "api", "admin"),
				&structs.ServiceRouterConfigEntry{Name: "web", Routes: []structs.ServiceRoute{
					{
						Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/api", Methods: []string{"GET"}}},
						Destination: &structs.ServiceRouteDestination{Service: "api", PrefixRewrite: "/", RequestTimeout: structs.Duration(2 * time.Second), NumRetries: 3, RetryOnConnectFailure: true, RetryOnStatusCodes: []uint32{503}},
					},
					{
						Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{Header: []structs.ServiceRouteHTTPMatchHeader{{Name: "x-admin", Present: true}}}},
						Destination: &structs.ServiceRouteDestination{Service: "admin"},
					},
				}}),
		},
		{
			name: "subsets", service: "web",
			entries: append(httpDefaults("web"),
				&structs.ServiceResolverConfigEntry{
					Name: "web", DefaultSubset: "v1", ConnectTimeout: structs.Duration(3 * time.Second),
					Subsets: map[string]structs.ServiceResolverSubset{
						"v1": {Filter: `Service.Meta.version == "v1"`},
						"v2": {Filter: `Service.Meta.version == "v2"`, OnlyPassing: true},
					},
				},
				&structs.ServiceSplitterConfigEntry{Name: "web", Splits: []structs.ServiceSplit{
					{Weight: 75, ServiceSubset: "v1"}, {Weight: 25, ServiceSubset: "v2"},
				}},
				&structs.ServiceRouterConfigEntry{Name: "web", Routes: []structs.ServiceRoute{{
					Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{QueryParam: []structs.ServiceRouteHTTPMatchQueryParam{{Name: "canary", Exact: "1"}}}},
					Destination: &structs.ServiceRouteDestination{ServiceSubset: "v2"},
				}}}),
		},
		{
			name: "redirect", service: "web",
			entries: []structs.ConfigEntry{
				&structs.ServiceResolverConfigEntry{Name: "web", Redirect: &structs.ServiceResolverRedirect{Service: "web-new", Datacenter: "dc2"}},
				&structs.ServiceConfigEntry{Name: "web-new", MeshGateway: structs.MeshGatewayConfig{Mode: "local"}},
			},
		},
		{
			name: "failover", service: "db",
			entries: []structs.ConfigEntry{
				&structs.ServiceResolverConfigEntry{Name: "db", Subsets: map[string]structs.ServiceResolverSubset{"primary": {Filter: `"primary" in Service.Tags`}},
					DefaultSubset: "primary",
					Failover: map[string]structs.ServiceResolverFailover{
						"*": {Datacenters: []string{"dc2", "dc3"}},
					}},
				&structs.ServiceResolverConfigEntry{Name: "cache", Failover: map[string]structs.ServiceResolverFailover{
					"*": {Targets: []structs.ServiceResolverFailoverTarget{{Service: "cache-backup"}, {Datacenter: "dc2"}}},
				}},
			},
		},
		{
			name: "failover-targets", service: "cache",
			entries: []structs.ConfigEntry{
				&structs.ServiceResolverConfigEntry{Name: "cache", LoadBalancer: &structs.LoadBalancer{Policy: "least_request"},
					Failover: map[string]structs.ServiceResolverFailover{
						"*": {Targets: []structs.ServiceResolverFailoverTarget{{Service: "cache-backup"}, {Datacenter: "dc2"}}},
					}},
			},
		},
		{
			name: "override-tcp", service: "web",
			req: func(r *CompileRequest) {
				r.OverrideProtocol = "tcp"
				r.OverrideConnectTimeout = 10 * time.Second
				r.OverrideMeshGateway = structs.MeshGatewayConfig{Mode: "remote"}
			},
			entries: append(httpDefaults("web", "api"),
				&structs.ServiceRouterConfigEntry{Name: "web", Routes: []structs.ServiceRoute{{
					Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathExact: "/x"}},
					Destination: &structs.ServiceRouteDestination{Service: "api"},
				}}}),
		},
		{
			name: "no-trust-domain", service: "web",
			req: func(r *CompileRequest) { r.EvaluateInTrustDomain = "" },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := CompileRequest{
				ServiceName:           tc.service,
				EvaluateInDatacenter:  "dc1",
				EvaluateInTrustDomain: testTrustDomain,
				Entries:               NewEntries().Add(tc.entries...),
			}
			if tc.req != nil {
				tc.req(&req)
			}
			chain, err := Compile(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(map[string]any{"Chain": chain}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("chain differs from %s (run with -update after checking):\n%s", path, got)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name    string
		service string
		entries []structs.ConfigEntry
		want    string
	}{
		{
			name: "router on tcp", service: "web",
			entries: []structs.ConfigEntry{&structs.ServiceRouterConfigEntry{Name: "web"}},
			want:    `discovery chain "web" uses a protocol "tcp" that does not permit advanced routing or splitting behavior`,
		},
		{
			name: "splitter on tcp via proxy-defaults", service: "web",
			entries: []structs.ConfigEntry{
				&structs.ProxyConfigEntry{Name: "global", Config: map[string]interface{}{"protocol": "tcp"}},
				&structs.ServiceSplitterConfigEntry{Name: "web", Splits: []structs.ServiceSplit{{Weight: 100, Service: "b"}}},
			},
			want: `discovery chain "web" uses a protocol "tcp" that does not permit advanced routing or splitting behavior`,
		},
		{
			name: "inconsistent protocols", service: "web",
			entries: append(httpDefaults("web"), &structs.ServiceSplitterConfigEntry{Name: "web", Splits: []structs.ServiceSplit{{Weight: 50}, {Weight: 50, Service: "b"}}}),
			want:    `discovery chain "web" uses inconsistent protocols; service "b" has "tcp" which is not "http"`,
		},
		{
			name: "redirect loop", service: "a",
			entries: []structs.ConfigEntry{
				&structs.ServiceResolverConfigEntry{Name: "a", Redirect: &structs.ServiceResolverRedirect{Service: "b"}},
				&structs.ServiceResolverConfigEntry{Name: "b", Redirect: &structs.ServiceResolverRedirect{Service: "a"}},
			},
			want: "detected circular resolver redirect: [a.default.default.dc1 -> b.default.default.dc1 -> a.default.default.dc1]",
		},
		{
			name: "missing subset", service: "web",
			entries: append(httpDefaults("web", "api"), &structs.ServiceRouterConfigEntry{Name: "web", Routes: []structs.ServiceRoute{{
				Destination: &structs.ServiceRouteDestination{Service: "api", ServiceSubset: "v9"},
			}}}),
			want: `service "api" does not have a subset named "v9"`,
		},
		{
			name: "splitter cycle", service: "a",
			entries: append(httpDefaults("a", "b"),
				&structs.ServiceSplitterConfigEntry{Name: "a", Splits: []structs.ServiceSplit{{Weight: 100, Service: "b"}}},
				&structs.ServiceSplitterConfigEntry{Name: "b", Splits: []structs.ServiceSplit{{Weight: 100, Service: "a"}}},
			),
			want: "detected circular reference: [splitter:a.default.default -> splitter:b.default.default -> splitter:a.default.default]",
		},
		{
			name: "external with subsets", service: "ext",
			entries: []structs.ConfigEntry{
				&structs.ServiceConfigEntry{Name: "ext", ExternalSNI: "ext.example.com"},
				&structs.ServiceResolverConfigEntry{Name: "ext", Subsets: map[string]structs.ServiceResolverSubset{"a": {}}},
			},
			want: `service "ext" has an external SNI set; cannot define subsets for external services`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(CompileRequest{
				ServiceName: tc.service, EvaluateInDatacenter: "dc1", EvaluateInTrustDomain: testTrustDomain,
				Entries: NewEntries().Add(tc.entries...),
			})
			var ge *GraphError
			if !errors.As(err, &ge) || err.Error() != tc.want {
				t.Fatalf("err = %v, want graph error %q", err, tc.want)
			}
		})
	}
	if _, err := Compile(CompileRequest{ServiceName: "web", Entries: NewEntries()}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("missing datacenter: %v", err)
	}
}

func TestCompileDoesNotShareInput(t *testing.T) {
	router := &structs.ServiceRouterConfigEntry{Name: "web", Routes: []structs.ServiceRoute{{
		Match: &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/a"}},
	}}}
	chain, err := Compile(CompileRequest{
		ServiceName: "web", EvaluateInDatacenter: "dc1",
		Entries: NewEntries().Add(append(httpDefaults("web"), router)...),
	})
	if err != nil {
		t.Fatal(err)
	}
	chain.Nodes["router:web.default.default"].Routes[0].Definition.Match.HTTP.PathPrefix = "/changed"
	if router.Routes[0].Match.HTTP.PathPrefix != "/a" {
		t.Fatal("compiled chain shares memory with the input entries")
	}
	if !strings.HasSuffix(chain.Targets["web.default.default.dc1"].SNI, ".internal.") {
		t.Fatalf("SNI without trust domain: %s", chain.Targets["web.default.default.dc1"].SNI)
	}
}

// TestCustomizationHash pins the hash to Consul's: consul/api's own test
// expects 98809527 for these overrides of a resolver with a 33s timeout.
func TestCustomizationHash(t *testing.T) {
	cases := []struct {
		name string
		req  func(*CompileRequest)
		want string
	}{
		{name: "no overrides", req: func(*CompileRequest) {}, want: ""},
		{name: "overrides equal to the chain's", req: func(r *CompileRequest) { r.OverrideProtocol = "tcp" }, want: ""},
		{name: "consul api test", want: "98809527", req: func(r *CompileRequest) {
			r.EvaluateInDatacenter = "dc2"
			r.OverrideMeshGateway = structs.MeshGatewayConfig{Mode: "local"}
			r.OverrideProtocol = "grpc"
			r.OverrideConnectTimeout = 22 * time.Second
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := CompileRequest{
				ServiceName:           "web",
				EvaluateInDatacenter:  "dc1",
				EvaluateInTrustDomain: testTrustDomain,
				Entries: NewEntries().Add(&structs.ServiceResolverConfigEntry{
					Kind: structs.ServiceResolver, Name: "web", ConnectTimeout: structs.Duration(33 * time.Second)}),
			}
			tc.req(&req)
			chain, err := Compile(req)
			if err != nil {
				t.Fatal(err)
			}
			if chain.CustomizationHash != tc.want {
				t.Fatalf("CustomizationHash = %q, want %q", chain.CustomizationHash, tc.want)
			}
		})
	}
}
