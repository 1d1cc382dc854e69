package gen

import (
	"errors"
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	aggregatev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/aggregate/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Validate checks a resource set the way Envoy would before accepting it,
// and reports every problem found (wrapped in ErrInvalidResources):
//
//   - each resource is of its type URL's message type, stored under its own
//     name, and passes the protos' ValidateAll;
//   - so does every typed config packed in an Any anywhere inside it
//     (connection managers, tcp_proxy, RBAC, TLS contexts, ...), which
//     ValidateAll does not look into but Envoy does;
//   - every route configuration an RDS connection manager names, every
//     cluster a route, tcp_proxy or aggregate cluster names, and the
//     endpoint set of every EDS cluster is in the set;
//   - listeners have a filter chain, no two chains of a listener match
//     alike, no two listeners share an address, and no domain appears twice
//     in a route configuration.
func Validate(res Resources) error {
	v := &validator{res: res}
	for _, typeURL := range sortedKeys(res) {
		for _, name := range sortedKeys(res[typeURL]) {
			v.resource(typeURL, name, res[typeURL][name])
		}
	}
	v.checkRefs()
	if len(v.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidResources, errors.Join(v.errs...))
}

// ref is one resource another names.
type ref struct {
	typeURL, name, from string
}

type validator struct {
	res       Resources
	errs      []error
	refs      []ref
	addresses map[string]string // listener address -> listener name
}

func (v *validator) errorf(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

func shortType(typeURL string) string {
	return typeURL[strings.LastIndex(typeURL, ".")+1:]
}

func (v *validator) resource(typeURL, name string, msg proto.Message) {
	where := fmt.Sprintf("%s %q", shortType(typeURL), name)
	if msg == nil {
		v.errorf("%s: nil resource", where)
		return
	}
	if got := resource.APITypePrefix + string(msg.ProtoReflect().Descriptor().FullName()); got != typeURL {
		v.errorf("%s: message is %s", where, got)
		return
	}
	if got := resourceName(msg); got != name {
		v.errorf("%s: stored under another name than its own %q", where, got)
	}
	v.tree(msg.ProtoReflect(), where)
}

// resourceName is the name Envoy knows a resource by.
func resourceName(msg proto.Message) string {
	switch m := msg.(type) {
	case *listenerv3.Listener:
		return m.GetName()
	case *clusterv3.Cluster:
		return m.GetName()
	case *routev3.RouteConfiguration:
		return m.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return m.GetClusterName()
	}
	return ""
}

// tree validates m with ValidateAll, then walks it for references and
// packed configs, which it validates the same way.
func (v *validator) tree(m protoreflect.Message, where string) {
	if va, ok := m.Interface().(interface{ ValidateAll() error }); ok {
		if err := va.ValidateAll(); err != nil {
			v.errorf("%s: %s: %w", where, m.Descriptor().FullName(), err)
		}
	}
	v.walk(m, where)
}

// walk visits every message inside m (m included), unpacking Anys.
func (v *validator) walk(m protoreflect.Message, where string) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			v.errorf("%s: cannot unpack %s: %w", where, a.GetTypeUrl(), err)
			return
		}
		v.tree(inner.ProtoReflect(), where+" > "+string(inner.ProtoReflect().Descriptor().Name()))
		return
	}
	v.visit(m.Interface(), where)
	m.Range(func(fd protoreflect.FieldDescriptor, val protoreflect.Value) bool {
		switch {
		case fd.IsList():
			if fd.Message() != nil {
				l := val.List()
				for i := 0; i < l.Len(); i++ {
					v.walk(l.Get(i).Message(), where)
				}
			}
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				val.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					v.walk(mv.Message(), where)
					return true
				})
			}
		case fd.Message() != nil:
			v.walk(val.Message(), where)
		}
		return true
	})
}

// visit records what a message names and checks what Envoy checks beyond
// the protos' rules.
func (v *validator) visit(msg proto.Message, where string) {
	need := func(typeURL, name string) { v.refs = append(v.refs, ref{typeURL, name, where}) }
	switch m := msg.(type) {
	case *hcmv3.HttpConnectionManager:
		if rds := m.GetRds(); rds != nil {
			need(RouteType, rds.GetRouteConfigName())
		}
	case *tcpproxyv3.TcpProxy:
		switch cs := m.ClusterSpecifier.(type) {
		case *tcpproxyv3.TcpProxy_Cluster:
			// An empty name is the sni_cluster filter's to fill in (a
			// mesh gateway's catch-all chain): the SNI names the cluster.
			if cs.Cluster != "" {
				need(ClusterType, cs.Cluster)
			}
		case *tcpproxyv3.TcpProxy_WeightedClusters:
			for _, c := range cs.WeightedClusters.GetClusters() {
				need(ClusterType, c.GetName())
			}
		}
	case *routev3.RouteAction:
		switch cs := m.ClusterSpecifier.(type) {
		case *routev3.RouteAction_Cluster:
			need(ClusterType, cs.Cluster)
		case *routev3.RouteAction_WeightedClusters:
			for _, c := range cs.WeightedClusters.GetClusters() {
				need(ClusterType, c.GetName())
			}
		}
	case *clusterv3.Cluster:
		if m.GetType() == clusterv3.Cluster_EDS || m.GetEdsClusterConfig() != nil {
			name := m.GetEdsClusterConfig().GetServiceName()
			if name == "" {
				name = m.GetName()
			}
			need(EndpointType, name)
		}
	case *aggregatev3.ClusterConfig:
		for _, c := range m.GetClusters() {
			need(ClusterType, c)
		}
	case *listenerv3.Listener:
		v.listener(m, where)
	case *routev3.RouteConfiguration:
		v.routeConfiguration(m, where)
	}
}

func (v *validator) listener(l *listenerv3.Listener, where string) {
	// A gRPC client's api_listener has no filter chain: its connection
	// manager is the listener.
	if len(l.GetFilterChains()) == 0 && l.GetDefaultFilterChain() == nil && l.GetApiListener() == nil {
		v.errorf("%s: no filter chain", where)
	}
	var matches []*listenerv3.FilterChainMatch
	names := map[string]bool{}
	for i, fc := range l.GetFilterChains() {
		m := fc.GetFilterChainMatch()
		if m == nil {
			m = &listenerv3.FilterChainMatch{}
		}
		for j, prev := range matches {
			if proto.Equal(prev, m) {
				v.errorf("%s: filter chains %d and %d have the same match", where, j, i)
			}
		}
		matches = append(matches, m)
		if n := fc.GetName(); n != "" {
			if names[n] {
				v.errorf("%s: two filter chains named %q", where, n)
			}
			names[n] = true
		}
	}
	if sa := l.GetAddress().GetSocketAddress(); sa != nil {
		addr := fmt.Sprintf("%s:%d", sa.GetAddress(), sa.GetPortValue())
		if v.addresses == nil {
			v.addresses = map[string]string{}
		}
		if other, ok := v.addresses[addr]; ok {
			v.errorf("%s: address %s already used by listener %q", where, addr, other)
		}
		v.addresses[addr] = l.GetName()
	}
}

func (v *validator) routeConfiguration(rc *routev3.RouteConfiguration, where string) {
	domains := map[string]string{}
	hosts := map[string]bool{}
	for _, vh := range rc.GetVirtualHosts() {
		if hosts[vh.GetName()] {
			v.errorf("%s: two virtual hosts named %q", where, vh.GetName())
		}
		hosts[vh.GetName()] = true
		for _, d := range vh.GetDomains() {
			if other, ok := domains[d]; ok {
				v.errorf("%s: domain %q in virtual hosts %q and %q", where, d, other, vh.GetName())
			}
			domains[d] = vh.GetName()
		}
	}
}

func (v *validator) checkRefs() {
	for _, r := range v.refs {
		if _, ok := v.res[r.typeURL][r.name]; !ok {
			v.errorf("%s: names %s %q, which is not in the set", r.from, shortType(r.typeURL), r.name)
		}
	}
}
