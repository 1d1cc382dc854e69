package xds

import (
	"unicode/utf8"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// minPooled is the smallest buffer the codec asks the pool for: grpc-go
// returns a buffer to its pool only when its capacity is at least 1 KiB
// (mem.IsBelowBufferPoolingThreshold), and frees smaller ones to the GC.
const minPooled = 1 << 10

// newCodec returns the gRPC codec of NewGRPCServer: grpc-go's proto codec,
// except that it sends an encoded response as it is, and encodes any other
// message into a buffer of grpc-go's default pool (grpc-go's own codec
// pools only messages of 1 KiB and more, and an endpoint update is
// smaller). The transport returns the buffer to the pool once the message
// is on the wire. Decoding is grpc-go's.
func newCodec() encoding.CodecV2 {
	return codec{base: encoding.GetCodecV2(protoenc.Name)}
}

type codec struct {
	base encoding.CodecV2
}

// encoded is a response's encoding in a buffer of grpc-go's default pool
// (sendEncoded); the codec hands the buffer, and its ownership, to the
// transport.
type encoded []byte

// sendEncoded encodes r into a pooled buffer and sends it: the stream's
// codec must be newCodec.
func sendEncoded(gs interface{ SendMsg(any) error }, r *response) error {
	buf := mem.DefaultBufferPool().Get(max(r.size(), minPooled))
	*buf = r.appendTo((*buf)[:0])
	return gs.SendMsg((*encoded)(buf))
}

// Marshal hands an encoded response over, or encodes a message into a
// pooled buffer. It computes the size first, so MarshalAppend fills the
// buffer without growing it (and may use the cached size), as grpc-go's
// codec does.
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*encoded); ok {
		return mem.BufferSlice{mem.NewBuffer((*[]byte)(e), mem.DefaultBufferPool())}, nil
	}
	m, ok := v.(proto.Message)
	if !ok {
		return c.base.Marshal(v) // its error names the type
	}
	size := proto.Size(m)
	if size == 0 {
		return c.base.Marshal(v)
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(max(size, minPooled))
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		pool.Put(buf)
		return nil, err
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes as grpc-go's proto codec does, except for the request
// Envoy sends most: a delta ACK, which holds only a type URL and a
// response nonce. That one is decoded by hand, and its type URL is the
// server's own string for the type instead of a copy: at 1,000 streams an
// endpoint change brings a thousand ACKs, and the copies were a twentieth
// of the agent's garbage per change.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*discoveryv3.DeltaDiscoveryRequest); ok && len(data) == 1 && decodeDeltaACK(data[0].ReadOnlyData(), r) {
		return nil
	}
	return c.base.Unmarshal(data, v)
}

// DeltaDiscoveryRequest's field numbers decodeDeltaACK knows.
const (
	fieldRequestTypeURL protowire.Number = 2
	fieldRequestNonce   protowire.Number = 6
)

// decodeDeltaACK decodes b into r when b holds a type URL, a response
// nonce, or both (each once, valid UTF-8) and nothing else, and reports
// whether it did; anything else is left to proto.Unmarshal, so r is always
// what proto.Unmarshal would make of b.
func decodeDeltaACK(b []byte, r *discoveryv3.DeltaDiscoveryRequest) bool {
	var typeURL, nonce []byte
	var haveType, haveNonce bool
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return false
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return false
		}
		b = b[n+m:]
		switch {
		case num == fieldRequestTypeURL && !haveType:
			typeURL, haveType = v, true
		case num == fieldRequestNonce && !haveNonce:
			nonce, haveNonce = v, true
		default:
			return false
		}
	}
	if !utf8.Valid(typeURL) || !utf8.Valid(nonce) {
		return false
	}
	proto.Reset(r)
	r.TypeUrl = internTypeURL(typeURL)
	r.ResponseNonce = string(nonce)
	return true
}

// internTypeURL is b as a string, without copying it when it is the type
// URL of a resource type the generators make.
func internTypeURL(b []byte) string {
	switch string(b) {
	case resource.ClusterType:
		return resource.ClusterType
	case resource.EndpointType:
		return resource.EndpointType
	case resource.ListenerType:
		return resource.ListenerType
	case resource.RouteType:
		return resource.RouteType
	case resource.SecretType:
		return resource.SecretType
	}
	return string(b)
}

// Name is the proto codec's, so that content types are unchanged.
func (c codec) Name() string { return protoenc.Name }
