package local

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// The state copies what callers pass in (so they may reuse it) and what it
// hands out (so they may modify it without racing the syncer, which reads
// the stored objects without copying them again), with the Clone methods of
// the structs types. This file holds the comparisons anti-entropy needs.

// normalService is the part of a service the catalog keeps, with nil and
// empty lists and maps made equal: codecs and JSON clients turn one into
// the other, and the anti-entropy comparison must not see that as drift.
func normalService(s *structs.NodeService) *structs.NodeService { return s.Normalized() }

// sameService reports whether the catalog's copy matches ours. It compares
// JSON encodings of the normalised records: opaque proxy config crosses the
// msgpack RPC codec and may come back with other number types (int vs
// int64 vs float64) that JSON renders alike.
func sameService(local, remote *structs.NodeService) bool {
	if local == nil || remote == nil {
		return local == remote
	}
	l, r := normalService(local), normalService(remote)
	// The servers add a mesh instance's virtual IP; it is not drift.
	if _, ok := l.TaggedAddresses[structs.TaggedAddressVirtualIP]; !ok {
		delete(r.TaggedAddresses, structs.TaggedAddressVirtualIP)
		if len(r.TaggedAddresses) == 0 {
			r.TaggedAddresses = nil
		}
	}
	a, errA := json.Marshal(l)
	b, errB := json.Marshal(r)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// normalCheck is the check as the catalog keeps it, for comparisons (the
// catalog matches node names case-insensitively).
func normalCheck(h *structs.HealthCheck) *structs.HealthCheck {
	c := h.Normalized()
	c.Node = strings.ToLower(c.Node)
	return c
}

// sameCheck reports whether the catalog's copy of a check matches ours;
// ignoreOutput leaves Output out (an output change is being deferred).
func sameCheck(local, remote *structs.HealthCheck, ignoreOutput bool) bool {
	if local == nil || remote == nil {
		return local == remote
	}
	a, b := normalCheck(local), normalCheck(remote)
	if ignoreOutput {
		a.Output, b.Output = "", ""
	}
	return reflect.DeepEqual(a, b)
}

// stringMapsEqual treats nil and empty as equal.
func stringMapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// HashService is the content hash of a service that blocking
// GET /v1/agent/service/<id> uses as its index (X-Consul-ContentHash): 16
// hex digits, stable across processes, changing whenever anything the
// endpoint returns changes. Consul hashes the service struct too; clients
// treat the value as opaque.
func HashService(s *structs.NodeService) string {
	if s == nil {
		return ""
	}
	c := *s
	c.RaftIndex = structs.RaftIndex{}
	b, err := json.Marshal(&c)
	if err != nil {
		// Only unencodable opaque config gets here; fall back to the
		// identity so the hash still changes with the record's identity.
		b = []byte(c.ID + "\x00" + c.Service)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
