package proxycfg

import (
	"slices"

	"github.com/trellis-mesh/trellis/structs"
)

// Upstreams chosen at run time. A proxyless gRPC application is
// Connect-native: it declares no upstreams, and learns what it dials only
// from the listener names its xDS client asks for. The xDS server hands
// those names to SetUpstreams, and the proxy's state machine treats each as
// an upstream to that service in the local datacenter, next to the
// upstreams its registration declares, as transparent mode treats the
// services intentions let it reach.

// SetUpstreams makes names the run-time upstreams of proxy id: each a
// service name, watched with its discovery chain and endpoints like a
// declared upstream, with its central upstream config (the proxy's
// resolved config is asked again with the new names). A name the
// registration declares already is not added twice. Setting the same set
// again changes nothing; the set survives a re-registration of the proxy
// and is kept for a proxy that is not registered yet. Only connect-proxy
// registrations follow it; gateways ignore it.
func (m *Manager) SetUpstreams(id ProxyID, names []string) {
	names = normalizeNames(names)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	sl := m.slots[id]
	if sl == nil {
		if len(names) == 0 {
			return
		}
		sl = &slot{watchers: make(map[*watcher]struct{})}
		m.slots[id] = sl
	}
	if slices.Equal(sl.dynamic, names) {
		return
	}
	sl.dynamic = names
	if sl.state != nil {
		sl.state.offerDynamic(names)
		return
	}
	sl.mu.Lock()
	unused := len(names) == 0 && len(sl.watchers) == 0
	sl.mu.Unlock()
	if unused {
		delete(m.slots, id)
	}
}

// normalizeNames returns the distinct non-empty names, sorted, in a new
// slice (the caller may reuse its own).
func normalizeNames(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// offerDynamic hands the state's goroutine a new run-time upstream set,
// replacing one it has not taken yet. It never blocks: callers hold
// Manager.mu, so they are the only sender.
func (s *state) offerDynamic(names []string) {
	select {
	case <-s.dynamic:
	default:
	}
	select {
	case s.dynamic <- names:
	default:
	}
}

// dynamicUpstreams is implemented by the kinds that follow run-time
// upstreams.
type dynamicUpstreams interface {
	// setDynamic replaces the run-time upstream names (sorted, distinct)
	// and reports whether the snapshot changed.
	setDynamic(s *state, names []string) bool
}

// applyDynamic is the state goroutine's handling of a new set.
func (s *state) applyDynamic(names []string) {
	if d, ok := s.kind.(dynamicUpstreams); ok && d.setDynamic(s, names) {
		s.dirty = true
	}
}

func (c *connectProxy) setDynamic(s *state, names []string) bool {
	if slices.Equal(c.dynamic, names) {
		return false
	}
	c.dynamic = names
	// The new names' central config comes with the next resolved config;
	// meanwhile they take the upstream defaults.
	if _, err := c.watchServiceConfig(s); err != nil {
		s.log().Error("proxycfg: data source refused a watch", "watch", watchServiceConfig.String(), "error", err)
	}
	before := c.ups.ups
	c.reconcile(s)
	return len(before) != len(c.ups.ups) || !slices.Equal(before, c.ups.ups)
}

// NativeProxy is the registration under which the manager serves a
// Connect-native service's own xDS client (a proxyless gRPC application):
// a connect-proxy of the same ID standing for the service itself, whose
// local service is the application's address and port. Its upstreams are
// set at run time (SetUpstreams). svc is not modified.
func NativeProxy(svc *structs.NodeService) *structs.NodeService {
	return &structs.NodeService{
		Kind:    structs.ServiceKindConnectProxy,
		ID:      svc.ID,
		Service: svc.Service,
		Address: svc.Address,
		Port:    svc.Port,
		Proxy: structs.ConnectProxyConfig{
			DestinationServiceName: svc.Service,
			DestinationServiceID:   svc.ID,
			LocalServiceAddress:    svc.Address,
			LocalServicePort:       svc.Port,
		},
	}
}

// SourceNative registers the proxies that stand for Connect-native
// applications' own xDS clients (NativeProxy), one per stream, for as long
// as the stream lasts.
const SourceNative ProxySource = "native"
