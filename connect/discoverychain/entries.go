// Package discoverychain compiles a service's discovery chain: from the
// service name, the datacenter and trust domain it is evaluated in, and the
// config entries that shape it (service-router, service-splitter,
// service-resolver, service-defaults, proxy-defaults), to the graph of
// router, splitter and resolver nodes and the targets they end at, with the
// names Consul gives them. The state store uses it to refuse config entry
// writes that would break a chain; the server serves its output at
// /v1/discovery-chain/<service>; proxy configuration turns it into Envoy
// clusters and routes.
//
// The package is pure: no I/O, no shared state. Compile never modifies its
// input and returns a chain that shares no memory with it.
package discoverychain

import (
	"sort"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Entries is the set of config entries a chain may consult, by service
// name. The state store collects them by walking the chain (see
// state.Store.DiscoveryChainEntries); tests build them with Add.
type Entries struct {
	Routers   map[string]*structs.ServiceRouterConfigEntry
	Splitters map[string]*structs.ServiceSplitterConfigEntry
	Resolvers map[string]*structs.ServiceResolverConfigEntry
	Services  map[string]*structs.ServiceConfigEntry
	// ProxyDefaults is the proxy-defaults "global" entry, if any.
	ProxyDefaults *structs.ProxyConfigEntry
}

// NewEntries returns an empty set.
func NewEntries() *Entries {
	return &Entries{
		Routers:   make(map[string]*structs.ServiceRouterConfigEntry),
		Splitters: make(map[string]*structs.ServiceSplitterConfigEntry),
		Resolvers: make(map[string]*structs.ServiceResolverConfigEntry),
		Services:  make(map[string]*structs.ServiceConfigEntry),
	}
}

// Add puts entries into the set; kinds that do not shape chains are
// ignored.
func (e *Entries) Add(entries ...structs.ConfigEntry) *Entries {
	for _, entry := range entries {
		switch v := entry.(type) {
		case *structs.ServiceRouterConfigEntry:
			e.Routers[v.Name] = v
		case *structs.ServiceSplitterConfigEntry:
			e.Splitters[v.Name] = v
		case *structs.ServiceResolverConfigEntry:
			e.Resolvers[v.Name] = v
		case *structs.ServiceConfigEntry:
			e.Services[v.Name] = v
		case *structs.ProxyConfigEntry:
			e.ProxyDefaults = v
		}
	}
	return e
}

// IsChainEmpty reports whether no router, splitter or resolver is present.
func (e *Entries) IsChainEmpty() bool {
	return len(e.Routers) == 0 && len(e.Splitters) == 0 && len(e.Resolvers) == 0
}

// Protocol returns the protocol of a service as the chain sees it: its
// service-defaults protocol when that entry exists, else the proxy-defaults
// "protocol", else tcp.
func (e *Entries) Protocol(service string) string {
	if sd := e.Services[service]; sd != nil {
		return strings.ToLower(defaultIfEmpty(sd.Protocol, structs.DefaultServiceProtocol))
	}
	if e.ProxyDefaults != nil {
		if p := e.ProxyDefaults.Protocol(); p != "" {
			return p
		}
	}
	return structs.DefaultServiceProtocol
}

func defaultIfEmpty(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// sortedKeys returns the keys of a string-keyed map in order, so that every
// walk over a map is deterministic.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
