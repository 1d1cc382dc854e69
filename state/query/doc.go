// Package query is the shared read model above the state store: the
// derived reads (service health, CA roots, intentions, resolved service
// configuration, gateway services) as pure functions over the store. Each runs one read against a
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
