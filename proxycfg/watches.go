package proxycfg

import (
	"context"
	"reflect"
	"strconv"
)

// watchKind says what a watch fetches, and so how its results are
// applied.
type watchKind uint8

const (
	watchRoots watchKind = iota + 1
	watchMesh
	watchLeaf
	watchIntentions
	watchServiceConfig
	watchIntentionUpstreams
	watchChain           // an upstream's discovery chain
	watchTarget          // a chain target's Connect endpoints
	watchMeshGateways    // a datacenter's mesh gateways
	watchGatewayServices // a gateway's linked services
	watchGatewayEntry    // an ingress gateway's own config entry
	watchServiceList
	watchDatacenters
	watchResolvers      // every service-resolver entry
	watchResolver       // one service's resolver entry
	watchServiceHealth  // a service's instances (terminating, mesh gateway)
	watchServiceLeaf    // a linked service's leaf (terminating)
	watchServiceIntents // a linked service's intentions (terminating)
	watchServiceSvcConf // a linked service's central config (terminating)
)

var watchKindNames = [...]string{
	watchRoots:              "roots",
	watchMesh:               "mesh",
	watchLeaf:               "leaf",
	watchIntentions:         "intentions",
	watchServiceConfig:      "service-config",
	watchIntentionUpstreams: "intention-upstreams",
	watchChain:              "discovery-chain",
	watchTarget:             "upstream-target",
	watchMeshGateways:       "mesh-gateway",
	watchGatewayServices:    "gateway-services",
	watchGatewayEntry:       "gateway-config",
	watchServiceList:        "service-list",
	watchDatacenters:        "datacenters",
	watchResolvers:          "service-resolvers",
	watchResolver:           "service-resolver",
	watchServiceHealth:      "service-health",
	watchServiceLeaf:        "service-leaf",
	watchServiceIntents:     "service-intentions",
	watchServiceSvcConf:     "service-config",
}

func (k watchKind) String() string {
	if int(k) < len(watchKindNames) && watchKindNames[k] != "" {
		return watchKindNames[k]
	}
	return "watch-" + strconv.Itoa(int(k))
}

// watchKey names a watch within one state: what it fetches, for which
// part of the proxy (owner: an upstream ID, a linked service, a
// datacenter; empty for the proxy itself) and which item (key: a target
// ID, a datacenter).
type watchKey struct {
	kind  watchKind
	owner string
	key   string
}

// watch is one running data-source watch.
type watch struct {
	watchKey
	corrID string
	// req is the request the watch was started with: starting a watch
	// with the same key and an equal request is a no-op, with a different
	// one a restart.
	req    any
	cancel context.CancelFunc
}

// registry is a state's running watches. Every watch gets a correlation
// ID of its own (the key plus a sequence number), so that an in-flight
// event of a cancelled watch can never be mistaken for a result of its
// replacement: it is simply not found.
type registry struct {
	byCorr map[string]*watch
	byKey  map[watchKey]*watch
	seq    uint64
}

func newRegistry() registry {
	return registry{byCorr: make(map[string]*watch), byKey: make(map[watchKey]*watch)}
}

// notifyFunc starts a watch with a data source.
type notifyFunc func(ctx context.Context, correlationID string) error

// ensure makes sure a watch for k with req runs: it does nothing if one
// with an equal request does, replaces one with a different request, and
// starts one otherwise. started reports whether a new watch was started.
func (r *registry) ensure(parent context.Context, k watchKey, req any, notify notifyFunc) (started bool, err error) {
	if old := r.byKey[k]; old != nil {
		if reflect.DeepEqual(old.req, req) {
			return false, nil
		}
		r.cancel(old)
	}
	r.seq++
	corr := k.kind.String()
	if k.owner != "" {
		corr += ":" + k.owner
	}
	if k.key != "" {
		corr += ":" + k.key
	}
	corr += "#" + strconv.FormatUint(r.seq, 10)
	ctx, cancel := context.WithCancel(parent)
	if err := notify(ctx, corr); err != nil {
		cancel()
		return false, err
	}
	w := &watch{watchKey: k, corrID: corr, req: req, cancel: cancel}
	r.byCorr[corr] = w
	r.byKey[k] = w
	return true, nil
}

// cancel stops one watch and forgets it.
func (r *registry) cancel(w *watch) {
	w.cancel()
	delete(r.byCorr, w.corrID)
	delete(r.byKey, w.watchKey)
}

// cancelKey stops the watch for k, if any.
func (r *registry) cancelKey(k watchKey) {
	if w := r.byKey[k]; w != nil {
		r.cancel(w)
	}
}

// cancelWhere stops every watch of the given kind and owner whose key
// keep rejects (keep nil: all of them).
func (r *registry) cancelWhere(kind watchKind, owner string, keep func(key string) bool) {
	for k, w := range r.byKey {
		if k.kind == kind && k.owner == owner && (keep == nil || !keep(k.key)) {
			r.cancel(w)
		}
	}
}

// cancelOwner stops every watch of an owner.
func (r *registry) cancelOwner(owner string) {
	for k, w := range r.byKey {
		if k.owner == owner {
			r.cancel(w)
		}
	}
}
