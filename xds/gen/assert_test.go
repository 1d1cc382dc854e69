package gen

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// requireNames asserts the exact set of names of one type.
func requireNames(t *testing.T, res Resources, typeURL string, names ...string) {
	t.Helper()
	got := sortedKeys(res[typeURL])
	want := append([]string{}, names...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s names:\n got %q\nwant %q", shortType(typeURL), got, want)
	}
}

// requireOutboundMatches asserts the transparent outbound listener's
// filter chains, each as "name=ip,ip" in order; none may match a port.
func requireOutboundMatches(t *testing.T, res Resources, want ...string) {
	t.Helper()
	l, ok := res[ListenerType]["outbound_listener:127.0.0.1:15001"].(*listenerv3.Listener)
	if !ok {
		t.Fatal("no outbound listener")
	}
	var got []string
	for _, fc := range l.FilterChains {
		var ips []string
		for _, r := range fc.GetFilterChainMatch().GetPrefixRanges() {
			ips = append(ips, r.GetAddressPrefix())
		}
		if fc.GetFilterChainMatch().GetDestinationPort() != nil {
			t.Errorf("outbound chain %s matches a port", fc.GetName())
		}
		got = append(got, fc.GetName()+"="+strings.Join(ips, ","))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("outbound chains:\n got %q\nwant %q", got, want)
	}
}

// nameWithSuffix returns the one name of a type that ends with suffix.
func nameWithSuffix(t *testing.T, res Resources, typeURL, suffix string) string {
	t.Helper()
	var found []string
	for name := range res[typeURL] {
		if strings.HasSuffix(name, suffix) {
			found = append(found, name)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s names ending in %q: %q", shortType(typeURL), suffix, found)
	}
	return found[0]
}

// endpointsOf renders an endpoint set as "addr:port/STATUS/weight".
func endpointsOf(t *testing.T, res Resources, name string) []string {
	t.Helper()
	msg, ok := res[EndpointType][name]
	if !ok {
		t.Fatalf("no endpoints %q", name)
	}
	var out []string
	for _, l := range msg.(*endpointv3.ClusterLoadAssignment).GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			sa := e.GetEndpoint().GetAddress().GetSocketAddress()
			out = append(out, fmt.Sprintf("%s:%d/%s/%d", sa.GetAddress(), sa.GetPortValue(), e.GetHealthStatus(), e.GetLoadBalancingWeight().GetValue()))
		}
	}
	return out
}

// deprecatedFields lists the deprecated proto fields and enum values set
// anywhere in a set, packed configs included.
func deprecatedFields(t *testing.T, res Resources) []string {
	var out []string
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if a, ok := m.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				t.Fatal(err)
			}
			walk(inner.ProtoReflect())
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts.GetDeprecated() {
				out = append(out, string(fd.FullName()))
			}
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len(); i++ {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
				walk(v.Message())
			case fd.Enum() != nil && !fd.IsList():
				if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
					if opts, ok := ev.Options().(*descriptorpb.EnumValueOptions); ok && opts.GetDeprecated() {
						out = append(out, string(ev.FullName()))
					}
				}
			}
			return true
		})
	}
	for _, set := range res {
		for _, m := range set {
			walk(m.ProtoReflect())
		}
	}
	sort.Strings(out)
	return out
}

// upstreamSNI is the SNI of a cluster's upstream TLS context.
func upstreamSNI(t *testing.T, res Resources, cluster string) string {
	t.Helper()
	c, ok := res[ClusterType][cluster].(*clusterv3.Cluster)
	if !ok {
		t.Fatalf("no cluster %q", cluster)
	}
	var tls tlsv3.UpstreamTlsContext
	if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tls); err != nil {
		t.Fatalf("cluster %q transport socket: %v", cluster, err)
	}
	return tls.GetSni()
}

// serverNamesInclude reports whether a filter chain of listener matches
// the SNI name.
func serverNamesInclude(res Resources, listener, name string) bool {
	l, ok := res[ListenerType][listener].(*listenerv3.Listener)
	if !ok {
		return false
	}
	for _, fc := range l.GetFilterChains() {
		if slices.Contains(fc.GetFilterChainMatch().GetServerNames(), name) {
			return true
		}
	}
	return false
}

// publicHCM is the HTTP connection manager of a sidecar's public listener
// and the ALPN its TLS context offers.
func publicHCM(t *testing.T, res Resources, listener string) (*hcmv3.HttpConnectionManager, []string) {
	t.Helper()
	l, ok := res[ListenerType][listener].(*listenerv3.Listener)
	if !ok || len(l.GetFilterChains()) != 1 {
		t.Fatalf("no public listener %q with one filter chain", listener)
	}
	fc := l.GetFilterChains()[0]
	var hcm hcmv3.HttpConnectionManager
	if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		t.Fatalf("public listener filter: %v", err)
	}
	var tls tlsv3.DownstreamTlsContext
	if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tls); err != nil {
		t.Fatalf("public listener transport socket: %v", err)
	}
	return &hcm, tls.GetCommonTlsContext().GetAlpnProtocols()
}

// httpFilterNames are the names of a connection manager's HTTP filters,
// in order.
func httpFilterNames(hcm *hcmv3.HttpConnectionManager) []string {
	var out []string
	for _, f := range hcm.GetHttpFilters() {
		out = append(out, f.GetName())
	}
	return out
}
