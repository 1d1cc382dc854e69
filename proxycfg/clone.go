package proxycfg

import (
	"maps"
	"reflect"
	"slices"

	"github.com/trellis-mesh/trellis/structs"
)

// cloneNodeService returns a deep copy of a registration, so that the
// manager's copy (shared read-only by every snapshot of the proxy) can
// never change under it.
func cloneNodeService(in *structs.NodeService) *structs.NodeService {
	out := *in
	out.Tags = slices.Clone(in.Tags)
	out.TaggedAddresses = maps.Clone(in.TaggedAddresses)
	out.Meta = maps.Clone(in.Meta)
	if in.Weights != nil {
		w := *in.Weights
		out.Weights = &w
	}
	out.Proxy.Config = cloneOpaque(in.Proxy.Config)
	out.Proxy.Expose.Paths = slices.Clone(in.Proxy.Expose.Paths)
	if in.Proxy.Upstreams != nil {
		out.Proxy.Upstreams = make([]structs.Upstream, len(in.Proxy.Upstreams))
		for i, u := range in.Proxy.Upstreams {
			u.Config = cloneOpaque(u.Config)
			out.Proxy.Upstreams[i] = u
		}
	}
	return &out
}

// cloneOpaque deep-copies an opaque config map (nested maps and lists
// included; scalars are values).
func cloneOpaque(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneOpaqueValue(v)
	}
	return out
}

func cloneOpaqueValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return cloneOpaque(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = cloneOpaqueValue(e)
		}
		return out
	case []string:
		return slices.Clone(t)
	case map[string]string:
		return maps.Clone(t)
	}
	return v
}

// sameService reports whether two registrations define the same proxy:
// equal in everything but the Raft indexes (which move on catalog writes
// that change nothing) and agent-local bookkeeping.
func sameService(a, b *structs.NodeService) bool {
	x, y := *a, *b
	x.RaftIndex, y.RaftIndex = structs.RaftIndex{}, structs.RaftIndex{}
	x.LocallyRegisteredAsSidecar, y.LocallyRegisteredAsSidecar = false, false
	return reflect.DeepEqual(&x, &y)
}
