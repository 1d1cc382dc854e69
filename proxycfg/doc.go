// Package proxycfg keeps, for every Connect proxy and gateway an agent
// serves, an always-current and immutable ConfigSnapshot: everything the
// xDS server needs to configure that Envoy (CA roots, leaf certificate,
// intentions, upstream discovery chains and endpoints, gateway services).
//
// The pieces, following the seed's flow (see ARCHITECTURE.md):
//
//   - Manager: the config sources (proxycfg/sources/local on every agent,
//     proxycfg/sources/catalog on servers) Register and Deregister proxy
//     services with it; the xDS server Watches proxies by ProxyID and
//     receives snapshots on a channel.
//   - One state machine per registered proxy, with one owning goroutine.
//     It declares the data watches its kind needs (connect-proxy,
//     mesh-gateway, ingress-gateway, terminating-gateway), mutates its
//     private state on every UpdateEvent, adds and cancels dependent
//     watches as results change (an upstream's discovery chain decides
//     which targets' endpoints are watched), and once the state is valid
//     builds a fresh ConfigSnapshot: at once for the first change after a
//     quiet coalescing window, and otherwise at the window's end for
//     everything that arrived within it (at most one snapshot per window).
//   - DataSources: small interfaces, one per kind of data, that the state
//     machines consume. proxycfg only declares them; the agent wires in a
//     server-local implementation (state store + memdb.WatchSet) or a
//     client implementation (deduplicated blocking RPCs to the servers).
//
// Typical wiring:
//
//	m, _ := proxycfg.New(proxycfg.Config{Logger: l, Datacenter: "dc1", DataSources: ds})
//	defer m.Close()
//	_ = m.Register(id, svc, proxycfg.SourceLocal, token, true)
//	ch, cancel := m.Watch(id)
//	defer cancel()
//	for snap := range ch { ... generate xDS resources from snap ... }
//
// Snapshots are shared by every watcher of a proxy and must be treated as
// read-only, like every result a data source delivers.
package proxycfg
