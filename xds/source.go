package xds

import (
	"context"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// Resources is one complete, immutable set of Envoy resources for a proxy,
// keyed by type URL (resource.ClusterType, ...) and then by resource name
// (the resource's own name: Cluster.Name, ClusterLoadAssignment.ClusterName,
// Listener.Name, RouteConfiguration.Name, ...).
//
// A set is complete: a resource of a type that is absent from the set does
// not exist, and the server removes it from the proxy. A type that has no
// key at all is an empty type. The server and every stream share the
// type maps read-only, so a producer must never modify one (or a message
// in it) after handing it over; the outer map only until the next set is
// asked for (see Source.Builder). Reusing the same message pointer for an
// unchanged resource in the next set is encouraged, because the server
// then skips re-encoding it.
type Resources map[string]map[string]proto.Message

// ProxyRef identifies the proxy behind one ADS stream.
type ProxyRef struct {
	// ServiceID is the proxy's service ID: the Envoy node ID.
	ServiceID string
	// Node is the node the proxy is registered on: the node metadata key
	// node_name, or this agent's node when Envoy does not send it.
	Node string
	// Token is the ACL token from the x-consul-token gRPC metadata, kept for
	// the Source to authorize the watch. Empty when none was sent.
	Token string
	// Proxyless is set when the node metadata key TRELLIS_GRPC is "true":
	// the client is a gRPC library's own xDS client (a Connect-native
	// application, no Envoy), which needs gRPC's flavour of resources and
	// names the listeners it wants rather than declaring upstreams.
	Proxyless bool
	// Listeners follows the listener names the stream subscribes to. The
	// server sets it on every stream it serves.
	Listeners *Subscription
}

// Source gives the server a proxy's configuration as it changes, as
// values of U (the agent's proxycfg snapshots; Resources themselves in
// tests), and the way to turn them into Resources. Building happens on the
// stream's own goroutine, so a stream costs the Source no goroutine and a
// change no hand-off between goroutines.
type Source[U any] interface {
	// Watch is called once per ADS stream, as soon as the stream's first
	// request names the proxy. It must return promptly. The channel delivers
	// the latest value whenever it changes (intermediate values may be
	// skipped) and delivers nothing while the proxy is unknown (the stream
	// stays open and silent). The Source must close the channel once ctx
	// ends: the stream waits for that before it finishes. Closing it
	// earlier ends the stream with codes.Unavailable, so Envoy reconnects.
	// An error ends the stream; a gRPC status error keeps its code, any other
	// error becomes codes.Unavailable.
	Watch(ctx context.Context, proxy ProxyRef) (<-chan U, error)
	// Builder returns what turns the values of one stream's watch into
	// complete Resources sets. It is called once per stream, and the
	// Builder only ever from that stream's goroutine, so it may keep state
	// between calls (a generator reusing what did not change). A type's
	// map must never be modified once returned (the server keeps it);
	// returning the very same map for a type that did not change lets the
	// server skip it. The outer map is the Builder's again once it is
	// called next: the server reads it only until then, so a Builder may
	// reuse it. An error is logged and the stream keeps serving what it
	// has, except a gRPC status error, which ends the stream with it (a
	// proxy whose token may not have this configuration).
	Builder(proxy ProxyRef) Builder[U]
}

// Builder turns one value of a proxy's watch into its complete Resources.
type Builder[U any] func(U) (Resources, error)

// nodeNameKey is the Envoy node metadata key naming the node the proxy is
// registered on (Consul's name for it).
const nodeNameKey = "node_name"

// proxylessKey is the node metadata key a gRPC client's bootstrap sets to
// "true" (see ProxyRef.Proxyless).
const proxylessKey = "TRELLIS_GRPC"

// tokenMetadataKey is the gRPC metadata key carrying the ACL token.
const tokenMetadataKey = "x-consul-token"

// proxyRef builds the identity of a stream from its first request's node and
// the stream's gRPC metadata.
func proxyRef(ctx context.Context, node *corev3.Node, defaultNode string) (ProxyRef, error) {
	if node.GetId() == "" {
		return ProxyRef{}, ErrMissingNode
	}
	md := node.GetMetadata().GetFields()
	ref := ProxyRef{ServiceID: node.GetId(), Node: defaultNode, Proxyless: md[proxylessKey].GetStringValue() == "true"}
	if v := md[nodeNameKey].GetStringValue(); v != "" {
		ref.Node = v
	}
	if gmd, ok := metadata.FromIncomingContext(ctx); ok {
		if t := gmd.Get(tokenMetadataKey); len(t) > 0 {
			ref.Token = t[0]
		}
	}
	return ref, nil
}
