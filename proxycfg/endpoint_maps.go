package proxycfg

import (
	"runtime"
	"sync"
	"unsafe"

	"github.com/trellis-mesh/trellis/structs"
)

// endpointMaps lets the state machines of one manager share the endpoint
// maps of their UpstreamSnapshots (Endpoints, GatewayEndpoints). Data
// sources hand one shared result to every proxy asking the same question,
// and most chains have a single target, so when an upstream's endpoints
// change, every affected proxy used to build the same one-entry map
// {target: result.Nodes}: two allocations (400 bytes) per proxy. Now the
// first proxies build it and the others reuse it.
//
// Sharing is safe because such a map is never modified once built, like
// every map reachable from a snapshot, and because a hit is checked by
// value: the map's one entry is exactly the key and the slice asked for.
// The identity of an UpstreamSnapshot, on which xds/gen keys its reuse,
// is untouched: each proxy still stores a new UpstreamSnapshot for every
// change.
//
// A map is kept from the second proxy asking for it on (the first one
// only leaves a trace in seen), so that a result no other proxy asks
// about (another ACL token, say) costs no entry. An entry lives as long
// as its result, which is as long as a source or an event in flight still
// holds it, that is as long as another proxy may still ask for it: a
// cleanup of the result drops it.
//
// The zero value is ready to use; it is safe for concurrent use.
type endpointMaps struct {
	mu sync.Mutex
	// entries are by the address of their result (never dereferenced:
	// the cache does not keep results alive).
	entries map[uintptr]endpointMap
	// seen holds the addresses of results asked about once, by a hash
	// of the address; a collision only delays sharing.
	seen [256]uintptr
	// evictFn is evict, made once rather than for every cleanup.
	evictFn func(evictArg)
}

// endpointMap is the one-entry map {key: nodes}.
type endpointMap struct {
	key   string
	nodes structs.CheckServiceNodes
	m     map[string]structs.CheckServiceNodes
}

// evictArg is what the cleanup of a result needs to drop its entry.
type evictArg struct {
	addr  uintptr
	nodes uintptr // the entry's unsafe.SliceData(nodes)
}

// single returns the map {key: r.Nodes} (see nonNilNodes), shared with
// the other callers asking for the same key and result. Callers must
// never modify it.
func (c *endpointMaps) single(key string, r *structs.IndexedCheckServiceNodes) map[string]structs.CheckServiceNodes {
	addr := uintptr(unsafe.Pointer(r)) //nolint:gosec // the result's address as a map key, never dereferenced
	nodes := nonNilNodes(r.Nodes)
	c.mu.Lock()
	defer c.mu.Unlock()
	// The address alone is not enough: a result may have been collected
	// and another allocated in its place. But the entry's map holds its
	// slice's array, which therefore cannot have been reused: an equal
	// slice is the same list.
	if e, ok := c.entries[addr]; ok && e.key == key && sameSlice(e.nodes, nodes) {
		return e.m
	}
	m := map[string]structs.CheckServiceNodes{key: nodes}
	i := uint64(addr>>3) * 0x9E3779B97F4A7C15 >> (64 - 8) // Fibonacci hashing into seen
	if c.seen[i] != addr {
		c.seen[i] = addr
		return m
	}
	c.seen[i] = 0
	if c.entries == nil {
		c.entries = make(map[uintptr]endpointMap)
	}
	if c.evictFn == nil {
		c.evictFn = c.evict
	}
	// This replaces an entry of a collected result at the same address,
	// or (rarely) one of another key of the same result.
	c.entries[addr] = endpointMap{key: key, nodes: nodes, m: m}
	runtime.AddCleanup(r, c.evictFn, evictArg{addr: addr, nodes: uintptr(unsafe.Pointer(unsafe.SliceData(nodes)))}) //nolint:gosec // addresses compared, never dereferenced
	return m
}

// evict drops the entry a collected result left, if it is still there.
func (c *endpointMaps) evict(a evictArg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[a.addr]; ok && uintptr(unsafe.Pointer(unsafe.SliceData(e.nodes))) == a.nodes { //nolint:gosec // addresses compared, never dereferenced
		delete(c.entries, a.addr)
	}
}

// sameSlice reports whether a and b are the same slice (not just equal
// elements).
func sameSlice[T any](a, b []T) bool {
	return unsafe.SliceData(a) == unsafe.SliceData(b) && len(a) == len(b) && cap(a) == cap(b) //nolint:gosec // identity of the backing arrays, never dereferenced
}

// len is the number of entries, for tests.
func (c *endpointMaps) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// withNodes returns a new map: m (which is not modified) with key set to
// r's nodes. When that map has just that one entry, it comes from the
// manager's shared maps.
func withNodes(s *state, m map[string]structs.CheckServiceNodes, key string, r *structs.IndexedCheckServiceNodes) map[string]structs.CheckServiceNodes {
	if _, ok := m[key]; len(m) == 0 || len(m) == 1 && ok {
		return s.m.endpoints.single(key, r)
	}
	out := copyMap(m)
	out[key] = nonNilNodes(r.Nodes)
	return out
}
