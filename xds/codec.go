package xds

import (
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// minPooled is the smallest buffer the codec asks the pool for: grpc-go
// returns a buffer to its pool only when its capacity is at least 1 KiB
// (mem.IsBelowBufferPoolingThreshold), and frees smaller ones to the GC.
const minPooled = 1 << 10

// Codec returns the gRPC codec an ADS server should use
// (grpc.ForceServerCodecV2): grpc-go's proto codec, except that every
// message is encoded into a buffer of grpc-go's default pool, which the
// transport returns to it once the message is on the wire. grpc-go's own
// codec pools only messages of 1 KiB and more, and an endpoint update is
// smaller: at 1,000 proxies, each endpoint change allocated a buffer per
// stream, garbage that paces the collector whose assists slow the
// fan-out. Decoding is grpc-go's.
func Codec() encoding.CodecV2 {
	return codec{base: encoding.GetCodecV2(protoenc.Name)}
}

type codec struct {
	base encoding.CodecV2
}

// Marshal encodes v into a pooled buffer. It computes the size first, so
// MarshalAppend fills the buffer without growing it (and may use the
// cached size), as grpc-go's codec does.
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
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

// Unmarshal is grpc-go's.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.base.Unmarshal(data, v)
}

// Name is the proto codec's, so that content types are unchanged.
func (c codec) Name() string { return protoenc.Name }
