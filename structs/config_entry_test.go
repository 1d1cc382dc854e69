package structs

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDecodeConfigEntryJSON(t *testing.T) {
	cases := []struct {
		name    string
		body    string
		want    ConfigEntry
		wantErr string
	}{
		{
			name: "service-defaults camel case",
			body: `{"Kind":"service-defaults","Name":"web","Protocol":"HTTP","MeshGateway":{"Mode":"local"},"CreateIndex":7}`,
			want: &ServiceConfigEntry{Kind: ServiceDefaults, Name: "web", Protocol: "HTTP", MeshGateway: MeshGatewayConfig{Mode: "local"}, RaftIndex: RaftIndex{CreateIndex: 7}},
		},
		{
			name: "lower case keys and snake aliases",
			body: `{"kind":"service-router","name":"web","routes":[{"match":{"http":{"path_prefix":"/api","methods":["get"]}},"destination":{"service":"api","request_timeout":"3s","num_retries":"2"}}]}`,
			want: &ServiceRouterConfigEntry{Kind: ServiceRouter, Name: "web", Routes: []ServiceRoute{{
				Match:       &ServiceRouteMatch{HTTP: &ServiceRouteHTTPMatch{PathPrefix: "/api", Methods: []string{"get"}}},
				Destination: &ServiceRouteDestination{Service: "api", RequestTimeout: Duration(3 * time.Second), NumRetries: 2},
			}}},
		},
		{
			name: "resolver durations as strings and nanoseconds, map keys kept",
			body: `{"Kind":"service-resolver","Name":"db","ConnectTimeout":"15s","RequestTimeout":1000,"Subsets":{"v1":{"Filter":"Service.Meta.version == v1","only_passing":true}},"LoadBalancer":{"Policy":"ring_hash","HashPolicies":[{"Field":"cookie","FieldValue":"x","CookieConfig":{"TTL":"10s"}}]}}`,
			want: &ServiceResolverConfigEntry{
				Kind: ServiceResolver, Name: "db",
				ConnectTimeout: Duration(15 * time.Second), RequestTimeout: 1000,
				Subsets: map[string]ServiceResolverSubset{"v1": {Filter: "Service.Meta.version == v1", OnlyPassing: true}},
				LoadBalancer: &LoadBalancer{Policy: "ring_hash", HashPolicies: []HashPolicy{{
					Field: "cookie", FieldValue: "x", CookieConfig: &CookieConfig{TTL: 10 * time.Second},
				}}},
			},
		},
		{
			name: "proxy-defaults opaque config survives",
			body: `{"Kind":"proxy-defaults","Name":"global","Config":{"protocol":"http","local_connect_timeout_ms":1000,"nested":{"a_b":[1,"x"]}}}`,
			want: &ProxyConfigEntry{Kind: ProxyDefaults, Name: "global", Config: map[string]interface{}{
				"protocol": "http", "local_connect_timeout_ms": float64(1000),
				"nested": map[string]interface{}{"a_b": []interface{}{float64(1), "x"}},
			}},
		},
		{
			name: "mesh ignores kind",
			body: `{"Kind":"mesh","TransparentProxy":{"MeshDestinationsOnly":true}}`,
			want: &MeshConfigEntry{TransparentProxy: TransparentProxyMeshConfig{MeshDestinationsOnly: true}},
		},
		{
			name: "mesh request normalization, snake case",
			body: `{"Kind":"mesh","http":{"sanitize_x_forwarded_client_cert":true,"incoming":{"request_normalization":{"merge_slashes":true,"path_with_escaped_slashes_action":"REJECT_REQUEST"}}}}`,
			want: &MeshConfigEntry{HTTP: &MeshHTTPConfig{SanitizeXForwardedClientCert: true, Incoming: &MeshDirectionalHTTPConfig{
				RequestNormalization: &RequestNormalizationMeshConfig{MergeSlashes: true, PathWithEscapedSlashesAction: "REJECT_REQUEST"},
			}}},
		},
		{name: "no kind", body: `{"Name":"web"}`, wantErr: "Payload does not contain a kind/Kind key at the top level"},
		{name: "kind not a string", body: `{"Kind":5}`, wantErr: "Kind value in payload is not a string"},
		{name: "unknown kind", body: `{"Kind":"nope","Name":"x"}`, wantErr: "invalid config entry kind: nope"},
		{
			name:    "unknown keys are listed",
			body:    `{"Kind":"service-splitter","Name":"web","Bogus":1,"Splits":[{"Weight":100,"Whatever":true}]}`,
			wantErr: "2 errors occurred:\n\t* invalid config key \"Bogus\"\n\t* invalid config key \"Splits[0].Whatever\"\n\n",
		},
		{
			name:    "top-level namespace is enterprise",
			body:    `{"Kind":"service-defaults","Name":"web","Namespace":"default"}`,
			wantErr: "1 error occurred:\n\t* invalid config key \"Namespace\", namespaces are a consul enterprise feature\n\n",
		},
		{name: "wrong type", body: `{"Kind":"service-splitter","Name":"web","Splits":"x"}`, wantErr: "json: cannot unmarshal"},
		{name: "not an object", body: `[1]`, wantErr: "json: cannot unmarshal array"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeConfigEntryJSON([]byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want prefix %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestConfigEntryValidate(t *testing.T) {
	cases := []validateCase{
		{"proxy-defaults global", &ProxyConfigEntry{Name: "global"}, ""},
		{"mesh escaped slashes action", &MeshConfigEntry{HTTP: &MeshHTTPConfig{Incoming: &MeshDirectionalHTTPConfig{
			RequestNormalization: &RequestNormalizationMeshConfig{PathWithEscapedSlashesAction: "DECODE"},
		}}}, `invalid HTTP.Incoming.RequestNormalization.PathWithEscapedSlashesAction "DECODE": must be one of IMPLEMENTATION_SPECIFIC_DEFAULT, KEEP_UNCHANGED, REJECT_REQUEST, UNESCAPE_AND_REDIRECT, UNESCAPE_AND_FORWARD`},
		{"mesh headers with underscores action", &MeshConfigEntry{HTTP: &MeshHTTPConfig{Incoming: &MeshDirectionalHTTPConfig{
			RequestNormalization: &RequestNormalizationMeshConfig{HeadersWithUnderscoresAction: "DROP_HEADER"},
		}}}, ""},
		{"proxy-defaults other name", &ProxyConfigEntry{Name: "other"}, `invalid name ("other"), only "global" is supported`},
		{"service-defaults ok", &ServiceConfigEntry{Name: "web", Protocol: "http"}, ""},
		{"service-defaults no name", &ServiceConfigEntry{}, "Name is required"},
		{"service-defaults wildcard", &ServiceConfigEntry{Name: "*"}, "service-defaults name must be the name of a service, and not a wildcard"},
		{"service-defaults balance", &ServiceConfigEntry{Name: "web", BalanceInboundConnections: "x"},
			"1 error occurred:\n\t* invalid value for balance_inbound_connections: x\n\n"},
		{"service-defaults upstream override without name", &ServiceConfigEntry{Name: "web", UpstreamConfig: &UpstreamConfiguration{Overrides: []*UpstreamConfig{{Protocol: "http"}}}},
			"1 error occurred:\n\t* error in upstream override for : Name is required\n\n"},
		{"splitter sums to 100", &ServiceSplitterConfigEntry{Name: "web", Splits: []ServiceSplit{{Weight: 90}, {Weight: 10, Service: "b"}}}, ""},
		{"splitter sums to 90", &ServiceSplitterConfigEntry{Name: "web", Splits: []ServiceSplit{{Weight: 80}, {Weight: 10, Service: "b"}}},
			"the sum of all split weights must be 100, not 90.000000"},
		{"splitter duplicate", &ServiceSplitterConfigEntry{Name: "web", Splits: []ServiceSplit{{Weight: 50}, {Weight: 50, Service: "web"}}},
			`split destination occurs more than once: service="web", subset="", namespace="", partition=""`},
		{"splitter empty", &ServiceSplitterConfigEntry{Name: "web"}, "no splits configured"},
		{"router bad path", &ServiceRouterConfigEntry{Name: "web", Routes: []ServiceRoute{{Match: &ServiceRouteMatch{HTTP: &ServiceRouteHTTPMatch{PathExact: "x"}}}}},
			`Route[0] PathExact doesn't start with '/': "x"`},
		{"router two paths", &ServiceRouterConfigEntry{Name: "web", Routes: []ServiceRoute{{Match: &ServiceRouteMatch{HTTP: &ServiceRouteHTTPMatch{PathExact: "/x", PathPrefix: "/y"}}}}},
			"Route[0] should only contain at most one of PathExact, PathPrefix, or PathRegex"},
		{"router bad method", &ServiceRouterConfigEntry{Name: "web", Routes: []ServiceRoute{{Match: &ServiceRouteMatch{HTTP: &ServiceRouteHTTPMatch{Methods: []string{"FETCH"}}}}}},
			`Route[0] Methods contains an invalid method "FETCH"`},
		{"router header two matchers", &ServiceRouterConfigEntry{Name: "web", Routes: []ServiceRoute{{Match: &ServiceRouteMatch{HTTP: &ServiceRouteHTTPMatch{Header: []ServiceRouteHTTPMatchHeader{{Name: "x", Exact: "a", Prefix: "b"}}}}}}},
			"Route[0] Header[0] should only contain one of Present, Exact, Prefix, Suffix, or Regex"},
		{"router prefix rewrite needs path", &ServiceRouterConfigEntry{Name: "web", Routes: []ServiceRoute{{Destination: &ServiceRouteDestination{PrefixRewrite: "/"}}}},
			"Route[0] cannot make use of PrefixRewrite without configuring either PathExact or PathPrefix"},
		{"resolver subset filter ok", &ServiceResolverConfigEntry{Name: "db", Subsets: map[string]ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "v1"`}}}, ""},
		{"resolver subset filter broken", &ServiceResolverConfigEntry{Name: "db", Subsets: map[string]ServiceResolverSubset{"v1": {Filter: `Service.Meta.version ==`}}},
			`Filter for subset "v1" is not a valid expression: `},
		{"resolver subset name", &ServiceResolverConfigEntry{Name: "db", Subsets: map[string]ServiceResolverSubset{"V1": {}}},
			`Subset "V1" is invalid: must be 63 characters or fewer`},
		{"resolver default subset", &ServiceResolverConfigEntry{Name: "db", DefaultSubset: "v2"}, `DefaultSubset "v2" is not a valid subset`},
		{"resolver redirect and failover", &ServiceResolverConfigEntry{Name: "db", Redirect: &ServiceResolverRedirect{Service: "x"}, Failover: map[string]ServiceResolverFailover{"*": {Service: "y"}}},
			"Redirect and Failover cannot both be set"},
		{"resolver empty failover", &ServiceResolverConfigEntry{Name: "db", Failover: map[string]ServiceResolverFailover{"*": {}}},
			`Bad Failover["*"]: one of Service, ServiceSubset, Namespace, Targets, SamenessGroup, or Datacenters is required`},
		{"resolver negative timeout", &ServiceResolverConfigEntry{Name: "db", ConnectTimeout: -1},
			"Bad ConnectTimeout '-1ns', must be >= 0"},
		{"resolver lb", &ServiceResolverConfigEntry{Name: "db", LoadBalancer: &LoadBalancer{Policy: "fastest"}},
			`Bad LoadBalancer policy: "fastest" is not supported`},
		{"intentions bad action", &ServiceIntentionsConfigEntry{Name: "db", Sources: []*SourceIntention{{Name: "web", Action: "maybe", Type: IntentionSourceConsul}}},
			"Sources[0].Action must be set to 'allow' or 'deny'"},
		{"intentions no sources", &ServiceIntentionsConfigEntry{Name: "db"}, "At least one source is required"},
		{"intentions partial wildcard", &ServiceIntentionsConfigEntry{Name: "db", Sources: []*SourceIntention{{Name: "we*", Action: "allow", Type: IntentionSourceConsul}}},
			"Sources[0].Name: wildcard character '*' cannot be used with partial values"},
		{"intentions duplicate", &ServiceIntentionsConfigEntry{Name: "db", Sources: []*SourceIntention{
			{Name: "web", Action: "allow", Type: IntentionSourceConsul}, {Name: "web", Action: "deny", Type: IntentionSourceConsul}}},
			`Sources[1] defines "web" more than once`},
		{"intentions action with permissions", &ServiceIntentionsConfigEntry{Name: "db", Sources: []*SourceIntention{{Name: "web", Action: "allow", Type: IntentionSourceConsul,
			Permissions: []*IntentionPermission{{Action: "allow", HTTP: &IntentionHTTPPermission{PathPrefix: "/"}}}}}},
			"Sources[0].Action must be omitted if Permissions are specified"},
		{"intentions empty http", &ServiceIntentionsConfigEntry{Name: "db", Sources: []*SourceIntention{{Name: "web", Type: IntentionSourceConsul,
			Permissions: []*IntentionPermission{{Action: "allow", HTTP: &IntentionHTTPPermission{}}}}}},
			"Sources[0].Permissions[0].HTTP should not be empty"},
		{"ingress bad protocol", &IngressGatewayConfigEntry{Name: "in", Listeners: []IngressListener{{Port: 80, Protocol: "udp", Services: []IngressService{{Name: "web"}}}}},
			"protocol must be 'tcp', 'http', 'http2', or 'grpc'. 'udp' is an unsupported protocol"},
		{"terminating blank", &TerminatingGatewayConfigEntry{Name: "t", Services: []LinkedService{{}}}, "Service name cannot be blank."},
		{"meta too long", &ServiceRouterConfigEntry{Name: "web", Meta: map[string]string{strings.Repeat("k", 129): "v"}},
			"1 error occurred:\n\t* Meta key \"" + strings.Repeat("k", 129) + "\" exceeds maximum length 128\n\n"},
	}
	checkValidate(t, cases)
}

// validateCase is one entry and the error prefix its Normalize and
// Validate must give ("" for valid).
type validateCase struct {
	name  string
	entry ConfigEntry
	want  string
}

func checkValidate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.entry.Normalize()
			if err == nil {
				err = tc.entry.Validate()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("err = %v, want prefix %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "PRIVATE KEY"):
				t.Fatalf("error shows key material: %v", err)
			}
		})
	}
}

func TestIntentionsNormalizePrecedence(t *testing.T) {
	e := &ServiceIntentionsConfigEntry{Name: "db", Sources: []*SourceIntention{
		{Name: "*", Action: "deny"}, {Name: "web", Action: "allow"},
	}}
	if err := e.Normalize(); err != nil {
		t.Fatal(err)
	}
	if e.Sources[0].Name != "web" || e.Sources[0].Precedence != 9 || e.Sources[1].Precedence != 8 || e.Sources[1].Type != IntentionSourceConsul {
		t.Fatalf("sources %+v %+v", e.Sources[0], e.Sources[1])
	}
	for _, tc := range []struct {
		src, dst string
		want     int
	}{{"a", "b", 9}, {"*", "b", 8}, {"a", "*", 6}, {"*", "*", 5}} {
		if got := IntentionPrecedence(tc.src, tc.dst); got != tc.want {
			t.Errorf("precedence(%s, %s) = %d, want %d", tc.src, tc.dst, got, tc.want)
		}
	}
}

// sampleEntries has one populated entry of every kind.
func sampleEntries() []ConfigEntry {
	n := uint32(3)
	limit := 123
	return []ConfigEntry{
		&ServiceConfigEntry{Kind: ServiceDefaults, Name: "web", Protocol: "http", Meta: map[string]string{"a": "b"},
			UpstreamConfig: &UpstreamConfiguration{Defaults: &UpstreamConfig{ConnectTimeoutMs: 10, Limits: &UpstreamLimits{}}},
			RaftIndex:      RaftIndex{CreateIndex: 3, ModifyIndex: 4}},
		&ProxyConfigEntry{Kind: ProxyDefaults, Name: "global", Config: map[string]interface{}{"protocol": "http", "n": []interface{}{"x"}}},
		&ServiceRouterConfigEntry{Kind: ServiceRouter, Name: "web", Routes: []ServiceRoute{{
			Match:       &ServiceRouteMatch{HTTP: &ServiceRouteHTTPMatch{PathPrefix: "/a", Header: []ServiceRouteHTTPMatchHeader{{Name: "x", Exact: "y"}}}},
			Destination: &ServiceRouteDestination{Service: "a", RequestTimeout: Duration(time.Second), RetryOnStatusCodes: []uint32{503}},
		}}},
		&ServiceSplitterConfigEntry{Kind: ServiceSplitter, Name: "web", Splits: []ServiceSplit{{Weight: 50}, {Weight: 50, Service: "b"}}},
		&ServiceResolverConfigEntry{Kind: ServiceResolver, Name: "web", DefaultSubset: "v1",
			Subsets:  map[string]ServiceResolverSubset{"v1": {Filter: "Service.Meta.v == 1"}},
			Failover: map[string]ServiceResolverFailover{"*": {Datacenters: []string{"dc2"}}}, ConnectTimeout: Duration(3 * time.Second)},
		&ServiceIntentionsConfigEntry{Kind: ServiceIntentions, Name: "db", Sources: []*SourceIntention{{Name: "web", Action: "allow", Precedence: 9, Type: "consul"}}},
		&MeshConfigEntry{TransparentProxy: TransparentProxyMeshConfig{MeshDestinationsOnly: true}},
		&IngressGatewayConfigEntry{Kind: IngressGateway, Name: "in", Defaults: &IngressServiceConfig{MaxConnections: 2048}, Listeners: []IngressListener{{Port: 8080, Protocol: "http", Services: []IngressService{{Name: "web", MaxConnections: &n}}}}},
		&TerminatingGatewayConfigEntry{Kind: TerminatingGateway, Name: "term", Services: []LinkedService{{Name: "ext", SNI: "x"}}},
		&ExportedServicesConfigEntry{Kind: ExportedServices, Name: "default", Services: []ExportedService{{Name: "db", Consumers: []ServiceConsumer{{Peer: "alpha"}}}}},
		&APIGatewayConfigEntry{Kind: APIGateway, Name: "gw", Defaults: &UpstreamLimits{MaxConnections: &limit},
			Listeners: []APIGatewayListener{{Name: "l", Port: 8443, Protocol: "http", MaxRequestHeadersKB: &n,
				TLS: APIGatewayTLSConfiguration{Certificates: []ResourceReference{{Kind: InlineCertificate, Name: "c"}}}}}},
		&InlineCertificateConfigEntry{Kind: InlineCertificate, Name: "c", Certificate: "-----BEGIN CERTIFICATE-----", PrivateKey: "k"},
		&HTTPRouteConfigEntry{Kind: HTTPRoute, Name: "r", Parents: []ResourceReference{{Kind: APIGateway, Name: "gw"}},
			Rules: []HTTPRouteRule{{Filters: HTTPFilters{URLRewrite: &URLRewrite{Path: "/x"}, TimeoutFilter: &TimeoutFilter{RequestTimeout: time.Second}},
				Services: []HTTPService{{Name: "api", Limits: &UpstreamLimits{MaxConnections: &limit}}}}}},
		&JWTProviderConfigEntry{Kind: JWTProvider, Name: "okta", JSONWebKeySet: &JSONWebKeySet{Remote: &RemoteJWKS{URI: "https://x/jwks",
			JWKSCluster: &JWKSCluster{DiscoveryType: "STATIC", ConnectTimeout: 5 * time.Second}}}},
	}
}

func TestConfigEntryWireRoundTrip(t *testing.T) {
	c := NewCodec()
	for _, e := range sampleEntries() {
		t.Run(e.GetKind(), func(t *testing.T) {
			req := &ConfigEntryRequest{Op: ConfigEntryUpsertCAS, Entry: e, WriteRequest: WriteRequest{Datacenter: "dc1", Token: "secret"}}
			buf, err := c.EncodeCommand(ConfigEntryRequestType, req)
			if err != nil {
				t.Fatal(err)
			}
			var got ConfigEntryRequest
			if err := c.Unmarshal(buf[1:], &got); err != nil {
				t.Fatal(err)
			}
			// The entry's own encoding carries the token for the RPC; the
			// server clears it before the log (server.encodeCommand).
			if got.Op != req.Op || got.Datacenter != "dc1" || got.Token != "secret" {
				t.Fatalf("request fields %+v", got)
			}
			if !ConfigEntriesEqual(got.Entry, e) || got.Entry.GetRaftIndex() == nil || *got.Entry.GetRaftIndex() != *e.GetRaftIndex() {
				t.Fatalf("entry changed:\n got %#v\nwant %#v", got.Entry, e)
			}

			resp := &ConfigEntryResponse{Entry: e, QueryMeta: QueryMeta{Index: 9, KnownLeader: true}}
			b, err := c.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			var gotResp ConfigEntryResponse
			if err := c.Unmarshal(b, &gotResp); err != nil {
				t.Fatal(err)
			}
			if gotResp.Index != 9 || !ConfigEntriesEqual(gotResp.Entry, e) {
				t.Fatalf("response %+v", gotResp)
			}
		})
	}
	list := &IndexedConfigEntries{Kind: "", Entries: sampleEntries(), QueryMeta: QueryMeta{Index: 4}}
	b, err := c.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var got IndexedConfigEntries
	if err := c.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != len(list.Entries) || got.Index != 4 {
		t.Fatalf("list %+v", got)
	}
	for i := range got.Entries {
		if !ConfigEntriesEqual(got.Entries[i], list.Entries[i]) {
			t.Errorf("entry %d changed: %#v", i, got.Entries[i])
		}
	}
	// A nil entry survives as nil.
	b, _ = c.Marshal(&ConfigEntryResponse{})
	var empty ConfigEntryResponse
	if err := c.Unmarshal(b, &empty); err != nil || empty.Entry != nil {
		t.Fatalf("nil entry: %v %+v", err, empty)
	}
	// Corrupt input is an error, not a panic.
	if err := c.Unmarshal([]byte{0xc4, 0x03, 0xa3, 'n', 'o'}, &empty); err == nil {
		t.Fatal("corrupt input decoded")
	}
}

func TestCloneAndEqual(t *testing.T) {
	for _, e := range sampleEntries() {
		c := CloneConfigEntry(e)
		if !reflect.DeepEqual(c, e) {
			t.Fatalf("%s: clone differs", e.GetKind())
		}
		if !ConfigEntriesEqual(c, e) {
			t.Fatalf("%s: clone not equal", e.GetKind())
		}
	}
	a := &ServiceRouterConfigEntry{Name: "web", Routes: []ServiceRoute{{Match: &ServiceRouteMatch{HTTP: &ServiceRouteHTTPMatch{PathPrefix: "/a"}}}}}
	b := CloneConfigEntry(a).(*ServiceRouterConfigEntry)
	b.Routes[0].Match.HTTP.PathPrefix = "/b"
	if a.Routes[0].Match.HTTP.PathPrefix != "/a" {
		t.Fatal("clone shares memory")
	}
	if ConfigEntriesEqual(a, b) {
		t.Fatal("different entries compare equal")
	}
	// Raft indexes, nil vs empty, and number types do not matter.
	p1 := &ProxyConfigEntry{Name: "global", Config: map[string]interface{}{"n": float64(3)}, Meta: map[string]string{}, RaftIndex: RaftIndex{ModifyIndex: 4}}
	p2 := &ProxyConfigEntry{Name: "global", Config: map[string]interface{}{"n": int64(3)}}
	if !ConfigEntriesEqual(p1, p2) {
		t.Fatal("equivalent proxy-defaults differ")
	}
	p2.Config["n"] = "3"
	if ConfigEntriesEqual(p1, p2) {
		t.Fatal("string and number compare equal")
	}
}

func TestConfigEntryJSONShape(t *testing.T) {
	b, err := json.Marshal(&MeshConfigEntry{RaftIndex: RaftIndex{CreateIndex: 1, ModifyIndex: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); got != `{"Kind":"mesh","TransparentProxy":{"MeshDestinationsOnly":false},"CreateIndex":1,"ModifyIndex":2}` {
		t.Fatalf("mesh JSON %s", got)
	}
	// Consul answers every limit of an ingress gateway's Defaults, 0 when
	// unset; the api client dereferences them.
	b, _ = json.Marshal(&IngressServiceConfig{MaxConnections: 2048})
	if got := string(b); got != `{"MaxConnections":2048,"MaxPendingRequests":0,"MaxConcurrentRequests":0}` {
		t.Fatalf("ingress defaults JSON %s", got)
	}
	b, _ = json.Marshal(&ServiceResolverConfigEntry{Kind: ServiceResolver, Name: "db", ConnectTimeout: Duration(5 * time.Second)})
	if got := string(b); got != `{"Kind":"service-resolver","Name":"db","ConnectTimeout":"5s","CreateIndex":0,"ModifyIndex":0}` {
		t.Fatalf("resolver JSON %s", got)
	}
}

func TestMakeConfigEntryKinds(t *testing.T) {
	for _, k := range ConfigEntryKinds {
		e, err := MakeConfigEntry(k, "x")
		if err != nil || e.GetKind() != k {
			t.Fatalf("%s: %v %v", k, e, err)
		}
	}
	_, err := MakeConfigEntry("bogus", "x")
	if !errors.Is(err, ErrInvalidConfigEntryKind) || err.Error() != "invalid config entry kind: bogus" {
		t.Fatalf("err = %v", err)
	}
}
