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

// Unmarshal is grpc-go's.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	return c.base.Unmarshal(data, v)
}

// Name is the proto codec's, so that content types are unchanged.
func (c codec) Name() string { return protoenc.Name }
