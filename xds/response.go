package xds

import (
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// response is one response plan decided on: what goes out, encoded only
// when it is sent. A server whose gRPC server uses its codec
// (NewGRPCServer) encodes it straight into a pooled buffer, so a response
// costs no message tree: at 1,000 streams an endpoint change is a
// thousand responses, and their garbage paces the collector whose assists
// slow the fan-out. Other servers send message().
type response struct {
	delta   bool
	typeURL string
	nonce   string
	// version is the delta system_version_info, or the SotW version_info.
	version string
	// resources are the delta upserts, or the whole SotW set. Every entry
	// has its encoding (any).
	resources []*entry
	// removed are the names a delta response removes.
	removed []string
}

// Field numbers of the messages a response encodes (envoy.service.
// discovery.v3 and google.protobuf.Any); fixed by the protocol.
const (
	fieldVersion   protowire.Number = 1 // (Delta)DiscoveryResponse: [system_]version_info
	fieldResources protowire.Number = 2
	fieldTypeURL   protowire.Number = 4
	fieldNonce     protowire.Number = 5
	fieldRemoved   protowire.Number = 6 // DeltaDiscoveryResponse.removed_resources

	fieldResourceVersion protowire.Number = 1 // Resource
	fieldResourceAny     protowire.Number = 2
	fieldResourceName    protowire.Number = 3

	fieldAnyTypeURL protowire.Number = 1 // Any
	fieldAnyValue   protowire.Number = 2
)

// message is the response as a message, for a gRPC server with another
// codec (and for tests).
func (r *response) message() proto.Message {
	if r.delta {
		// One allocation for the messages, one for the pointers.
		rs := make([]discoveryv3.Resource, len(r.resources))
		resources := make([]*discoveryv3.Resource, len(r.resources))
		for i, e := range r.resources {
			rs[i].Name, rs[i].Version, rs[i].Resource = e.name, e.version, e.any
			resources[i] = &rs[i]
		}
		return &discoveryv3.DeltaDiscoveryResponse{
			SystemVersionInfo: r.version,
			Resources:         resources,
			RemovedResources:  r.removed,
			TypeUrl:           r.typeURL,
			Nonce:             r.nonce,
		}
	}
	anys := make([]*anypb.Any, len(r.resources))
	for i, e := range r.resources {
		anys[i] = e.any
	}
	return &discoveryv3.DiscoveryResponse{
		VersionInfo: r.version,
		Resources:   anys,
		TypeUrl:     r.typeURL,
		Nonce:       r.nonce,
	}
}

// size is the length of the response's encoding.
func (r *response) size() int {
	n := sizeString(fieldVersion, r.version) + sizeString(fieldTypeURL, r.typeURL) + sizeString(fieldNonce, r.nonce)
	for _, e := range r.resources {
		n += sizeMessage(fieldResources, r.resourceSize(e))
	}
	for _, name := range r.removed {
		n += sizeRepeatedString(fieldRemoved, name)
	}
	return n
}

// resourceSize is the length of one resource's encoding within the
// response: a Resource (delta) or the Any itself (SotW).
func (r *response) resourceSize(e *entry) int {
	a := sizeAny(e.any)
	if !r.delta {
		return a
	}
	return sizeString(fieldResourceVersion, e.version) + sizeMessage(fieldResourceAny, a) + sizeString(fieldResourceName, e.name)
}

// appendTo appends the response's encoding to b: the bytes proto.Marshal
// gives for message() (fields in number order, proto3's empty values left
// out), which TestResponseEncoding checks.
func (r *response) appendTo(b []byte) []byte {
	b = appendString(b, fieldVersion, r.version)
	for _, e := range r.resources {
		b = protowire.AppendTag(b, fieldResources, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.resourceSize(e))) //nolint:gosec // a size, never negative
		if r.delta {
			b = appendString(b, fieldResourceVersion, e.version)
			b = protowire.AppendTag(b, fieldResourceAny, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(sizeAny(e.any))) //nolint:gosec // a size, never negative
		}
		b = appendString(b, fieldAnyTypeURL, e.any.GetTypeUrl())
		if v := e.any.GetValue(); len(v) > 0 {
			b = protowire.AppendTag(b, fieldAnyValue, protowire.BytesType)
			b = protowire.AppendBytes(b, v)
		}
		if r.delta {
			b = appendString(b, fieldResourceName, e.name)
		}
	}
	b = appendString(b, fieldTypeURL, r.typeURL)
	b = appendString(b, fieldNonce, r.nonce)
	for _, name := range r.removed {
		b = protowire.AppendTag(b, fieldRemoved, protowire.BytesType)
		b = protowire.AppendString(b, name)
	}
	return b
}

// sizeAny is the length of an Any's encoding.
func sizeAny(a *anypb.Any) int {
	n := sizeString(fieldAnyTypeURL, a.GetTypeUrl())
	if v := a.GetValue(); len(v) > 0 {
		n += protowire.SizeTag(fieldAnyValue) + protowire.SizeBytes(len(v))
	}
	return n
}

// sizeString is the length of a singular string field: none when empty,
// as proto3 leaves it out.
func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return sizeRepeatedString(num, s)
}

// sizeRepeatedString is the length of one element of a repeated string
// field (empty ones are encoded).
func sizeRepeatedString(num protowire.Number, s string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// sizeMessage is the length of a message field whose encoding is n long
// (present even when empty).
func sizeMessage(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}

// appendString appends a singular string field, unless it is empty.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}
