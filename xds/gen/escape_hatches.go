package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"

	// The typed configs an override may pack (Any) must resolve in the
	// protobuf registry, which only knows the packages linked in. Those
	// generation uses itself are; these are the other extensions Consul
	// users commonly put in escape hatches.
	_ "github.com/envoyproxy/go-control-plane/envoy/config/trace/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/clusters/dynamic_forward_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/compression/gzip/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/compressor/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/csrf/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/dynamic_forward_proxy/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_http1_bridge/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_web/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_to_metadata/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/health_check/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/set_metadata/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/local_ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/sni_cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/least_request/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/maglev/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/random/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/ring_hash/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/round_robin/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/request_id/uuid/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/tcp/v3"
)

// Escape hatches are Consul's opaque config keys that replace a generated
// resource of a sidecar with the user's own (Consul's agent/xds, whose
// behaviour this follows):
//
//   - envoy_public_listener_json (the registration's Proxy.Config, over
//     the global proxy-defaults' Config, see sidecarConfig): the
//     public listener. Consul keeps inbound traffic in the mesh: every
//     filter chain gets the mTLS transport socket (replacing the user's)
//     and the intentions' RBAC filter first: for an HTTP service the HTTP
//     RBAC filter at the head of each chain's HTTP connection manager,
//     else (or when a chain has no connection manager) the network RBAC
//     filter at the head of each chain. Unlike Consul, the default filter
//     chain is treated like the others: left alone it would let plain,
//     unauthorized connections in.
//   - envoy_local_cluster_json (same place): local_app, verbatim.
//   - envoy_listener_json (an upstream's Config, else its central
//     UpstreamConfig, as Consul merges them): the upstream's listener,
//     verbatim, for an upstream that has one (a local bind port or
//     socket) or is implicit. Nothing of ours then leads into the chain:
//     no route configuration (Consul has none for default chains), and
//     on a transparent proxy no filter chain on the outbound listener
//     (Consul's).
//   - envoy_cluster_json (same places): the upstream's cluster, under
//     the user's name, with the generated mTLS transport socket (the
//     target's SNI and identity check). Its endpoints are the EDS set the
//     cluster reads (its eds service name, else its name; Consul always
//     uses the name), none for a cluster that is not EDS. Renaming it
//     takes an envoy_listener_json that sends traffic to the new name:
//     the generated listener names the generated one.
//
// Consul ignores the two upstream keys when config entries shape the
// upstream's discovery chain (its chain is not Default): the chain's
// clusters and routes win. So does Trellis, silently (generation has no
// logger; Consul warns).
//
// The JSON is the protojson of the Envoy v3 resource, with or without an
// "@type" naming it (Consul accepts both). An override that cannot be
// delivered as given fails the whole generation with
// ErrInvalidEscapeHatch, as a malformed one does in Consul: the JSON does
// not parse or is another type, a packed config does not resolve, the
// resource has no name or fails validation (ValidateAll on it and every
// packed config), or, once the generation is assembled, it names a
// cluster, route configuration or endpoint set the proxy does not get.
// The ADS stream then logs the error and keeps serving what the proxy has
// (Consul closes the stream and Envoy keeps its config), until a
// corrected registration builds again. Never sending it is the point:
// Envoy would reject the resource, or take it and drop traffic.
//
// A value that is not a string (a map or list) is ignored, as Consul's
// config decoding leaves it out; other scalars are taken as their string
// and fail to parse, as there.
//
// A Generator reuses overrides like the rest: the public one is read from
// the *NodeService its part is keyed on, an upstream's from the
// *structs.Upstream and *UpstreamConfig of its part's key, and proxycfg
// replaces those values when they change. Parsing thus happens when the
// JSON (or another input of the part) changes, while what an override
// names is checked against every generation (partOverrides.refs).

// Keys of the escape hatches.
const (
	cfgPublicListenerJSON = "envoy_public_listener_json"
	cfgLocalClusterJSON   = "envoy_local_cluster_json"
	cfgListenerJSON       = "envoy_listener_json"
	cfgClusterJSON        = "envoy_cluster_json"
)

// opaqueJSON is the JSON of an escape hatch in an opaque config map ("" when
// unset).
func opaqueJSON(m map[string]any, key string) string {
	v, ok := structs.OpaqueValue(m, key)
	if !ok || v == nil {
		return ""
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.Struct, reflect.Pointer:
		return ""
	}
	return structs.OpaqueString(m, key)
}

// escapeHatchError wraps a problem of the override under key.
func escapeHatchError(key string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrInvalidEscapeHatch, key, err)
}

// decodeResource decodes raw, the protojson of msg's type, into msg. An
// "@type" field, when present, must name that type.
func decodeResource(raw string, msg proto.Message) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil || fields == nil {
		if err == nil {
			err = errors.New("null")
		}
		return fmt.Errorf("not a JSON object: %w", err)
	}
	rawType, typed := fields["@type"]
	if !typed {
		return protojson.Unmarshal([]byte(raw), msg)
	}
	var typeURL string
	if err := json.Unmarshal(rawType, &typeURL); err != nil {
		return fmt.Errorf("@type: %w", err)
	}
	want := msg.ProtoReflect().Descriptor().FullName()
	if got := protoreflect.FullName(typeURL[strings.LastIndexByte(typeURL, '/')+1:]); got != want {
		hint := ""
		if strings.HasPrefix(string(got), "envoy.api.v2.") {
			hint = " (Envoy's v2 API is gone: use the v3 message)"
		}
		return fmt.Errorf("@type %q is not %s%s", typeURL, want, hint)
	}
	a := &anypb.Any{}
	if err := protojson.Unmarshal([]byte(raw), a); err != nil {
		return err
	}
	return a.UnmarshalTo(msg)
}

// addOverride adds an override (after Consul's injections) once it passes
// what Validate checks of a resource alone, and records what it names for
// checkOverrideRefs.
func (b *builder) addOverride(key, typeURL, name string, msg proto.Message) error {
	if name == "" {
		return escapeHatchError(key, fmt.Errorf("the %s has no name", shortType(typeURL)))
	}
	v := &validator{}
	v.tree(msg.ProtoReflect(), fmt.Sprintf("%s %s %q", key, shortType(typeURL), name))
	if len(v.errs) > 0 { // they say where, key included
		return fmt.Errorf("%w: %w", ErrInvalidEscapeHatch, errors.Join(v.errs...))
	}
	b.add(typeURL, name, msg)
	b.curOverrides().refs = append(b.curOverrides().refs, v.refs...)
	return nil
}

// curOverrides is what the current part's escape hatches record.
func (b *builder) curOverrides() *partOverrides {
	if b.cur.overrides == nil {
		b.cur.overrides = &partOverrides{}
	}
	return b.cur.overrides
}

// checkOverrideRefs verifies that what the generation's overrides name is
// in its resources (Validate's reference check, for those alone: the
// generated resources pass it by construction).
func (b *builder) checkOverrideRefs(res Resources) error {
	var errs []error
	for _, p := range b.parts {
		if p.overrides == nil {
			continue
		}
		for _, r := range p.overrides.refs {
			if _, ok := res[r.typeURL][r.name]; !ok {
				errs = append(errs, fmt.Errorf("%s: names %s %q, which the proxy does not get", r.from, shortType(r.typeURL), r.name))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidEscapeHatch, errors.Join(errs...))
}

// addPublicOverrides adds the sidecar's envoy_local_cluster_json and
// envoy_public_listener_json (from cfg, its merged opaque config), and
// reports which of the two it added.
func (b *builder) addPublicOverrides(cp *proxycfg.ConnectProxySnapshot, cfg map[string]any) (localApp, public bool, err error) {
	if raw := opaqueJSON(cfg, cfgLocalClusterJSON); raw != "" {
		c := &clusterv3.Cluster{}
		if err := decodeResource(raw, c); err != nil {
			return false, false, escapeHatchError(cfgLocalClusterJSON, err)
		}
		if err := b.addOverride(cfgLocalClusterJSON, ClusterType, c.GetName(), c); err != nil {
			return false, false, err
		}
		localApp = true
	}
	if raw := opaqueJSON(cfg, cfgPublicListenerJSON); raw != "" {
		l := &listenerv3.Listener{}
		if err := decodeResource(raw, l); err != nil {
			return false, false, escapeHatchError(cfgPublicListenerJSON, err)
		}
		if err := b.securePublicListener(cp, l); err != nil {
			return false, false, escapeHatchError(cfgPublicListenerJSON, err)
		}
		if err := b.addOverride(cfgPublicListenerJSON, ListenerType, l.GetName(), l); err != nil {
			return false, false, err
		}
		public = true
	}
	return localApp, public, nil
}

// securePublicListener makes a user's public listener enforce the mesh:
// on every filter chain, the default one included, the intentions' RBAC
// filter first and the mTLS transport socket.
func (b *builder) securePublicListener(cp *proxycfg.ConnectProxySnapshot, l *listenerv3.Listener) error {
	chains := append([]*listenerv3.FilterChain{}, l.GetFilterChains()...)
	if l.DefaultFilterChain != nil {
		chains = append(chains, l.DefaultFilterChain)
	}
	for i, fc := range chains {
		if fc == nil {
			return fmt.Errorf("filter chain %d is null", i)
		}
	}
	injected := false
	if isHTTPProtocol(serviceProtocol(b.snap.Service, cp.ServiceConfig)) {
		var err error
		if injected, err = b.injectHTTPRBAC(chains, cp); err != nil {
			return err
		}
	}
	if !injected {
		rbac := b.networkRBAC(cp.Intentions, b.snap.IntentionDefaultAllow)
		for _, fc := range chains {
			fc.Filters = append([]*listenerv3.Filter{rbac}, fc.Filters...)
		}
	}
	tls := b.meshDownstreamTLS(cp.Leaf)
	for _, fc := range chains {
		fc.TransportSocket = tls
	}
	return nil
}

// hcmType is the message of HTTP connection manager filters (the typed
// config identifies a filter; its name is free in the v3 API).
const hcmType protoreflect.FullName = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"

// injectHTTPRBAC puts the HTTP RBAC filter at the head of the HTTP
// connection manager of every chain. When a chain has none (a TCP chain,
// or a manager configured otherwise than inline), it changes nothing and
// reports false: the caller falls back to the network RBAC filter, as
// Consul does. Unlike Consul it is all or nothing, so that no chain gets
// both filters.
func (b *builder) injectHTTPRBAC(chains []*listenerv3.FilterChain, cp *proxycfg.ConnectProxySnapshot) (bool, error) {
	type found struct {
		idx int
		hcm *hcmv3.HttpConnectionManager
	}
	hcms := make([]found, len(chains))
	for i, fc := range chains {
		hcms[i].idx = -1
		for j, f := range fc.GetFilters() {
			tc := f.GetTypedConfig()
			if tc == nil || tc.MessageName() != hcmType {
				continue
			}
			hcm := &hcmv3.HttpConnectionManager{}
			if err := tc.UnmarshalTo(hcm); err != nil {
				return false, fmt.Errorf("filter chain %d: %s: %w", i, f.GetName(), err)
			}
			hcms[i] = found{idx: j, hcm: hcm}
			break
		}
		if hcms[i].idx < 0 {
			return false, nil
		}
	}
	rbac := b.httpRBAC(cp.Intentions, b.snap.IntentionDefaultAllow)
	for i, fc := range chains {
		h := hcms[i]
		h.hcm.HttpFilters = append([]*hcmv3.HttpFilter{rbac}, h.hcm.HttpFilters...)
		fc.Filters[h.idx] = b.networkFilter(fc.Filters[h.idx].GetName(), h.hcm)
	}
	return true, nil
}

// upstreamOverrides are an upstream's envoy_cluster_json and
// envoy_listener_json, decoded (nil when unset or ignored). Both are
// ignored on a chain that config entries shape; the listener also on an
// explicit upstream without a local bind port or socket, which has no
// listener to replace.
func upstreamOverrides(u *proxycfg.UpstreamSnapshot) (*clusterv3.Cluster, *listenerv3.Listener, error) {
	if !u.Chain.Default {
		return nil, nil, nil
	}
	var c *clusterv3.Cluster
	if raw := upstreamEscapeHatch(u, cfgClusterJSON); raw != "" {
		c = &clusterv3.Cluster{}
		if err := decodeResource(raw, c); err != nil {
			return nil, nil, escapeHatchError(cfgClusterJSON, err)
		}
	}
	var l *listenerv3.Listener
	def := u.Upstream
	if raw := upstreamEscapeHatch(u, cfgListenerJSON); raw != "" &&
		(def.CentrallyConfigured || def.LocalBindPort > 0 || def.LocalBindSocketPath != "") {
		l = &listenerv3.Listener{}
		if err := decodeResource(raw, l); err != nil {
			return nil, nil, escapeHatchError(cfgListenerJSON, err)
		}
	}
	return c, l, nil
}

// upstreamEscapeHatch is the JSON of an upstream's escape hatch: the
// registration's opaque config, else the central configuration
// (service-defaults UpstreamConfig), which Consul merges into the former
// without overwriting it.
func upstreamEscapeHatch(u *proxycfg.UpstreamSnapshot, key string) string {
	if raw := opaqueJSON(u.Upstream.Config, key); raw != "" {
		return raw
	}
	if u.Config == nil {
		return ""
	}
	if key == cfgClusterJSON {
		return u.Config.EnvoyClusterJSON
	}
	return u.Config.EnvoyListenerJSON
}

// addClusterOverride adds an upstream's envoy_cluster_json in place of the
// cluster of its (default, hence single-target) chain, with that
// cluster's mTLS, and records in the current part which endpoint set it
// reads. generatedListener says the upstream's generated filter (and
// routes) will send traffic to the chain's cluster by its generated name:
// a renamed override must then be found under that name too, or the
// upstream would lead nowhere.
func (b *builder) addClusterOverride(u *proxycfg.UpstreamSnapshot, leaf *structs.IssuedCert, c *clusterv3.Cluster, generatedListener bool) error {
	clusters, err := chainClusters(u.Chain)
	if err != nil {
		return err
	}
	if len(clusters) != 1 || clusters[0].target == nil {
		return escapeHatchError(cfgClusterJSON, fmt.Errorf("chain %q has %d clusters, not one to replace", u.Chain.ServiceName, len(clusters)))
	}
	t := clusters[0].target
	c.TransportSocket = b.meshUpstreamTLS(leaf, t.SNI, targetSpiffeID(t, b.td))
	if err := b.addOverride(cfgClusterJSON, ClusterType, c.GetName(), c); err != nil {
		return err
	}
	ov := b.curOverrides()
	if generatedListener {
		ov.refs = append(ov.refs, ref{
			typeURL: ClusterType, name: clusters[0].name,
			from: fmt.Sprintf("%s %q: upstream %q's listener", cfgClusterJSON, c.GetName(), u.ID),
		})
	}
	ov.cluster = true
	if c.GetType() == clusterv3.Cluster_EDS || c.GetEdsClusterConfig() != nil {
		ov.eds = c.GetEdsClusterConfig().GetServiceName()
		if ov.eds == "" {
			ov.eds = c.GetName()
		}
	}
	return nil
}

// connectUpstreamEndpoints adds a sidecar upstream's endpoint sets: those
// of its chain, or the one its envoy_cluster_json reads (up is the
// upstream's part).
func (b *builder) connectUpstreamEndpoints(u *proxycfg.UpstreamSnapshot, up *part) error {
	ov := up.overrides
	if ov == nil || !ov.cluster {
		clusters := up.clusters // listed by the upstream's part
		if clusters == nil {
			var err error
			if clusters, err = chainClusters(u.Chain); err != nil {
				return err
			}
		}
		b.addUpstreamEndpoints(u, clusters)
		return nil
	}
	if ov.eds == "" {
		return nil
	}
	clusters, err := chainClusters(u.Chain)
	if err != nil {
		return err
	}
	b.add(EndpointType, ov.eds, b.targetAssignment(ov.eds, u, clusters[0].target))
	return nil
}
