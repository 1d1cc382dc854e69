package proxycfg

import (
	"reflect"

	"github.com/trellis-mesh/trellis/structs"
)

// sameService reports whether two registrations define the same proxy:
// equal in everything but the Raft indexes (which move on catalog writes
// that change nothing), agent-local bookkeeping, and nil versus empty
// lists and maps.
func sameService(a, b *structs.NodeService) bool {
	return reflect.DeepEqual(a.Normalized(), b.Normalized())
}
