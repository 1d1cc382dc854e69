package proxycfg

import (
	"context"
	"fmt"

	"github.com/trellis-mesh/trellis/structs"
)

// This file declares what the state machines consume. Every kind of data
// has its own small interface with one method:
//
//	Notify(ctx, req, correlationID, ch) error
//
// The contract, shared by every interface below (implementers: read it
// all, the manager relies on each point):
//
//   - Notify starts a watch and returns at once. It must not send on ch
//     before it returns: the caller is usually the only reader of ch and
//     calls Notify from the loop that reads it. It returns an error only
//     when the request itself is unusable (a missing name, ...); failures
//     to fetch are delivered as events and retried by the source.
//   - Results arrive as UpdateEvent{CorrelationID: correlationID, Result:
//     <the documented type>} on ch: first the current value as soon as it
//     is known, then a new event whenever it changes, until ctx is done.
//     A source may also re-send an unchanged value.
//   - A failed fetch is UpdateEvent{CorrelationID, Err}: the watch stays
//     alive, the consumer keeps the last good value, and the source
//     retries with backoff. Err never ends a watch; only ctx does. The
//     source logs the failure (once per query, not per subscriber); the
//     manager only logs such events at debug level.
//   - A send on ch may block while the consumer is busy, but must also
//     select on ctx.Done(): a cancelled watch must never block its sender.
//     The manager drains ch promptly and ignores events of cancelled
//     watches, so a send racing a cancellation is harmless.
//   - Results are shared and read-only. A deduplicating source hands the
//     same *Result value to every subscriber of the same question; neither
//     the source nor any consumer may modify a value once it was sent.
//     (This is what keeps snapshots cheap: they share results.)
//   - A source should not hold a goroutine per Notify call: with
//     thousands of proxies that is most of their memory. One goroutine per
//     distinct question fanning out to its subscribers, and
//     context.AfterFunc(ctx, unsubscribe) to learn about cancellation,
//     keep a watch's cost to a few hundred bytes.
//
//   - req is the caller's and read-only: the manager keeps it to tell a
//     changed request from an unchanged one. A source may keep it too.
//     Two equal requests (Token included, since results may be ACL
//     filtered) are the same question.
//
// Every request carries the datacenter and the proxy's ACL token (the
// QueryOptions of the structs request types, or explicit fields). The
// manager never sets MinQueryIndex: blocking is the source's business.

// UpdateEvent is one result (or failure) of a watch, tagged with the
// correlation ID the watch was started with.
type UpdateEvent struct {
	CorrelationID string
	// Result is the documented result type of the data source, shared and
	// read-only. Nil when Err is set.
	Result any
	Err    error
}

// CARoots watches the trusted CA roots of a datacenter.
//
// Result: *structs.IndexedCARoots (TrustDomain and ActiveRootID set once a
// CA exists).
type CARoots interface {
	Notify(ctx context.Context, req *structs.DCSpecificRequest, correlationID string, ch chan<- UpdateEvent) error
}

// LeafRequest asks for the leaf certificate of one service identity: the
// proxied service of a sidecar, an ingress gateway's own service, or a
// service linked to a terminating gateway.
type LeafRequest struct {
	Service    string
	Datacenter string
	Token      string
}

// Leaf watches a service's leaf certificate: a new event whenever the
// certificate is renewed or re-issued (root rotation).
//
// Result: *structs.IssuedCert with CertPEM and PrivateKeyPEM set.
type Leaf interface {
	Notify(ctx context.Context, req *LeafRequest, correlationID string, ch chan<- UpdateEvent) error
}

// Intentions watches the intentions that apply to connections to one
// destination service (req.ServiceName): the exact ones and the wildcard
// ("*") ones.
//
// Result: *structs.IndexedIntentions with Intentions in evaluation order
// (structs.SortIntentions: highest precedence first). Empty, not an error,
// when none apply.
type Intentions interface {
	Notify(ctx context.Context, req *structs.ServiceSpecificRequest, correlationID string, ch chan<- UpdateEvent) error
}

// IntentionUpstreams watches the services that req.ServiceName may reach
// according to intentions (every destination of an allowing intention
// with the service, or "*", as source; with a default-allow policy, every
// Connect service). Transparent proxies use it as their implicit upstreams.
//
// Result: *structs.ServiceNames, sorted, without duplicates or "*".
type IntentionUpstreams interface {
	Notify(ctx context.Context, req *structs.ServiceSpecificRequest, correlationID string, ch chan<- UpdateEvent) error
}

// ConfigEntry watches one config entry (req.Kind and req.Name both set):
// the mesh entry, a gateway's own entry, a service's resolver.
//
// Result: *structs.ConfigEntryResponse; Entry is nil while the entry does
// not exist (that is a valid result, not an error).
type ConfigEntry interface {
	Notify(ctx context.Context, req *structs.ConfigEntryQuery, correlationID string, ch chan<- UpdateEvent) error
}

// ConfigEntryList watches every config entry of one kind (req.Kind set,
// req.Name empty).
//
// Result: *structs.IndexedConfigEntries, in name order.
type ConfigEntryList interface {
	Notify(ctx context.Context, req *structs.ConfigEntryQuery, correlationID string, ch chan<- UpdateEvent) error
}

// ResolvedServiceConfig watches the merged central configuration of a
// proxied service and of its upstreams.
//
// Result: *structs.ServiceConfigResponse.
type ResolvedServiceConfig interface {
	Notify(ctx context.Context, req *structs.ServiceConfigRequest, correlationID string, ch chan<- UpdateEvent) error
}

// CompiledDiscoveryChain watches the discovery chain of one upstream,
// compiled for req.EvaluateInDatacenter with the request's overrides.
//
// Result: *structs.DiscoveryChainResponse.
type CompiledDiscoveryChain interface {
	Notify(ctx context.Context, req *structs.DiscoveryChainRequest, correlationID string, ch chan<- UpdateEvent) error
}

// Health watches the instances of a service with their checks, in
// req.Datacenter:
//
//   - req.Connect true: the service's Connect endpoints (its sidecar
//     proxies and Connect-native instances). Upstream targets and mesh
//     gateways ask this way.
//   - req.Connect false: the service's own instances (terminating
//     gateways reach linked services directly).
//   - req.QueryOptions.Filter, when set, is a discovery-chain target's
//     subset filter (structs.ParseFilter syntax) that every returned
//     instance must match; the source applies it.
//
// The manager does not set PassingOnly: snapshots carry every instance
// with its checks, and xDS generation decides health (critical instances
// are unhealthy, and non-passing ones too when the subset is OnlyPassing),
// as Consul does.
//
// Result: *structs.IndexedCheckServiceNodes.
type Health interface {
	Notify(ctx context.Context, req *structs.ServiceSpecificRequest, correlationID string, ch chan<- UpdateEvent) error
}

// ServiceList watches the names of every service registered in a
// datacenter (mesh gateways route to each).
//
// Result: *structs.IndexedServices.
type ServiceList interface {
	Notify(ctx context.Context, req *structs.DCSpecificRequest, correlationID string, ch chan<- UpdateEvent) error
}

// GatewayServices watches the services of the ingress or terminating
// gateway named req.ServiceName, as its config entry links them. A gateway
// without an entry has no services (an empty list, not an error).
//
// Result: *structs.IndexedGatewayServices.
type GatewayServices interface {
	Notify(ctx context.Context, req *structs.ServiceSpecificRequest, correlationID string, ch chan<- UpdateEvent) error
}

// ServicesByKind watches every instance of a service kind in a datacenter:
// mesh gateways of the local datacenter (mesh gateway mode "local") and of
// remote ones (mode "remote", and mesh gateways themselves).
//
// Result: *structs.IndexedCheckServiceNodes.
type ServicesByKind interface {
	Notify(ctx context.Context, req *structs.ServiceKindRequest, correlationID string, ch chan<- UpdateEvent) error
}

// DatacenterList is the list of known datacenters, sorted.
type DatacenterList struct {
	Datacenters []string
	structs.QueryMeta
}

// Datacenters watches the datacenters this one knows (WAN federation); a
// single-datacenter cluster lists only its own.
//
// Result: *DatacenterList.
type Datacenters interface {
	Notify(ctx context.Context, req *structs.DCSpecificRequest, correlationID string, ch chan<- UpdateEvent) error
}

// DataSources bundles every data source the state machines use. All are
// required: New refuses a bundle with a nil member, so that a missing
// implementation shows at start-up rather than when the first gateway
// registers.
type DataSources struct {
	CARoots                CARoots
	Leaf                   Leaf
	Intentions             Intentions
	IntentionUpstreams     IntentionUpstreams
	ConfigEntry            ConfigEntry
	ConfigEntryList        ConfigEntryList
	ResolvedServiceConfig  ResolvedServiceConfig
	CompiledDiscoveryChain CompiledDiscoveryChain
	Health                 Health
	ServiceList            ServiceList
	GatewayServices        GatewayServices
	ServicesByKind         ServicesByKind
	Datacenters            Datacenters
}

// validate reports the first missing data source.
func (d *DataSources) validate() error {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"CARoots", d.CARoots != nil},
		{"Leaf", d.Leaf != nil},
		{"Intentions", d.Intentions != nil},
		{"IntentionUpstreams", d.IntentionUpstreams != nil},
		{"ConfigEntry", d.ConfigEntry != nil},
		{"ConfigEntryList", d.ConfigEntryList != nil},
		{"ResolvedServiceConfig", d.ResolvedServiceConfig != nil},
		{"CompiledDiscoveryChain", d.CompiledDiscoveryChain != nil},
		{"Health", d.Health != nil},
		{"ServiceList", d.ServiceList != nil},
		{"GatewayServices", d.GatewayServices != nil},
		{"ServicesByKind", d.ServicesByKind != nil},
		{"Datacenters", d.Datacenters != nil},
	} {
		if !f.set {
			return fmt.Errorf("%w: DataSources.%s", ErrMissingDataSource, f.name)
		}
	}
	return nil
}
