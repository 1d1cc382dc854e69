package local

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

func dur(d time.Duration) structs.Duration { return structs.Duration(d) }

func ttlCheck() *structs.CheckType { return &structs.CheckType{TTL: dur(30 * time.Second)} }

func TestValidateServiceDefinition(t *testing.T) {
	cases := []struct {
		name      string
		def       *structs.ServiceDefinition
		wantField string // "" means valid
		wantMsg   string // exact message when set
		wantSub   string // substring of the message when set
	}{
		{name: "minimal", def: &structs.ServiceDefinition{Name: "web"}},
		{name: "nil", def: nil, wantField: "Name", wantMsg: "Missing service name"},
		{name: "missing name", def: &structs.ServiceDefinition{ID: "web1", Port: 80}, wantField: "Name", wantMsg: "Missing service name"},
		{name: "port above range", def: &structs.ServiceDefinition{Name: "web", Port: 70000}, wantField: "Port", wantSub: "Invalid Port: 70000"},
		{name: "port 65535", def: &structs.ServiceDefinition{Name: "web", Port: 65535}},
		{name: "multi-port", def: &structs.ServiceDefinition{Name: "web", Ports: structs.ServicePorts{
			{Name: "http", Port: 8080, Default: true}, {Name: "metrics", Port: 9090}}}},
		{name: "ports without a default", def: &structs.ServiceDefinition{Name: "web", Ports: structs.ServicePorts{{Name: "http", Port: 8080}}},
			wantField: "Ports", wantMsg: "Invalid Ports: one of the Ports must be marked as Default"},
		{name: "ports with two defaults", def: &structs.ServiceDefinition{Name: "web", Ports: structs.ServicePorts{
			{Name: "http", Port: 8080, Default: true}, {Name: "grpc", Port: 8081, Default: true}}},
			wantField: "Ports", wantMsg: "Invalid Ports: only one port can be marked as default"},
		{name: "port without a name", def: &structs.ServiceDefinition{Name: "web", Ports: structs.ServicePorts{{Port: 8080, Default: true}}},
			wantField: "Ports", wantMsg: "Invalid Ports: Ports.Name cannot be empty"},
		{name: "port name twice", def: &structs.ServiceDefinition{Name: "web", Ports: structs.ServicePorts{
			{Name: "http", Port: 8080, Default: true}, {Name: "http", Port: 8081}}},
			wantField: "Ports", wantMsg: `Invalid Ports: Ports.Name "http" has to be unique`},
		{name: "port zero", def: &structs.ServiceDefinition{Name: "web", Ports: structs.ServicePorts{{Name: "http", Default: true}}},
			wantField: "Ports", wantMsg: "Invalid Ports: Ports.Port must be non-zero"},
		{name: "port of ports above range", def: &structs.ServiceDefinition{Name: "web", Ports: structs.ServicePorts{{Name: "http", Port: 70000, Default: true}}},
			wantField: "Ports", wantSub: "exceeds the maximum port number"},
		// CONSUL-COMPAT: Consul accepts a negative service Port.
		{name: "negative port accepted", def: &structs.ServiceDefinition{Name: "web", Port: -1}},
		{name: "unspecified address", def: &structs.ServiceDefinition{Name: "web", Address: "0.0.0.0"}, wantField: "Address", wantMsg: "Invalid service address"},
		{name: "unspecified v6 address", def: &structs.ServiceDefinition{Name: "web", Address: "::"}, wantField: "Address", wantMsg: "Invalid service address"},
		{
			name:      "unknown check type",
			def:       &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{Name: "what am I"}},
			wantField: "Check.TTL", wantMsg: "Invalid check: TTL must be > 0 for TTL checks",
		},
		{
			name:      "http check without interval",
			def:       &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{HTTP: "http://127.0.0.1:1/"}},
			wantField: "Check.Interval", wantMsg: "Invalid check: Interval must be > 0 for Script, HTTP, H2PING, TCP, UDP or OSService checks",
		},
		{
			name:      "negative interval",
			def:       &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{TCP: "127.0.0.1:1", Interval: dur(-time.Second)}},
			wantField: "Check.Interval", wantSub: "Interval must be > 0",
		},
		{
			name:      "negative interval on a ttl check",
			def:       &structs.ServiceDefinition{Name: "web", Checks: structs.CheckTypes{ttlCheck(), {TTL: dur(time.Second), Interval: dur(-time.Second)}}},
			wantField: "Checks[1].Interval", wantSub: "Interval must be > 0",
		},
		{
			name:      "ttl and interval",
			def:       &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{TTL: dur(time.Second), Interval: dur(time.Second)}},
			wantField: "Check.Interval", wantMsg: "Invalid check: Interval and TTL cannot both be specified",
		},
		{
			name:      "alias with ttl",
			def:       &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{AliasService: "db", TTL: dur(time.Second)}},
			wantField: "Check.TTL", wantMsg: "Invalid check: TTL must be not be set for Alias checks",
		},
		{name: "alias check", def: &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{AliasService: "db"}}},
		{name: "grpc check", def: &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{GRPC: "127.0.0.1:1", Interval: dur(time.Second)}}},
		{name: "empty check block ignored", def: &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{}}},
		{
			name:      "bad check status",
			def:       &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{TTL: dur(time.Second), Status: "fine"}},
			wantField: "Check.Status", wantMsg: "Status for checks must 'passing', 'warning', 'critical'",
		},
		{
			name:      "weights",
			def:       &structs.ServiceDefinition{Name: "web", Weights: &structs.Weights{Passing: 0, Warning: 1}},
			wantField: "Weights", wantMsg: "Invalid Weights: Passing must be greater than 0",
		},
		{
			name:      "reserved meta key",
			def:       &structs.ServiceDefinition{Name: "web", Meta: map[string]string{"consul-x": "1"}},
			wantField: "Meta", wantSub: "Key prefix 'consul-' is reserved for internal use",
		},
		{
			name:      "bad lan_ipv4 tagged address",
			def:       &structs.ServiceDefinition{Name: "web", TaggedAddresses: map[string]structs.ServiceAddress{"lan_ipv4": {Address: "::1"}}},
			wantField: "TaggedAddresses.lan_ipv4", wantMsg: `Service tagged address "lan_ipv4" must be a valid ipv4 address`,
		},
		{
			name:      "connect-proxy without destination",
			def:       &structs.ServiceDefinition{Name: "p", Kind: structs.ServiceKindConnectProxy, Port: 21000},
			wantField: "Proxy.DestinationServiceName",
			wantMsg:   "1 error occurred:\n\t* Proxy.DestinationServiceName must be non-empty for Connect proxy services\n\n",
		},
		{
			name:      "connect-proxy without destination nor port",
			def:       &structs.ServiceDefinition{Name: "p", Kind: structs.ServiceKindConnectProxy},
			wantField: "Port",
			wantMsg: "2 errors occurred:\n\t* Port or SocketPath must be set for a connect-proxy\n\t" +
				"* Proxy.DestinationServiceName must be non-empty for Connect proxy services\n\n",
		},
		{
			name: "connect-proxy",
			def: &structs.ServiceDefinition{Name: "p", Kind: structs.ServiceKindConnectProxy, Port: 21000,
				Proxy: &structs.ConnectProxyConfig{DestinationServiceName: "web", Upstreams: []structs.Upstream{{DestinationName: "db", LocalBindPort: 9191}}}},
		},
		{
			name: "connect-proxy duplicate upstream bind",
			def: &structs.ServiceDefinition{Name: "p", Kind: structs.ServiceKindConnectProxy, Port: 21000,
				Proxy: &structs.ConnectProxyConfig{DestinationServiceName: "web", Upstreams: []structs.Upstream{
					{DestinationName: "db", LocalBindPort: 9191}, {DestinationName: "cache", LocalBindPort: 9191}}}},
			wantField: "Proxy.Upstreams[1]", wantSub: `"127.0.0.1:9191" is specified twice`,
		},
		{
			name: "connect-proxy upstream without port",
			def: &structs.ServiceDefinition{Name: "p", Kind: structs.ServiceKindConnectProxy, Port: 21000,
				Proxy: &structs.ConnectProxyConfig{DestinationServiceName: "web", Upstreams: []structs.Upstream{{DestinationName: "db"}}}},
			wantField: "Proxy.Upstreams[0]", wantSub: "upstream local bind port or local socket path must be defined and nonzero",
		},
		{
			name:      "mesh gateway without port",
			def:       &structs.ServiceDefinition{Name: "gw", Kind: structs.ServiceKindMeshGateway},
			wantField: "Port", wantMsg: "1 error occurred:\n\t* Port must be non-zero for a mesh-gateway\n\n",
		},
		{
			name:      "terminating gateway without port",
			def:       &structs.ServiceDefinition{Name: "gw", Kind: structs.ServiceKindTerminatingGateway},
			wantField: "Port", wantSub: "Port must be non-zero for a terminating-gateway",
		},
		{name: "ingress gateway without port", def: &structs.ServiceDefinition{Name: "gw", Kind: structs.ServiceKindIngressGateway}},
		{name: "mesh gateway", def: &structs.ServiceDefinition{Name: "gw", Kind: structs.ServiceKindMeshGateway, Port: 8443}},
		{
			name: "gateway with sidecar",
			def: &structs.ServiceDefinition{Name: "gw", Kind: structs.ServiceKindMeshGateway, Port: 8443,
				Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}},
			wantField: "Connect.SidecarService", wantSub: "A mesh-gateway cannot have a sidecar service defined",
		},
		{
			name: "gateway with upstreams",
			def: &structs.ServiceDefinition{Name: "gw", Kind: structs.ServiceKindTerminatingGateway, Port: 8443,
				Proxy: &structs.ConnectProxyConfig{Upstreams: []structs.Upstream{{DestinationName: "db", LocalBindPort: 1}}}},
			wantField: "Proxy.Upstreams", wantSub: "The Proxy.Upstreams configuration is invalid for a terminating-gateway",
		},
		{name: "unknown kind", def: &structs.ServiceDefinition{Name: "x", Kind: "api-thing"}, wantField: "Kind", wantSub: `Invalid service kind "api-thing"`},
		{
			name:      "connect native without port",
			def:       &structs.ServiceDefinition{Name: "web", Connect: &structs.ServiceDefinitionConnect{Native: true}},
			wantField: "Port", wantSub: "Port or SocketPath must be set for a Connect native service.",
		},
		{name: "connect native", def: &structs.ServiceDefinition{Name: "web", Port: 8080, Connect: &structs.ServiceDefinitionConnect{Native: true}}},
		{
			name: "sidecar with an ID",
			def: &structs.ServiceDefinition{Name: "web", Port: 8080,
				Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{ID: "mine"}}},
			wantField: "Connect.SidecarService.ID", wantSub: "A SidecarService cannot specify an ID as this is managed by the agent",
		},
		{
			name: "nested sidecar",
			def: &structs.ServiceDefinition{Name: "web", Port: 8080,
				Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{
					Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}}}},
			wantField: "Connect.SidecarService.Connect.SidecarService", wantSub: "cannot have a nested SidecarService",
		},
		{
			name: "sidecar check invalid",
			def: &structs.ServiceDefinition{Name: "web", Port: 8080,
				Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{Check: &structs.CheckType{Name: "x"}}}},
			wantField: "Connect.SidecarService.Check.TTL", wantMsg: "Invalid check in sidecar_service: TTL must be > 0 for TTL checks",
		},
		{
			name: "sidecar port above range",
			def: &structs.ServiceDefinition{Name: "web", Port: 8080,
				Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{Port: 99999}}},
			wantField: "Connect.SidecarService.Port", wantSub: "99999",
		},
		{
			name: "sidecar reserved meta",
			def: &structs.ServiceDefinition{Name: "web", Port: 8080,
				Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{Meta: map[string]string{"consul-x": "y"}}}},
			wantField: "Connect.SidecarService.Meta", wantSub: "Invalid SidecarService: Couldn't load metadata pair",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateServiceDefinition(tc.def)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("want a *ValidationError, got %T %v", err, err)
			}
			if ve.Field != tc.wantField {
				t.Errorf("field = %q, want %q (%s)", ve.Field, tc.wantField, ve.Reason)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Errorf("message = %q, want %q", err.Error(), tc.wantMsg)
			}
			if tc.wantSub != "" && !strings.Contains(err.Error(), tc.wantSub) {
				t.Errorf("message = %q, want it to contain %q", err.Error(), tc.wantSub)
			}
		})
	}
}

func expandOpts(local map[string]*structs.NodeService) ExpandOptions {
	return ExpandOptions{NodeName: "node1", SidecarMinPort: DefaultSidecarMinPort, SidecarMaxPort: DefaultSidecarMaxPort, LocalServices: ServiceMap(local)}
}

func TestExpandServiceDefaults(t *testing.T) {
	cases := []struct {
		name   string
		def    *structs.ServiceDefinition
		check  func(t *testing.T, exp *Expansion)
		expect *structs.NodeService
	}{
		{
			name: "id, weights, tags and meta default",
			def:  &structs.ServiceDefinition{Name: "web", Port: 80},
			expect: &structs.NodeService{ID: "web", Service: "web", Port: 80, Tags: []string{}, Meta: map[string]string{},
				Weights: &structs.Weights{Passing: 1, Warning: 1}},
		},
		{
			name: "ipv4 address gets lan_ipv4 and wan_ipv4 even with an explicit wan",
			def: &structs.ServiceDefinition{Name: "web", ID: "web1", Address: "10.0.0.7", Port: 8080, Tags: []string{"a"},
				TaggedAddresses: map[string]structs.ServiceAddress{"wan": {Address: "198.51.100.1", Port: 80}}},
			expect: &structs.NodeService{ID: "web1", Service: "web", Address: "10.0.0.7", Port: 8080, Tags: []string{"a"},
				Meta: map[string]string{}, Weights: &structs.Weights{Passing: 1, Warning: 1},
				TaggedAddresses: map[string]structs.ServiceAddress{
					"wan":      {Address: "198.51.100.1", Port: 80},
					"lan_ipv4": {Address: "10.0.0.7", Port: 8080},
					"wan_ipv4": {Address: "10.0.0.7", Port: 8080},
				}},
		},
		{
			name: "explicit lan_ipv4 kept",
			def: &structs.ServiceDefinition{Name: "web", Address: "10.0.0.7", Port: 1,
				TaggedAddresses: map[string]structs.ServiceAddress{"lan_ipv4": {Address: "10.0.0.8", Port: 2}}},
			check: func(t *testing.T, exp *Expansion) {
				ta := exp.Service.TaggedAddresses
				if ta["lan_ipv4"] != (structs.ServiceAddress{Address: "10.0.0.8", Port: 2}) || ta["wan_ipv4"] != (structs.ServiceAddress{Address: "10.0.0.7", Port: 1}) {
					t.Fatalf("tagged addresses = %v", ta)
				}
			},
		},
		{
			name: "ipv6 address",
			def:  &structs.ServiceDefinition{Name: "web", Address: "2001:db8::1", Port: 80},
			check: func(t *testing.T, exp *Expansion) {
				ta := exp.Service.TaggedAddresses
				if len(ta) != 2 || ta["lan_ipv6"].Address != "2001:db8::1" || ta["wan_ipv6"].Port != 80 {
					t.Fatalf("tagged addresses = %v", ta)
				}
			},
		},
		{
			name: "host name address gets no tagged addresses",
			def:  &structs.ServiceDefinition{Name: "web", Address: "web.example.com", Port: 80},
			check: func(t *testing.T, exp *Expansion) {
				if len(exp.Service.TaggedAddresses) != 0 {
					t.Fatalf("tagged addresses = %v", exp.Service.TaggedAddresses)
				}
			},
		},
		{
			name:   "connect native",
			def:    &structs.ServiceDefinition{Name: "web", Port: 8080, Connect: &structs.ServiceDefinitionConnect{Native: true}},
			expect: &structs.NodeService{ID: "web", Service: "web", Port: 8080, Tags: []string{}, Meta: map[string]string{}, Weights: &structs.Weights{Passing: 1, Warning: 1}, Connect: structs.ServiceConnect{Native: true}},
		},
		{
			name: "ingress gateway",
			def:  &structs.ServiceDefinition{Name: "ingress", Kind: structs.ServiceKindIngressGateway},
			check: func(t *testing.T, exp *Expansion) {
				if exp.Service.Kind != structs.ServiceKindIngressGateway || exp.Sidecar != nil {
					t.Fatalf("got %+v", exp.Service)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := ExpandService(tc.def, expandOpts(nil))
			if err != nil {
				t.Fatal(err)
			}
			if tc.expect != nil && !reflect.DeepEqual(exp.Service, tc.expect) {
				t.Fatalf("service:\n got %+v\nwant %+v", exp.Service, tc.expect)
			}
			if tc.check != nil {
				tc.check(t, exp)
			}
		})
	}
}

func TestExpandServiceJSONShape(t *testing.T) {
	exp, err := ExpandService(&structs.ServiceDefinition{Name: "web"}, expandOpts(nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(exp.Service)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Tags":[]`, `"Meta":{}`, `"Weights":{"Passing":1,"Warning":1}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON %s lacks %s", b, want)
		}
	}
}

func TestExpandServiceChecks(t *testing.T) {
	cases := []struct {
		name string
		def  *structs.ServiceDefinition
		want []*structs.HealthCheck
	}{
		{
			name: "single check gets service:<id>, ttl starts critical",
			def:  &structs.ServiceDefinition{Name: "web", ID: "web1", Tags: []string{"v1"}, Check: ttlCheck()},
			want: []*structs.HealthCheck{{Node: "node1", CheckID: "service:web1", Name: "Service 'web' check", Status: "critical",
				ServiceID: "web1", ServiceName: "web", ServiceTags: []string{"v1"}, Type: "ttl", Definition: structs.HealthCheckDefinition{TTL: dur(30 * time.Second)}}},
		},
		{
			name: "several checks get :1, :2; Status, names, notes, IDs and interval strings",
			def: &structs.ServiceDefinition{Name: "web", Checks: structs.CheckTypes{
				{HTTP: "http://127.0.0.1:8080/h", Interval: dur(10 * time.Second), Timeout: dur(time.Second), Status: "passing", Notes: "n"},
				{CheckID: "mine", Name: "tcp", TCP: "127.0.0.1:8080", Interval: dur(5 * time.Second)},
				{TTL: dur(time.Minute), Status: "warning"},
			}},
			want: []*structs.HealthCheck{
				{Node: "node1", CheckID: "service:web:1", Name: "Service 'web' check", Status: "passing", Notes: "n", ServiceID: "web", ServiceName: "web", ServiceTags: []string{},
					Type: "http", Interval: "10s", Timeout: "1s", Definition: structs.HealthCheckDefinition{HTTP: "http://127.0.0.1:8080/h", Interval: dur(10 * time.Second), Timeout: dur(time.Second)}},
				{Node: "node1", CheckID: "mine", Name: "tcp", Status: "critical", ServiceID: "web", ServiceName: "web", ServiceTags: []string{},
					Type: "tcp", Interval: "5s", Definition: structs.HealthCheckDefinition{TCP: "127.0.0.1:8080", Interval: dur(5 * time.Second)}},
				{Node: "node1", CheckID: "service:web:3", Name: "Service 'web' check", Status: "warning", ServiceID: "web", ServiceName: "web", ServiceTags: []string{},
					Type: "ttl", Definition: structs.HealthCheckDefinition{TTL: dur(time.Minute)}},
			},
		},
		{
			name: "Check and Checks together, empty blocks skipped",
			def:  &structs.ServiceDefinition{Name: "web", Check: &structs.CheckType{}, Checks: structs.CheckTypes{ttlCheck(), {}, ttlCheck()}},
			want: []*structs.HealthCheck{
				{Node: "node1", CheckID: "service:web:1", Name: "Service 'web' check", Status: "critical", ServiceID: "web", ServiceName: "web", ServiceTags: []string{}, Type: "ttl", Definition: structs.HealthCheckDefinition{TTL: dur(30 * time.Second)}},
				{Node: "node1", CheckID: "service:web:2", Name: "Service 'web' check", Status: "critical", ServiceID: "web", ServiceName: "web", ServiceTags: []string{}, Type: "ttl", Definition: structs.HealthCheckDefinition{TTL: dur(30 * time.Second)}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := ExpandService(tc.def, expandOpts(nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(exp.Checks) != len(tc.want) {
				t.Fatalf("got %d checks, want %d", len(exp.Checks), len(tc.want))
			}
			for i, lc := range exp.Checks {
				if !reflect.DeepEqual(lc.Check, tc.want[i]) {
					t.Errorf("check %d:\n got %+v\nwant %+v", i, lc.Check, tc.want[i])
				}
				if lc.Type == nil || lc.Type.Type() != lc.Check.Type {
					t.Errorf("check %d: runner definition %+v", i, lc.Type)
				}
			}
		})
	}
}

func TestExpandSidecar(t *testing.T) {
	def := &structs.ServiceDefinition{
		Name: "web", ID: "web1", Port: 8080, Tags: []string{"v1"}, Meta: map[string]string{"team": "a"},
		Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{
			Proxy: &structs.ConnectProxyConfig{Upstreams: []structs.Upstream{{DestinationName: "db", LocalBindPort: 9191}}},
		}},
	}
	exp, err := ExpandService(def, expandOpts(nil))
	if err != nil {
		t.Fatal(err)
	}
	if exp.Service.Connect != (structs.ServiceConnect{}) {
		t.Errorf("parent keeps a Connect block: %+v", exp.Service.Connect)
	}
	want := &structs.NodeService{
		Kind: structs.ServiceKindConnectProxy, ID: "web1-sidecar-proxy", Service: "web-sidecar-proxy",
		Tags: []string{"v1"}, Meta: map[string]string{"team": "a"}, Port: 21000,
		Weights: &structs.Weights{Passing: 1, Warning: 1},
		Proxy: structs.ConnectProxyConfig{
			DestinationServiceName: "web", DestinationServiceID: "web1",
			LocalServiceAddress: "127.0.0.1", LocalServicePort: 8080,
			Upstreams: []structs.Upstream{{DestinationName: "db", LocalBindPort: 9191}},
		},
		LocallyRegisteredAsSidecar: true,
	}
	if !reflect.DeepEqual(exp.Sidecar, want) {
		t.Fatalf("sidecar:\n got %+v\nwant %+v", exp.Sidecar, want)
	}
	wantChecks := []*structs.HealthCheck{
		{Node: "node1", CheckID: "service:web1-sidecar-proxy:1", Name: "Connect Sidecar Listening", Status: "critical",
			ServiceID: "web1-sidecar-proxy", ServiceName: "web-sidecar-proxy", ServiceTags: []string{"v1"}, Type: "tcp", Interval: "10s",
			Definition: structs.HealthCheckDefinition{TCP: "127.0.0.1:21000", Interval: dur(10 * time.Second)}},
		{Node: "node1", CheckID: "service:web1-sidecar-proxy:2", Name: "Connect Sidecar Aliasing web1", Status: "critical",
			ServiceID: "web1-sidecar-proxy", ServiceName: "web-sidecar-proxy", ServiceTags: []string{"v1"}, Type: "alias",
			Definition: structs.HealthCheckDefinition{AliasService: "web1"}},
	}
	if len(exp.SidecarChecks) != 2 {
		t.Fatalf("sidecar checks: %+v", exp.SidecarChecks)
	}
	for i := range wantChecks {
		if !reflect.DeepEqual(exp.SidecarChecks[i].Check, wantChecks[i]) {
			t.Errorf("sidecar check %d:\n got %+v\nwant %+v", i, exp.SidecarChecks[i].Check, wantChecks[i])
		}
	}
}

func TestExpandSidecarVariants(t *testing.T) {
	sidecarOf := func(sd *structs.ServiceDefinition) *structs.ServiceDefinition {
		return &structs.ServiceDefinition{Name: "web", Port: 8080, Address: "10.0.0.5",
			Connect: &structs.ServiceDefinitionConnect{SidecarService: sd}}
	}
	cases := []struct {
		name  string
		def   *structs.ServiceDefinition
		local map[string]*structs.NodeService
		check func(t *testing.T, exp *Expansion)
	}{
		{
			name: "own checks replace the defaults and Status sets the initial status",
			def:  sidecarOf(&structs.ServiceDefinition{Checks: structs.CheckTypes{{TTL: dur(time.Minute), Status: "passing"}}}),
			check: func(t *testing.T, exp *Expansion) {
				if len(exp.SidecarChecks) != 1 || exp.SidecarChecks[0].Check.CheckID != "service:web-sidecar-proxy" ||
					exp.SidecarChecks[0].Check.Status != "passing" || exp.SidecarChecks[0].Check.Type != "ttl" {
					t.Fatalf("checks: %+v", exp.SidecarChecks[0].Check)
				}
			},
		},
		{
			name: "inherits the parent address; the tcp check dials it; tagged addresses",
			def:  sidecarOf(&structs.ServiceDefinition{}),
			check: func(t *testing.T, exp *Expansion) {
				if exp.Sidecar.Address != "10.0.0.5" || exp.SidecarChecks[0].Check.Definition.TCP != "10.0.0.5:21000" ||
					exp.Sidecar.TaggedAddresses["lan_ipv4"] != (structs.ServiceAddress{Address: "10.0.0.5", Port: 21000}) {
					t.Fatalf("sidecar %+v, check %+v", exp.Sidecar, exp.SidecarChecks[0].Check)
				}
			},
		},
		{
			name: "explicit name, port, local service and tags",
			def: sidecarOf(&structs.ServiceDefinition{Name: "custom", Port: 30000, Tags: []string{"own"},
				Proxy: &structs.ConnectProxyConfig{LocalServiceAddress: "127.0.0.2", LocalServicePort: 9000}}),
			check: func(t *testing.T, exp *Expansion) {
				s := exp.Sidecar
				if s.Service != "custom" || s.Port != 30000 || s.Proxy.LocalServiceAddress != "127.0.0.2" ||
					s.Proxy.LocalServicePort != 9000 || !reflect.DeepEqual(s.Tags, []string{"own"}) {
					t.Fatalf("sidecar %+v", s)
				}
			},
		},
		{
			name: "parent socket path",
			def: &structs.ServiceDefinition{Name: "web", SocketPath: "/run/web.sock",
				Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}},
			check: func(t *testing.T, exp *Expansion) {
				if exp.Sidecar.Proxy.LocalServiceSocketPath != "/run/web.sock" || exp.Sidecar.Proxy.LocalServiceAddress != "" {
					t.Fatalf("proxy %+v", exp.Sidecar.Proxy)
				}
			},
		},
		{
			name: "first free port skips ports in use",
			def:  sidecarOf(&structs.ServiceDefinition{}),
			local: map[string]*structs.NodeService{
				"a-sidecar-proxy": {ID: "a-sidecar-proxy", Port: 21000},
				"b-sidecar-proxy": {ID: "b-sidecar-proxy", Port: 21002},
				"other":           {ID: "other", Port: 21001},
				"outside":         {ID: "outside", Port: 80},
			},
			check: func(t *testing.T, exp *Expansion) {
				if exp.Sidecar.Port != 21003 {
					t.Fatalf("port = %d, want 21003", exp.Sidecar.Port)
				}
			},
		},
		{
			name:  "re-registration keeps the port",
			def:   sidecarOf(&structs.ServiceDefinition{}),
			local: map[string]*structs.NodeService{"web-sidecar-proxy": {ID: "web-sidecar-proxy", Port: 21007}},
			check: func(t *testing.T, exp *Expansion) {
				if exp.Sidecar.Port != 21007 {
					t.Fatalf("port = %d, want 21007", exp.Sidecar.Port)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp, err := ExpandService(tc.def, expandOpts(tc.local))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, exp)
		})
	}
}

func TestExpandSidecarPortErrors(t *testing.T) {
	withSidecar := func(port int) *structs.ServiceDefinition {
		return &structs.ServiceDefinition{Name: "web", Port: 8080,
			Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{Port: port}}}
	}
	cases := []struct {
		name      string
		def       *structs.ServiceDefinition
		opts      ExpandOptions
		wantErr   error
		wantField string
	}{
		{
			name:    "range exhausted",
			def:     withSidecar(0),
			opts:    ExpandOptions{SidecarMinPort: 21000, SidecarMaxPort: 21000, LocalServices: ServiceMap{"x": {ID: "x", Port: 21000}}},
			wantErr: ErrNoSidecarPort,
		},
		{name: "auto-assignment disabled", def: withSidecar(0), opts: ExpandOptions{SidecarMinPort: -1, SidecarMaxPort: -1}, wantErr: ErrNoSidecarPort},
		{
			name:      "explicit port used by another local service",
			def:       withSidecar(21500),
			opts:      ExpandOptions{SidecarMinPort: 21000, SidecarMaxPort: 21255, LocalServices: ServiceMap{"api-sidecar-proxy": {ID: "api-sidecar-proxy", Port: 21500}}},
			wantErr:   ErrInvalid,
			wantField: "Connect.SidecarService.Port",
		},
		{name: "explicit port equal to the parent's", def: withSidecar(8080), opts: expandOpts(nil), wantErr: ErrInvalid, wantField: "Connect.SidecarService.Port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ExpandService(tc.def, tc.opts)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var ve *ValidationError
			if tc.wantField != "" && (!errors.As(err, &ve) || ve.Field != tc.wantField || !strings.Contains(ve.Reason, "already used by local service")) {
				t.Fatalf("err = %#v", err)
			}
		})
	}
	// Re-registering the same sidecar with its own explicit port is no
	// conflict with itself.
	local := map[string]*structs.NodeService{"web-sidecar-proxy": {ID: "web-sidecar-proxy", Port: 21500}}
	if _, err := ExpandService(withSidecar(21500), expandOpts(local)); err != nil {
		t.Fatalf("re-registration with the same port: %v", err)
	}
}

func TestExpandDoesNotModifyDefinition(t *testing.T) {
	def := &structs.ServiceDefinition{Name: "web", Port: 1, Check: ttlCheck(),
		Connect: &structs.ServiceDefinitionConnect{SidecarService: &structs.ServiceDefinition{}}}
	before := def.Clone()
	if _, err := ExpandService(def, expandOpts(nil)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(def, before) {
		t.Fatalf("definition modified:\n got %+v\nwant %+v", def, before)
	}
}

func TestCheckFromDefinition(t *testing.T) {
	cases := []struct {
		name      string
		def       *structs.CheckDefinition
		wantField string
		wantMsg   string
		want      *structs.HealthCheck
	}{
		{name: "missing name", def: &structs.CheckDefinition{CheckType: structs.CheckType{TTL: dur(time.Second)}}, wantField: "Name", wantMsg: "Missing check name"},
		{name: "bad status", def: &structs.CheckDefinition{CheckType: structs.CheckType{Name: "c", TTL: dur(time.Second), Status: "ok"}}, wantField: "Status", wantMsg: "Bad check status"},
		{name: "no type", def: &structs.CheckDefinition{CheckType: structs.CheckType{Name: "c"}}, wantField: "TTL", wantMsg: "Invalid check: TTL must be > 0 for TTL checks"},
		{
			name: "id defaults to the name, status to critical",
			def:  &structs.CheckDefinition{ServiceID: "web", CheckType: structs.CheckType{Name: "mem", TTL: dur(time.Second)}},
			want: &structs.HealthCheck{Node: "node1", CheckID: "mem", Name: "mem", Status: "critical", ServiceID: "web", Type: "ttl",
				Definition: structs.HealthCheckDefinition{TTL: dur(time.Second)}},
		},
		{
			name: "explicit id and status",
			def:  &structs.CheckDefinition{ID: "c1", CheckType: structs.CheckType{Name: "mem", HTTP: "http://x/", Interval: dur(time.Second), Status: "passing"}},
			want: &structs.HealthCheck{Node: "node1", CheckID: "c1", Name: "mem", Status: "passing", Type: "http", Interval: "1s",
				Definition: structs.HealthCheckDefinition{HTTP: "http://x/", Interval: dur(time.Second)}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hc, ct, err := CheckFromDefinition(tc.def, "node1")
			if tc.wantField != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != tc.wantField || ve.Reason != tc.wantMsg {
					t.Fatalf("err = %#v, want field %s %q", err, tc.wantField, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(hc, tc.want) {
				t.Fatalf("check:\n got %+v\nwant %+v", hc, tc.want)
			}
			if ct.CheckID != hc.CheckID {
				t.Fatalf("definition check ID %q", ct.CheckID)
			}
		})
	}
}
