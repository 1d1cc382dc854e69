package integration

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/trellis-mesh/trellis/xds/gen"
)

// These tests cover the xDS scenario helpers themselves; they need no
// trellis binary and run with -short.

// tlsListener is a listener with a tcp_proxy to cluster and a downstream
// TLS context presenting leaf.
func tlsListener(t *testing.T, statPrefix, cluster, leaf string) *listenerv3.Listener {
	t.Helper()
	pack := func(m proto.Message) *anypb.Any {
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	inline := func(s string) *corev3.DataSource {
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: s}}
	}
	tls := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificates: []*tlsv3.TlsCertificate{{CertificateChain: inline(leaf), PrivateKey: inline("key of " + leaf)}},
	}}
	return &listenerv3.Listener{
		Name: "public_listener:0.0.0.0:21000",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 21000},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{
				TypedConfig: pack(&tcpproxyv3.TcpProxy{StatPrefix: statPrefix, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster}}),
			}}},
			TransportSocket: &corev3.TransportSocket{Name: "tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: pack(tls)}},
		}},
	}
}

func TestXDSHelpers(t *testing.T) {
	t.Run("validation errors are split and packed configs checked", func(t *testing.T) {
		l := tlsListener(t, "", "missing", "LEAF-A")
		errs := validationErrors(gen.Validate(gen.Resources{ldsType: {l.GetName(): l}}))
		var joined []string
		for _, e := range errs {
			joined = append(joined, e.Error())
		}
		all := strings.Join(joined, "\n")
		if len(errs) != 2 || !strings.Contains(all, "StatPrefix") || !strings.Contains(all, `names Cluster "missing", which is not in the set`) {
			t.Fatalf("errors %q", joined)
		}
		if validationErrors(nil) != nil {
			t.Fatal("no error, no problems")
		}
	})

	t.Run("resources are compared without their leaf", func(t *testing.T) {
		a := tlsListener(t, "public_listener", "local_app", "LEAF-A")
		b := tlsListener(t, "public_listener", "local_app", "LEAF-B")
		c := tlsListener(t, "public_listener", "elsewhere", "LEAF-A")
		if contentHash(a) == contentHash(b) {
			t.Fatal("different leaves, same hash")
		}
		if contentHash(withoutLeaf(a)) != contentHash(withoutLeaf(b)) {
			t.Error("listeners that differ only in their leaf differ without it")
		}
		if contentHash(withoutLeaf(a)) == contentHash(withoutLeaf(c)) {
			t.Error("listeners that differ beyond their leaf are equal without it")
		}
		if got := leafOf(a.GetFilterChains()[0].GetTransportSocket()); got != "LEAF-A" {
			t.Errorf("leafOf = %q", got)
		}
		if leafOf(withoutLeaf(a).(*listenerv3.Listener).GetFilterChains()[0].GetTransportSocket()) != "LEAF" {
			t.Error("withoutLeaf left the leaf")
		}
	})

	t.Run("RBAC principals name their sources", func(t *testing.T) {
		principal := func(re string) *rbacv3.Principal {
			return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{
				PrincipalName: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: re}}},
			}}}
		}
		web := principal(`^spiffe://[^/]+/ns/default/dc/[^/]+/svc/web\.v2$`)
		anySvc := principal(`^spiffe://[^/]+/ns/default/dc/[^/]+/svc/[^/]+$`)
		and := &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{
			anySvc, {Identifier: &rbacv3.Principal_NotId{NotId: web}},
		}}}}
		if got := principalSources(and); got != "*&!web.v2" {
			t.Errorf("principalSources = %q", got)
		}
	})

	t.Run("proxy-status is compared with what the client answered", func(t *testing.T) {
		v := adsView{
			Held: map[string]map[string]adsResource{ldsType: {"l": {Name: "l"}}},
			Acks: map[string]typeAck{
				ldsType: {AckedVersion: "v1", AckedNonce: "1", NackedVersion: "v2", NackedNonce: "2", NackError: "bad\nlisteners", LastNonce: "2"},
				cdsType: {},
			},
		}
		ok := proxyStream{StreamID: 1, Types: []proxyTypeStatus{{
			TypeURL: ldsType, LastSentNonce: "2", LastAckedVersion: "v1", LastNackedVersion: "v2",
			LastNackError: "bad\nlisteners", LastNackCode: nackCode, Suppressed: true, Held: 1,
		}}}
		if err := statusMatches(ok, v); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name   string
			change func(*proxyTypeStatus)
			want   string
		}{
			{"error text", func(s *proxyTypeStatus) { s.LastNackError = "bad listeners" }, "nacked"},
			{"pending", func(s *proxyTypeStatus) { s.Pending = true }, "pending true"},
			{"acked", func(s *proxyTypeStatus) { s.LastAckedVersion = "v2" }, "acked version"},
			{"not suppressed", func(s *proxyTypeStatus) { s.Suppressed = false }, "suppressed false"},
			{"held", func(s *proxyTypeStatus) { s.Held = 2 }, "holds"},
			{"code", func(s *proxyTypeStatus) { s.LastNackCode = 3 }, "NACK code"},
		}
		for _, tt := range tests {
			bad := proxyStream{StreamID: 1, Types: []proxyTypeStatus{ok.Types[0]}}
			tt.change(&bad.Types[0])
			if err := statusMatches(bad, v); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v, want an error about %q", tt.name, err, tt.want)
			}
		}
		if err := statusMatches(proxyStream{}, v); err == nil || !strings.Contains(err.Error(), "not listed") {
			t.Errorf("missing type: %v", err)
		}
	})
}
