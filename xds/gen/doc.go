// Package gen turns one proxycfg.ConfigSnapshot into the Envoy v3 resources
// (listeners, clusters, endpoints and routes) of the proxy or gateway it
// describes.
//
// Generation is a pure function: Generate reads the snapshot and nothing
// else, never modifies it, keeps no state between calls and is safe for
// concurrent use. The same snapshot always gives the same resources, so the
// ADS server can version resources by their encoding.
//
// Names follow Consul's agent/xds so that dashboards and runbooks written
// for Consul keep working:
//
//	public_listener:<addr>:<port>     inbound mTLS listener of a sidecar
//	<upstream>:<addr>:<port>          one outbound listener per upstream
//	outbound_listener:<addr>:<port>   transparent proxy outbound listener
//	local_app                         the proxied application
//	<svc>.default.<dc>.internal.<td>  an upstream target (its SNI); subsets
//	                                  prefix "<subset>."
//	failover-target~<n>~<cluster>     the members of an aggregate failover
//	                                  cluster
//	<dc>.internal.<td>                a remote datacenter's mesh gateways
//	default:<addr>:<port>             a mesh or terminating gateway
//	<protocol>:<addr>:<port>          an ingress listener (route "<port>")
//	exposed_path_<path>:<addr>:<port> a path exposed without mTLS
//	                                  (Expose.Paths), to local_app or
//	exposed_cluster_<port>            the app's other local port
//
// A Generator does the same for the successive snapshots of one proxy,
// rebuilding only the parts whose inputs changed (an endpoint change of one
// upstream rebuilds that upstream) and returning the previous messages for
// the rest, which the ADS server then sends or versions without encoding
// them again.
//
// A sidecar's escape hatches, Consul's envoy_public_listener_json,
// envoy_local_cluster_json, envoy_listener_json and envoy_cluster_json
// opaque config keys, replace the resources they name with the user's
// own, with Consul's injections (mTLS and intentions on a custom public
// listener, mTLS on a custom upstream cluster). One that cannot be
// delivered as given fails the generation with ErrInvalidEscapeHatch
// (see escape_hatches.go).
//
// Every generated set passes Validate: each resource and every typed config
// packed inside it passes the Envoy protos' ValidateAll, and every cluster,
// route configuration and endpoint set that something names is present.
package gen
