package structs

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// msgpack cannot decode an interface value without knowing its type, so
// every type that carries a ConfigEntry (Raft commands, RPC replies,
// snapshot records) encodes itself through these helpers: the kind first,
// then the entry, so that the decoder can make the right Go type before it
// reads the body. Each value is a self-contained msgpack byte string (via
// encoding.BinaryMarshaler, which the codec honours), so the types nest
// anywhere other values do.

// ConfigEntryEnvelope carries one entry of any kind, or none. Use it where
// a bare ConfigEntry must cross msgpack (for example a snapshot record).
type ConfigEntryEnvelope struct {
	Entry ConfigEntry
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (e *ConfigEntryEnvelope) MarshalBinary() ([]byte, error) {
	return encodeWire(func(enc *codec.Encoder) error { return encodeEntry(enc, e.Entry) })
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (e *ConfigEntryEnvelope) UnmarshalBinary(b []byte) error {
	return decodeWire(b, func(dec *codec.Decoder) error {
		var err error
		e.Entry, err = decodeEntry(dec)
		return err
	})
}

// MarshalBinary implements encoding.BinaryMarshaler. The caller's token,
// which the inner codec leaves out of WriteRequest, follows as a last
// value when set, so that it crosses the internal RPC as every other
// write's does; the server clears it before the request becomes a Raft
// command (server.encodeCommand). Encodings without it (older Raft
// entries) still decode.
func (r *ConfigEntryRequest) MarshalBinary() ([]byte, error) {
	return encodeWire(func(enc *codec.Encoder) error {
		if err := enc.Encode(r.Op); err != nil {
			return err
		}
		if err := encodeEntry(enc, r.Entry); err != nil {
			return err
		}
		if err := enc.Encode(&r.WriteRequest); err != nil || r.Token == "" {
			return err
		}
		return enc.Encode(r.Token)
	})
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (r *ConfigEntryRequest) UnmarshalBinary(b []byte) error {
	return decodeWire(b, func(dec *codec.Decoder) error {
		if err := dec.Decode(&r.Op); err != nil {
			return err
		}
		var err error
		if r.Entry, err = decodeEntry(dec); err != nil {
			return err
		}
		if err := dec.Decode(&r.WriteRequest); err != nil {
			return err
		}
		if err := dec.Decode(&r.Token); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	})
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (r *ConfigEntryResponse) MarshalBinary() ([]byte, error) {
	return encodeWire(func(enc *codec.Encoder) error {
		if err := encodeEntry(enc, r.Entry); err != nil {
			return err
		}
		return enc.Encode(&r.QueryMeta)
	})
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (r *ConfigEntryResponse) UnmarshalBinary(b []byte) error {
	return decodeWire(b, func(dec *codec.Decoder) error {
		var err error
		if r.Entry, err = decodeEntry(dec); err != nil {
			return err
		}
		return dec.Decode(&r.QueryMeta)
	})
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (r *IndexedConfigEntries) MarshalBinary() ([]byte, error) {
	return encodeWire(func(enc *codec.Encoder) error {
		if err := enc.Encode(r.Kind); err != nil {
			return err
		}
		if err := enc.Encode(len(r.Entries)); err != nil {
			return err
		}
		for _, e := range r.Entries {
			if err := encodeEntry(enc, e); err != nil {
				return err
			}
		}
		return enc.Encode(&r.QueryMeta)
	})
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (r *IndexedConfigEntries) UnmarshalBinary(b []byte) error {
	return decodeWire(b, func(dec *codec.Decoder) error {
		if err := dec.Decode(&r.Kind); err != nil {
			return err
		}
		var n int
		if err := dec.Decode(&n); err != nil {
			return err
		}
		if n < 0 || n > len(b) {
			return fmt.Errorf("config entries: bad count %d", n)
		}
		r.Entries = make([]ConfigEntry, 0, n)
		for range n {
			e, err := decodeEntry(dec)
			if err != nil {
				return err
			}
			r.Entries = append(r.Entries, e)
		}
		return dec.Decode(&r.QueryMeta)
	})
}

// encodeWire runs fn on a fresh encoder and returns the bytes written.
func encodeWire(fn func(*codec.Encoder) error) ([]byte, error) {
	var buf bytes.Buffer
	if err := fn(NewCodec().NewStreamEncoder(&buf)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeWire runs fn on a decoder over b, turning a decoder panic on
// corrupt input into an error.
func decodeWire(b []byte, fn func(*codec.Decoder) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decode config entry: %v", r)
		}
	}()
	return fn(NewCodec().NewStreamDecoder(bytes.NewReader(b)))
}

// encodeEntry writes the kind ("" for none) and then the entry.
func encodeEntry(enc *codec.Encoder, e ConfigEntry) error {
	if e == nil {
		return enc.Encode("")
	}
	if err := enc.Encode(e.GetKind()); err != nil {
		return err
	}
	return enc.Encode(e)
}

// decodeEntry reads what encodeEntry wrote.
func decodeEntry(dec *codec.Decoder) (ConfigEntry, error) {
	var kind string
	if err := dec.Decode(&kind); err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, nil
	}
	e, err := MakeConfigEntry(kind, "")
	if err != nil {
		return nil, err
	}
	if err := dec.Decode(e); err != nil {
		return nil, err
	}
	return e, nil
}
