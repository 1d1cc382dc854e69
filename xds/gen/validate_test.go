package gen

import (
	"errors"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/trellis-mesh/trellis/structs"
)

// baseResources generates a valid set with every kind of reference: an
// HTTP upstream (RDS, weighted clusters, aggregate failover) next to the
// public listener.
func baseResources(t *testing.T) Resources {
	t.Helper()
	snap := snapshot(t, routedWorld(), sidecar("web", structs.Upstream{DestinationName: "api", LocalBindPort: 9292}), 1)
	res, err := Generate(snap)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// cloneResources deep-copies a set, so that a test can break its copy.
func cloneResources(res Resources) Resources {
	out := Resources{}
	for typeURL, set := range res {
		out[typeURL] = map[string]proto.Message{}
		for name, m := range set {
			out[typeURL][name] = proto.Clone(m)
		}
	}
	return out
}

// TestValidateRejects breaks a valid set in one way at a time; Validate
// must refuse each, naming the problem.
func TestValidateRejects(t *testing.T) {
	const (
		upstreamListener = "api:127.0.0.1:9292"
		publicListener   = "public_listener:10.0.0.1:21000"
		aggregate        = "admin.default.dc1.internal." + testTrustDomain
		v1               = "v1.api.default.dc1.internal." + testTrustDomain
	)
	// repack edits the typed config of a listener's first filter.
	repack := func(t *testing.T, res Resources, listener string, edit func(proto.Message)) {
		t.Helper()
		f := res[ListenerType][listener].(*listenerv3.Listener).FilterChains[0].Filters[0]
		msg, err := f.GetTypedConfig().UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		edit(msg)
		a, err := anypb.New(msg)
		if err != nil {
			t.Fatal(err)
		}
		f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	}
	cases := []struct {
		name    string
		breakIt func(t *testing.T, res Resources)
		want    string
	}{
		{
			name: "connection manager without stat prefix (inside an Any)",
			breakIt: func(t *testing.T, res Resources) {
				repack(t, res, upstreamListener, func(m proto.Message) { m.(*hcmv3.HttpConnectionManager).StatPrefix = "" })
			},
			want: "StatPrefix",
		},
		{
			name: "RDS names a missing route configuration",
			breakIt: func(t *testing.T, res Resources) {
				repack(t, res, upstreamListener, func(m proto.Message) {
					m.(*hcmv3.HttpConnectionManager).GetRds().RouteConfigName = "nope"
				})
			},
			want: `names RouteConfiguration "nope"`,
		},
		{
			name: "tcp_proxy names a missing cluster",
			breakIt: func(t *testing.T, res Resources) {
				res[ListenerType][publicListener].(*listenerv3.Listener).FilterChains[0].Filters = nil
				l := res[ListenerType][publicListener].(*listenerv3.Listener)
				a, _ := anypb.New(&tcpproxyv3.TcpProxy{StatPrefix: "x", ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "nope"}})
				l.FilterChains[0].Filters = []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}}
			},
			want: `names Cluster "nope"`,
		},
		{
			name:    "route names a missing cluster",
			breakIt: func(t *testing.T, res Resources) { delete(res[ClusterType], v1) },
			want:    `names Cluster "` + v1 + `"`,
		},
		{
			name:    "EDS cluster without endpoints",
			breakIt: func(t *testing.T, res Resources) { delete(res[EndpointType], v1) },
			want:    `names ClusterLoadAssignment "` + v1 + `"`,
		},
		{
			name: "aggregate names a missing member",
			breakIt: func(t *testing.T, res Resources) {
				c := res[ClusterType][aggregate].(*clusterv3.Cluster)
				a, _ := anypb.New(&aggregatev3.ClusterConfig{Clusters: []string{"gone"}})
				c.GetClusterType().TypedConfig = a
			},
			want: `names Cluster "gone"`,
		},
		{
			name: "cluster with a negative connect timeout",
			breakIt: func(t *testing.T, res Resources) {
				res[ClusterType][v1].(*clusterv3.Cluster).ConnectTimeout = durationpb.New(-time.Second)
			},
			want: "ConnectTimeout",
		},
		{
			name: "TLS context with an unspecified SAN type (inside an Any)",
			breakIt: func(t *testing.T, res Resources) {
				ts := res[ClusterType][v1].(*clusterv3.Cluster).TransportSocket
				ctx := &tlsv3.UpstreamTlsContext{}
				if err := ts.GetTypedConfig().UnmarshalTo(ctx); err != nil {
					t.Fatal(err)
				}
				ctx.CommonTlsContext.GetValidationContext().MatchTypedSubjectAltNames[0].SanType = tlsv3.SubjectAltNameMatcher_SAN_TYPE_UNSPECIFIED
				a, _ := anypb.New(ctx)
				ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: a}
			},
			want: "SanType",
		},
		{
			name: "typed config of an unknown type",
			breakIt: func(t *testing.T, res Resources) {
				ts := res[ClusterType][v1].(*clusterv3.Cluster).TransportSocket
				ts.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type"}}
			},
			want: "cannot unpack type.googleapis.com/no.such.Type",
		},
		{
			name: "resource under another name",
			breakIt: func(t *testing.T, res Resources) {
				res[ClusterType]["other"] = res[ClusterType][v1]
			},
			want: `Cluster "other": stored under another name`,
		},
		{
			name: "message of the wrong type",
			breakIt: func(t *testing.T, res Resources) {
				res[RouteType]["api"] = &clusterv3.Cluster{Name: "api"}
			},
			want: "message is type.googleapis.com/envoy.config.cluster.v3.Cluster",
		},
		{
			name: "two filter chains with the same match",
			breakIt: func(t *testing.T, res Resources) {
				l := res[ListenerType][upstreamListener].(*listenerv3.Listener)
				l.FilterChains = append(l.FilterChains, proto.Clone(l.FilterChains[0]).(*listenerv3.FilterChain))
			},
			want: "same match",
		},
		{
			name: "listener without filter chains",
			breakIt: func(t *testing.T, res Resources) {
				res[ListenerType][upstreamListener].(*listenerv3.Listener).FilterChains = nil
			},
			want: "no filter chain",
		},
		{
			name: "two listeners on one address",
			breakIt: func(t *testing.T, res Resources) {
				l := proto.Clone(res[ListenerType][upstreamListener]).(*listenerv3.Listener)
				l.Name = "copy"
				res[ListenerType]["copy"] = l
			},
			want: "already used by listener",
		},
		{
			name: "a domain in two virtual hosts",
			breakIt: func(t *testing.T, res Resources) {
				rc := res[RouteType]["api"].(*routev3.RouteConfiguration)
				vh := proto.Clone(rc.VirtualHosts[0]).(*routev3.VirtualHost)
				vh.Name = "other"
				rc.VirtualHosts = append(rc.VirtualHosts, vh)
			},
			want: `domain "*" in virtual hosts`,
		},
	}
	base := baseResources(t)
	if err := Validate(base); err != nil {
		t.Fatalf("the base set is invalid: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := cloneResources(base)
			tc.breakIt(t, res)
			err := Validate(res)
			if err == nil {
				t.Fatal("Validate accepted the broken set")
			}
			if !errors.Is(err, ErrInvalidResources) {
				t.Errorf("error %v does not wrap ErrInvalidResources", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error does not mention %q:\n%v", tc.want, err)
			}
		})
	}
}
