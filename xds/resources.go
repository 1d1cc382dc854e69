package xds

import (
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/trellis-mesh/trellis/internal/latest"
)

// entry is one resource ready to send: encoded once, versioned by content.
type entry struct {
	name string
	// version is a hash of the deterministic encoding: equal content gives
	// an equal version on every stream and after every restart, so a
	// reconnecting delta client's initial_resource_versions are honoured.
	version string
	// any is the encoded resource; nil for entries that only record a version
	// a client announced (initial_resource_versions).
	any *anypb.Any
	// msg is the message the entry was encoded from: the next set reuses the
	// entry without encoding when it carries the same pointer.
	msg proto.Message
	// edsName is, for an EDS cluster, the ClusterLoadAssignment it needs:
	// that assignment is re-sent after every change of the cluster.
	edsName string
}

// typeSet is the resources of one type, by name and sorted by name. It is
// immutable once prepared, so streams share it and compare it by pointer.
type typeSet struct {
	typeURL string
	// src is the Source's map the set was prepared from: a next set
	// carrying the very same map has the same resources (Sources never
	// modify a delivered set), and reuses this typeSet as it is.
	src map[string]proto.Message
	// sorted is every entry, by name; lookups search it (a map per set
	// would be one more allocation per change of the type on every
	// stream, and pointers for the GC to mark on every stream).
	sorted []*entry
}

// get returns the entry of a name; nil when absent (or the set is nil).
func (t *typeSet) get(name string) *entry {
	if t == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(t.sorted, name, func(e *entry, name string) int { return strings.Compare(e.name, name) })
	if !ok {
		return nil
	}
	return t.sorted[i]
}

// prepared is a Resources set with every resource encoded and versioned:
// one typeSet per type (a handful, so a slice beats a map).
type prepared []*typeSet

// get returns the set of a type; nil when the type is absent.
func (p prepared) get(typeURL string) *typeSet {
	for _, t := range p {
		if t.typeURL == typeURL {
			return t
		}
	}
	return nil
}

// marshalOpts gives a stable encoding, so versions depend on content only.
var marshalOpts = proto.MarshalOptions{Deterministic: true}

// prepare encodes and versions a Resources set. A type whose map is the
// very map of prev's type is prev's typeSet as it is, at no cost. Within a
// changed type, entries of prev whose message pointer is unchanged are
// reused as they are; a new message whose encoding equals the previous
// entry's keeps that entry's encoding, so an unchanged resource costs one
// encoding into a scratch buffer and no allocation. A resource whose
// message type does not match its type URL, or that fails to encode, is
// logged and left out: sending it would make Envoy reject the whole
// response.
//
// Endpoint sets are also shared between streams through sh (when set):
// proxies of one agent watching the same upstream get the very same
// message from the generators (see gen.EndpointCache), and a thousand
// streams then share one encoding instead of making a thousand; proxies
// with the same upstreams even get the very same map of them, and share
// its typeSet. Other types are per-proxy messages and are not shared.
func prepare(res Resources, prev prepared, sh *shared, log *slog.Logger) prepared {
	bufp := scratch.Get().(*[]byte)
	defer scratch.Put(bufp)
	// Never nil, even for an empty res: a nil set means none yet.
	out := make(prepared, 0, len(res))
	for typeURL, msgs := range res {
		old := prev.get(typeURL)
		switch {
		case old != nil && sameMap(old.src, msgs):
			out = append(out, old)
		case typeURL == resource.EndpointType && sh != nil:
			out = append(out, sh.endpointType(msgs, old, bufp, log))
		default:
			out = append(out, prepareType(typeURL, msgs, old, nil, bufp, log))
		}
	}
	return out
}

// prepareType encodes and versions the resources of one type (see
// prepare); entries, when set, shares their encodings between streams.
func prepareType(typeURL string, msgs map[string]proto.Message, old *typeSet, entries *latest.Cache[string, *entry], bufp *[]byte, log *slog.Logger) *typeSet {
	set := &typeSet{typeURL: typeURL, src: msgs, sorted: make([]*entry, 0, len(msgs))}
	for name, msg := range msgs {
		var e *entry
		var err error
		if entries != nil {
			e, err = sharedEntry(entries, typeURL, name, msg, old.get(name), bufp)
		} else {
			e, err = newEntry(typeURL, name, msg, old.get(name), bufp)
		}
		if err != nil {
			log.Error("xds: dropping resource", "type", typeURL, "name", name, "error", err)
			continue
		}
		set.sorted = append(set.sorted, e)
	}
	slices.SortFunc(set.sorted, byName)
	return set
}

// shared is what the streams of one server share.
type shared struct {
	// entries holds the encodings of endpoint sets, by name.
	entries latest.Cache[string, *entry]
	// eds holds, per set of endpoint-set names (a hash of them), the
	// latest prepared endpoint type.
	eds latest.Cache[uint64, *typeSet]
}

// endpointType prepares the endpoint type of a stream: the typeSet of the
// latest stream given the very same map under the same names, or a new
// one (which then is the latest).
func (sh *shared) endpointType(msgs map[string]proto.Message, old *typeSet, bufp *[]byte, log *slog.Logger) *typeSet {
	// Maps iterate in no fixed order: the key must not depend on it.
	k := uint64(len(msgs))
	for name := range msgs {
		k += xxhash.Sum64String(name)
	}
	set, _ := sh.eds.Get(k, func(t *typeSet) bool { return sameMap(t.src, msgs) }, func() (*typeSet, error) {
		return prepareType(resource.EndpointType, msgs, old, &sh.entries, bufp, log), nil
	})
	return set
}

// sameMap reports whether two maps are the same map (not merely equal).
func sameMap(a, b map[string]proto.Message) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// scratch holds encoding buffers, so that resources whose encoding did not
// change are checked without allocating.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

// newEntry encodes one resource, reusing old when the content is the same.
func newEntry(typeURL, name string, msg proto.Message, old *entry, bufp *[]byte) (*entry, error) {
	if old != nil && old.msg == msg && msg != nil {
		return old, nil
	}
	if msg == nil {
		return nil, ErrBadResource
	}
	if got := resource.APITypePrefix + string(msg.ProtoReflect().Descriptor().FullName()); got != typeURL {
		return nil, wrapf(ErrBadResource, "message is %s", got)
	}
	b, err := marshalOpts.MarshalAppend((*bufp)[:0], msg)
	if err != nil {
		return nil, wrapf(ErrBadResource, "encode: %w", err)
	}
	*bufp = b
	version := hashVersion(b)
	if old != nil && old.version == version && old.any != nil {
		return &entry{name: name, version: version, any: old.any, msg: msg, edsName: old.edsName}, nil
	}
	e := &entry{
		name:    name,
		version: version,
		any:     &anypb.Any{TypeUrl: typeURL, Value: slices.Clone(b)},
		msg:     msg,
	}
	if c, ok := msg.(*clusterv3.Cluster); ok && isEDS(c) {
		e.edsName = c.GetEdsClusterConfig().GetServiceName()
		if e.edsName == "" {
			e.edsName = c.GetName()
		}
	}
	return e, nil
}

// sharedEntry is newEntry through the shared cache: the entry another
// stream made of the same message, or a new one.
func sharedEntry(entries *latest.Cache[string, *entry], typeURL, name string, msg proto.Message, old *entry, bufp *[]byte) (*entry, error) {
	if old != nil && old.msg == msg && msg != nil {
		return old, nil
	}
	return entries.Get(name, func(e *entry) bool { return e.msg == msg }, func() (*entry, error) {
		return newEntry(typeURL, name, msg, old, bufp)
	})
}

// hashVersion is the version of an encoded resource: 64 bits of xxhash,
// stable across processes, so a reconnecting delta client's
// initial_resource_versions match after an agent restart.
func hashVersion(b []byte) string {
	return strconv.FormatUint(xxhash.Sum64(b), 16)
}

// isEDS reports whether a cluster takes its endpoints from EDS.
func isEDS(c *clusterv3.Cluster) bool {
	return c.GetType() == clusterv3.Cluster_EDS || c.GetEdsClusterConfig() != nil
}

// fingerprint is the version of a whole set of entries, which must be
// sorted by name (views are): a hash over the names and versions. It
// versions state-of-the-world responses and the delta
// system_version_info, and detects "this type changed" after a NACK.
func fingerprint(entries []*entry) string {
	var h xxhash.Digest
	h.Reset()
	sep := [1]byte{0}
	for _, e := range entries {
		_, _ = h.WriteString(e.name)
		_, _ = h.Write(sep[:])
		_, _ = h.WriteString(e.version)
		_, _ = h.Write(sep[:])
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

func byName(a, b *entry) int {
	switch {
	case a.name < b.name:
		return -1
	case a.name > b.name:
		return 1
	}
	return 0
}

// Type ranks give the make-before-break order: a resource is sent before the
// resources that refer to it (secrets before the clusters and listeners that
// use them, clusters before their endpoints and before the listeners and
// routes that name them), and removed after them.
const (
	rankSecret = iota
	rankCluster
	rankEndpoint
	rankListener
	rankRoute
	rankOther
)

// typeRank places a type URL in the make-before-break order.
func typeRank(typeURL string) int {
	switch typeURL {
	case resource.SecretType:
		return rankSecret
	case resource.ClusterType:
		return rankCluster
	case resource.EndpointType:
		return rankEndpoint
	case resource.ListenerType:
		return rankListener
	case resource.RouteType:
		return rankRoute
	}
	return rankOther
}

// removalRank orders removals: referrers go first, so nothing that is
// still referenced disappears (listeners, routes, clusters, endpoints,
// secrets, then other types).
func removalRank(typeURL string) int {
	switch typeURL {
	case resource.ListenerType:
		return 0
	case resource.RouteType:
		return 1
	case resource.ClusterType:
		return 2
	case resource.EndpointType:
		return 3
	case resource.SecretType:
		return 4
	}
	return 5
}

// namedOnly reports whether a type is only ever subscribed by name: a
// request without names subscribes to nothing rather than to everything.
// Envoy sends an EDS or RDS request with no names when its last cluster or
// route configuration goes away, and must not then get all of them.
func namedOnly(typeURL string) bool {
	switch typeURL {
	case resource.EndpointType, resource.RouteType, resource.SecretType,
		resource.VirtualHostType, resource.ScopedRouteType:
		return true
	}
	return false
}

// omissionDeletes reports whether, in state-of-the-world, a resource left out
// of a response is deleted by the client. That holds for listeners and
// clusters only; other types keep what is not mentioned.
func omissionDeletes(typeURL string) bool {
	return typeURL == resource.ListenerType || typeURL == resource.ClusterType
}
