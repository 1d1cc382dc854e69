package agent

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/structs"
	"github.com/trellis-mesh/trellis/xds"
	"github.com/trellis-mesh/trellis/xds/gen"
)

// Proxyless gRPC: a Connect-native application whose gRPC library speaks
// xDS itself (its bootstrap's node is the service's ID, with TRELLIS_GRPC
// metadata) gets its configuration from a proxy the manager runs for its
// stream alone: proxycfg.NativeProxy of the local service, whose upstreams
// are the services its listener subscriptions name. One per stream, so
// that two processes of one service (or two channels of one process) each
// get what they ask for.

// watchNative starts the stream's proxy and follows its subscriptions.
// The goroutine it starts ends when ctx does (or the manager closes),
// deregistering the proxy and closing the channel; the stream waits for
// that, and so does stop.
func (s *xdsSource) watchNative(ctx context.Context, ref xds.ProxyRef) (<-chan *proxycfg.ConfigSnapshot, error) {
	svc, svcChanged := s.watchLocal(ref.ServiceID)
	if svc == nil {
		// The bootstrap names a service this agent does not have: the
		// client retries with backoff, and finds it once registered.
		return nil, status.Errorf(codes.NotFound, "no service %q registered on this agent", ref.ServiceID)
	}
	if s.acl != nil {
		if err := s.authorizeProxy(ref.Token, svc); err != nil {
			return nil, err
		}
	}
	nativeID := fmt.Sprintf("%s~grpc~%d", svc.ID, s.nativeStreams.Add(1))
	id := proxycfg.ProxyID{Node: s.nodeName, ServiceID: nativeID, Token: ref.Token}
	register := func(svc *structs.NodeService) error {
		native := proxycfg.NativeProxy(svc)
		native.ID = nativeID
		return s.native.Register(id, native, proxycfg.SourceNative, ref.Token, true)
	}
	names, changed := ref.Listeners.Names()
	s.native.SetUpstreams(id, s.grpcTargets(names))
	if err := register(svc); err != nil {
		s.native.SetUpstreams(id, nil)
		return nil, status.Errorf(codes.Unavailable, "proxyless stream of %s: %v", svc.ID, err)
	}
	snaps, cancel := s.native.Watch(id)
	out := make(chan *proxycfg.ConfigSnapshot, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer s.native.Deregister(id, proxycfg.SourceNative)
		defer cancel()
		var last *proxycfg.ConfigSnapshot
		for {
			select {
			case <-ctx.Done():
				return
			case snap, ok := <-snaps:
				if !ok {
					return
				}
				last = snap
				offer(out, snap)
			case <-changed:
				names, changed = ref.Listeners.Names()
				s.native.SetUpstreams(id, s.grpcTargets(names))
				// A new server listener name needs no new upstream, only
				// a new build of the same snapshot.
				if last != nil {
					offer(out, last)
				}
			case <-svcChanged:
				// A re-registration (a new port, say) restarts the proxy
				// with it; a deregistration ends the stream, whose client
				// then finds the service gone when it reconnects.
				svc, svcChanged = s.watchLocal(ref.ServiceID)
				if svc == nil {
					return
				}
				if err := register(svc); err != nil {
					return
				}
			}
		}
	}()
	return out, nil
}

// offer replaces whatever ch holds by snap; the caller is ch's only
// sender.
func offer(ch chan *proxycfg.ConfigSnapshot, snap *proxycfg.ConfigSnapshot) {
	select {
	case <-ch:
	default:
	}
	ch <- snap
}

// grpcTargets are the services a gRPC client's listener names dial.
func (s *xdsSource) grpcTargets(listeners []string) []string {
	var out []string
	for _, l := range listeners {
		if svc, ok := gen.GRPCTarget(l, s.datacenter); ok {
			out = append(out, svc)
		}
	}
	return out
}

// nativeBuilder turns a proxyless stream's snapshots into the gRPC
// flavour of resources for the listeners it subscribes to at the time.
func (s *xdsSource) nativeBuilder(ref xds.ProxyRef) xds.Builder[*proxycfg.ConfigSnapshot] {
	authorize := s.recheck(ref)
	return func(snap *proxycfg.ConfigSnapshot) (xds.Resources, error) {
		if err := authorize(snap); err != nil {
			return nil, err
		}
		names, _ := ref.Listeners.Names()
		res, err := gen.GenerateGRPC(snap, names)
		return xds.Resources(res), err
	}
}
