package state

import (
	"reflect"

	"github.com/trellis-mesh/trellis/structs"
)

// The store copies every object on the way in (so that callers may reuse
// what they passed) and on the way out (so that callers may modify what
// they get without racing other readers of the shared memdb objects), with
// the Clone methods of the structs types.

func cloneChecks(in []*structs.HealthCheck) structs.HealthChecks {
	out := make(structs.HealthChecks, 0, len(in))
	for _, h := range in {
		out = append(out, h.Clone())
	}
	return out
}

// sameService and sameCheck decide whether a write would change a stored
// object: a registration that differs only in nil versus empty lists, or in
// Raft indexes, must not move an index (anti-entropy re-sends every
// registration).
func sameService(a, b *structs.NodeService) bool {
	return reflect.DeepEqual(a.Normalized(), b.Normalized())
}

func sameCheck(a, b *structs.HealthCheck) bool {
	return reflect.DeepEqual(a.Normalized(), b.Normalized())
}
