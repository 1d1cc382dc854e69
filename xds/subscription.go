package xds

import (
	"maps"
	"slices"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// Subscription follows the listener names one stream subscribes to. A
// proxyless gRPC client asks for the listener named after what the
// application dials (xds:///api asks for "api") and declares nothing else,
// so its Source learns its upstreams from here. It is safe for concurrent
// use.
type Subscription struct {
	mu sync.Mutex
	// names and changed are guarded by mu.
	names []string
	// changed is closed, and replaced, at each change of names.
	changed chan struct{}
}

func newSubscription() *Subscription {
	return &Subscription{changed: make(chan struct{})}
}

// Names returns the explicitly subscribed listener names, sorted (a
// wildcard subscription names none), and a channel closed at their next
// change. The slice must not be modified.
func (s *Subscription) Names() ([]string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names, s.changed
}

// set replaces the names (sorted, owned by the Subscription from now on),
// waking the waiters if they changed.
func (s *Subscription) set(names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(s.names, names) {
		return
	}
	s.names = names
	close(s.changed)
	s.changed = make(chan struct{})
}

// listenerNames returns the sorted explicit listener subscription and the
// generation of the subscription it was read at; ok is false when the
// subscription did not change since generation seen.
func (s *session) listenerNames(seen uint64) (names []string, gen uint64, ok bool) {
	ts := s.types[resource.ListenerType]
	if ts == nil || ts.subGen == seen {
		return nil, seen, false
	}
	return slices.Sorted(maps.Keys(ts.names)), ts.subGen, true
}

// requestListenerNames are the listener names one request subscribes to
// (nil for another type, a wildcard, or none), sorted and distinct.
func requestListenerNames(r request) []string {
	if r.typeURL != resource.ListenerType {
		return nil
	}
	var out []string
	for _, n := range slices.Concat(r.names, r.subscribe) {
		if n != "*" && n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
