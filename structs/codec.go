package structs

import (
	"bytes"
	"fmt"
	"io"
	"reflect"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Codec is the compact binary (msgpack) encoding of Raft commands, snapshot
// records and internal RPC payloads. It is safe for concurrent use; create
// one per component and keep it, since it caches type information.
type Codec struct {
	h *codec.MsgpackHandle
}

// NewCodec returns a codec whose maps decode as map[string]interface{} (so
// opaque proxy config survives a round trip as JSON would give it) and whose
// strings stay strings.
func NewCodec() *Codec {
	return newCodec(nil)
}

// NewRPCCodec is NewCodec for internal RPC payloads: fields tagged `rpc`
// (the caller's ACL token) are encoded too, where the Raft commands and
// snapshots of NewCodec leave them out.
func NewRPCCodec() *Codec {
	return newCodec(codec.NewTypeInfos([]string{"rpc", "codec", "json"}))
}

func newCodec(ti *codec.TypeInfos) *Codec {
	h := &codec.MsgpackHandle{WriteExt: true}
	h.TypeInfos = ti
	h.RawToString = true
	// Sorted map keys make an encoding deterministic: equal values give
	// equal bytes (snapshots, content hashes).
	h.Canonical = true
	h.MapType = reflect.TypeOf(map[string]interface{}(nil))
	return &Codec{h: h}
}

// Marshal encodes v.
func (c *Codec) Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, c.h).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes b into the pointer v.
func (c *Codec) Unmarshal(b []byte, v any) (err error) {
	defer func() {
		// The decoder can panic on some malformed inputs; a corrupt payload
		// must be an error, never a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("decode: %v", r)
		}
	}()
	return codec.NewDecoderBytes(b, c.h).Decode(v)
}

// EncodeCommand frames a Raft command: its type byte, then the body.
func (c *Codec) EncodeCommand(t MessageType, msg any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, c.h).Encode(msg); err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	return buf.Bytes(), nil
}

// NewStreamEncoder writes a sequence of values to w (snapshot records).
func (c *Codec) NewStreamEncoder(w io.Writer) *codec.Encoder { return codec.NewEncoder(w, c.h) }

// NewStreamDecoder reads a sequence of values written by NewStreamEncoder.
func (c *Codec) NewStreamDecoder(r io.Reader) *codec.Decoder { return codec.NewDecoder(r, c.h) }

// The msgpack decoder decodes every value of a map whose values are
// structs into one shared struct without zeroing it first, so a field the
// encoder omitted (omitempty) keeps the value of the previous entry: a
// resolver's Failover["v1"] would inherit Failover["*"]'s Datacenters.
// Map value types with omitempty fields therefore decode themselves into a
// fresh value (TestCodecMapValuesDecodeFresh finds any that do not).

// CodecEncodeSelf implements codec.Selfer.
func (f *ServiceResolverFailover) CodecEncodeSelf(enc *codec.Encoder) {
	type plain ServiceResolverFailover
	enc.MustEncode((*plain)(f))
}

// CodecDecodeSelf implements codec.Selfer.
func (f *ServiceResolverFailover) CodecDecodeSelf(dec *codec.Decoder) {
	type plain ServiceResolverFailover
	decodeFresh(dec, func(p plain) { *f = ServiceResolverFailover(p) })
}

// CodecEncodeSelf implements codec.Selfer.
func (s *ServiceResolverSubset) CodecEncodeSelf(enc *codec.Encoder) {
	type plain ServiceResolverSubset
	enc.MustEncode((*plain)(s))
}

// CodecDecodeSelf implements codec.Selfer.
func (s *ServiceResolverSubset) CodecDecodeSelf(dec *codec.Decoder) {
	type plain ServiceResolverSubset
	decodeFresh(dec, func(p plain) { *s = ServiceResolverSubset(p) })
}

// decodeFresh decodes the next value into a zero P and hands it to set. P
// is a method-less copy of the Selfer's type, so decoding it does not call
// the Selfer again.
func decodeFresh[P any](dec *codec.Decoder, set func(P)) {
	var p P
	dec.MustDecode(&p)
	set(p)
}
