package proxycfg

import (
	"context"
	"reflect"

	"github.com/trellis-mesh/trellis/structs"
)

// upstreamSet is the upstream machinery shared by connect proxies and
// ingress gateways. Per upstream it runs one discovery-chain watch; per
// chain result, one endpoints watch per target and one mesh-gateway watch
// per datacenter whose gateways a target goes through. Watches of targets
// a new chain no longer has are cancelled, and those of new targets
// started, so the watched set always follows the chain.
//
// The UpstreamSnapshot values in ups are never modified once stored: a
// change stores a modified copy (with new maps, never modified ones), so
// that snapshots can share them. A one-entry endpoint map may even be
// shared with other proxies (see endpointMaps).
type upstreamSet struct {
	// ups is never modified in place (With and Without copy it), so
	// snapshots share it: those built for other changes (a leaf, the
	// intentions, the roots) copy nothing.
	ups Upstreams
}

// put stores an upstream (a new value, never a modified one).
func (u *upstreamSet) put(up *UpstreamSnapshot) { u.ups = u.ups.With(up) }

// snapshot returns the upstreams for a new snapshot.
func (u *upstreamSet) snapshot() Upstreams {
	if u.ups == nil {
		u.ups = Upstreams{}
	}
	return u.ups
}

// set makes sure upstream id exists with this definition and central
// config, and that its chain is watched with req (restarting the chain
// watch when req changed; the old chain and endpoints stay until the new
// chain arrives, so that a configuration change does not drop traffic).
func (u *upstreamSet) set(s *state, id UpstreamID, def *structs.Upstream, cfg *structs.UpstreamConfig, req *structs.DiscoveryChainRequest) bool {
	changed := false
	switch cur := u.ups.Get(id); {
	case cur == nil:
		u.put(&UpstreamSnapshot{ID: id, Upstream: def, Config: cfg})
		changed = true
	case !reflect.DeepEqual(cur.Upstream, def) || !reflect.DeepEqual(cur.Config, cfg):
		nu := *cur
		nu.Upstream, nu.Config = def, cfg
		u.put(&nu)
		changed = true
	}
	s.watchOrLog(watchKey{kind: watchChain, owner: string(id)}, req, func(ctx context.Context, corr string) error {
		return s.m.ds.CompiledDiscoveryChain.Notify(ctx, req, corr, s.events)
	})
	return changed
}

// remove drops an upstream and cancels all its watches.
func (u *upstreamSet) remove(s *state, id UpstreamID) bool {
	if u.ups.Get(id) == nil {
		return false
	}
	s.reg.cancelOwner(string(id))
	u.ups = u.ups.Without(id)
	return true
}

// retain removes every upstream keep rejects.
func (u *upstreamSet) retain(s *state, keep func(UpstreamID) bool) bool {
	changed := false
	for _, up := range u.ups { // remove leaves this slice as it is
		if !keep(up.ID) {
			changed = u.remove(s, up.ID) || changed
		}
	}
	return changed
}

// handle applies a chain, target or mesh-gateway result; ok is false for
// any other watch.
func (u *upstreamSet) handle(s *state, w *watch, ev UpdateEvent) (changed, ok bool) {
	switch w.kind {
	case watchChain, watchTarget, watchMeshGateways:
	default:
		return false, false
	}
	cur := u.ups.Get(UpstreamID(w.owner))
	if cur == nil {
		return false, true // the upstream is gone; its watches are being cancelled
	}
	switch w.kind {
	case watchChain:
		resp, ok := resultAs[structs.DiscoveryChainResponse](s, ev)
		if !ok || resp.Chain == nil {
			return false, true
		}
		u.put(u.applyChain(s, cur, resp.Chain))
	case watchTarget:
		resp, ok := resultAs[structs.IndexedCheckServiceNodes](s, ev)
		if !ok {
			return false, true
		}
		nu := *cur
		nu.Endpoints = withNodes(s, cur.Endpoints, w.key, resp)
		u.put(&nu)
	case watchMeshGateways:
		resp, ok := resultAs[structs.IndexedCheckServiceNodes](s, ev)
		if !ok {
			return false, true
		}
		nu := *cur
		nu.GatewayEndpoints = withNodes(s, cur.GatewayEndpoints, w.key, resp)
		u.put(&nu)
	}
	return true, true
}

// applyChain stores a new chain for cur and reconciles the target and
// gateway watches with it. Endpoints of targets whose watch continues
// are kept; those of new or restarted watches are unknown until their
// first result.
func (u *upstreamSet) applyChain(s *state, cur *UpstreamSnapshot, chain *structs.CompiledDiscoveryChain) *UpstreamSnapshot {
	owner := string(cur.ID)
	local := s.m.cfg.Datacenter
	targets := make(map[string]*structs.ServiceSpecificRequest, len(chain.Targets))
	gateways := make(map[string]*structs.ServiceKindRequest)
	for tid, t := range chain.Targets {
		if t == nil {
			continue
		}
		dc := t.Datacenter
		if dc == "" {
			dc = local
		}
		targets[tid] = &structs.ServiceSpecificRequest{
			ServiceName:  t.Service,
			Connect:      true,
			QueryOptions: structs.QueryOptions{Datacenter: dc, Token: s.token, Filter: t.Subset.Filter},
		}
		if gdc := MeshGatewayDatacenter(t, local); gdc != "" && gateways[gdc] == nil {
			gateways[gdc] = &structs.ServiceKindRequest{
				Kind:         structs.ServiceKindMeshGateway,
				QueryOptions: structs.QueryOptions{Datacenter: gdc, Token: s.token},
			}
		}
	}
	s.reg.cancelWhere(watchTarget, owner, func(key string) bool { return targets[key] != nil })
	s.reg.cancelWhere(watchMeshGateways, owner, func(key string) bool { return gateways[key] != nil })

	nu := *cur
	nu.Chain = chain
	nu.Endpoints = make(map[string]structs.CheckServiceNodes, len(targets))
	for tid, req := range targets {
		started := s.ensure(watchKey{kind: watchTarget, owner: owner, key: tid}, req, func(ctx context.Context, corr string) error {
			return s.m.ds.Health.Notify(ctx, req, corr, s.events)
		})
		if eps, ok := cur.Endpoints[tid]; ok && !started {
			nu.Endpoints[tid] = eps
		}
	}
	nu.GatewayEndpoints = nil
	if len(gateways) > 0 {
		nu.GatewayEndpoints = make(map[string]structs.CheckServiceNodes, len(gateways))
	}
	for dc, req := range gateways {
		started := s.ensure(watchKey{kind: watchMeshGateways, owner: owner, key: dc}, req, func(ctx context.Context, corr string) error {
			return s.m.ds.ServicesByKind.Notify(ctx, req, corr, s.events)
		})
		if eps, ok := cur.GatewayEndpoints[dc]; ok && !started {
			nu.GatewayEndpoints[dc] = eps
		}
	}
	return &nu
}

// nonNilNodes turns "no instances" into an empty, non-nil list, so that a
// known-empty target is told apart from an unknown one.
func nonNilNodes(n structs.CheckServiceNodes) structs.CheckServiceNodes {
	if n == nil {
		return structs.CheckServiceNodes{}
	}
	return n
}
