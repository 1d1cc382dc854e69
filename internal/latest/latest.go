// Package latest keeps, per key, the latest of a value that many
// goroutines would otherwise each build alike: the endpoint set of an
// upstream shared by a thousand proxies is built and encoded once, not a
// thousand times.
//
// A Cache holds one value per key and replaces it when a caller finds it
// stale, so it needs no invalidation. Keys that stop being asked for are
// dropped by a sweep that runs when the cache has doubled since the last
// one: an entry not asked for between two sweeps goes.
package latest

import "sync"

// minSweep is the size below which a Cache never sweeps.
const minSweep = 1024

// Cache maps keys to the latest value built for them. The zero value is
// ready to use; it is safe for concurrent use. A value must not be
// modified once stored: every caller gets the same one.
type Cache[K comparable, V any] struct {
	mu sync.Mutex
	// entries and sweepAt are guarded by mu. sweepAt is the size at which
	// the next sweep runs (0: minSweep).
	entries map[K]*entry[V]
	sweepAt int
}

type entry[V any] struct {
	v V
	// used is set when the entry is asked for, cleared by every sweep.
	used bool
}

// Get returns the value stored under k when current reports it is still
// the right one, or else the one build returns, which it stores under k.
// build runs under the cache's lock, so concurrent callers asking for the
// same new value wait for one build instead of each building it; it must
// be quick and must not use the cache. A build error is returned and
// nothing is stored.
func (c *Cache[K, V]) Get(k K, current func(V) bool, build func() (V, error)) (V, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[k]; e != nil && current(e.v) {
		e.used = true
		return e.v, nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	if c.entries == nil {
		c.entries = make(map[K]*entry[V])
	}
	c.entries[k] = &entry[V]{v: v, used: true}
	c.sweepLocked()
	return v, nil
}

// Len returns the number of values held.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// sweepLocked drops the entries not asked for since the last sweep, once
// the cache has grown to twice its size after that sweep.
func (c *Cache[K, V]) sweepLocked() {
	limit := max(c.sweepAt, minSweep)
	if len(c.entries) < limit {
		return
	}
	for k, e := range c.entries {
		if !e.used {
			delete(c.entries, k)
			continue
		}
		e.used = false
	}
	c.sweepAt = 2 * len(c.entries)
}
