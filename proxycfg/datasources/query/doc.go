// Package query holds the reads behind proxycfg's data sources as pure
// functions over the state store: each runs one read against a
// *state.Store, adds the watch channels that close when its result may
// change to a memdb.WatchSet (which may be nil), and returns a fresh
// result with the index it was read at.
//
// They are shared, so that a proxy gets the same answer whichever way it
// asks: the server-local data sources (proxycfg/datasources/serverstate)
// call them in WatchSet loops, and the server's RPC endpoints call them
// inside blocking queries, which client agents reach through
// proxycfg/datasources/remote. Results are the caller's and are never
// modified here afterwards.
package query

import "errors"

// Sentinel errors of the package.
var (
	// ErrMissingName refuses a read without the service (or gateway) name
	// it is about.
	ErrMissingName = errors.New("query: missing service name")
	// ErrInvalidFilter wraps a filter expression that does not parse.
	ErrInvalidFilter = errors.New("query: invalid filter")
)

// The internal RPC methods that serve the derived reads of this package
// to client agents (the others use the existing methods of structs).
// Arguments and replies are given beside each. They belong with the other
// method names in structs/endpoints*.go; they live here because their
// reply types are proxycfg's.
const (
	// MethodResolveServiceConfig merges proxy-defaults and
	// service-defaults for a proxied service and its upstreams.
	MethodResolveServiceConfig = "ConfigEntry.ResolveServiceConfig" // *structs.ServiceConfigRequest -> *structs.ServiceConfigResponse
	// MethodIntentionUpstreams lists the services intentions allow a
	// service to reach.
	MethodIntentionUpstreams = "Internal.IntentionUpstreams" // *structs.ServiceSpecificRequest -> *structs.ServiceNames
	// MethodGatewayServices lists the services an ingress or terminating
	// gateway routes to.
	MethodGatewayServices = "Internal.GatewayServices" // *structs.ServiceSpecificRequest -> *structs.IndexedGatewayServices
	// MethodServicesByKind lists every instance of a service kind with
	// its checks.
	MethodServicesByKind = "Internal.ServicesByKind" // *structs.ServiceKindRequest -> *structs.IndexedCheckServiceNodes
)
