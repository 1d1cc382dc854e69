package xds

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// TestResponseEncoding checks that a response's own encoding is exactly
// what proto.Marshal gives for its message: the encoded path (NewGRPCServer)
// and the message path send the same bytes.
func TestResponseEncoding(t *testing.T) {
	e := func(name, version, value string) *entry {
		return &entry{name: name, version: version, any: &anypb.Any{TypeUrl: edsURL, Value: []byte(value)}}
	}
	big := strings.Repeat("x", 300) // lengths past one varint byte
	tests := []struct {
		name string
		r    response
	}{
		{"delta upserts", response{delta: true, typeURL: edsURL, nonce: "12", version: "9f3a", resources: []*entry{e("a", "1", "endpoints-a"), e("b", "2", "endpoints-b")}}},
		{"delta removals", response{delta: true, typeURL: cdsURL, nonce: "3", version: "v", removed: []string{"x", "", big}}},
		{"delta both, long fields", response{delta: true, typeURL: edsURL, nonce: "4", version: big, resources: []*entry{e(big, big, big)}, removed: []string{"gone"}}},
		{"delta empty value and version", response{delta: true, typeURL: edsURL, nonce: "5", resources: []*entry{e("a", "", "")}}},
		{"delta nothing", response{delta: true, typeURL: edsURL, nonce: "6"}},
		{"sotw set", response{typeURL: edsURL, nonce: "7", version: "abc", resources: []*entry{e("a", "1", "endpoints-a"), e("b", "2", big)}}},
		{"sotw empty set", response{typeURL: ldsURL, nonce: "8", version: "0"}},
		{"all empty", response{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.r.message())
			if err != nil {
				t.Fatal(err)
			}
			got := tc.r.appendTo([]byte("prefix"))
			if !bytes.Equal(got[len("prefix"):], want) {
				t.Fatalf("encoding differs from proto.Marshal:\n got % x\nwant % x", got[len("prefix"):], want)
			}
			if n := tc.r.size(); n != len(want) {
				t.Fatalf("size %d, encoding is %d bytes", n, len(want))
			}
		})
	}
}

// TestEncodedResponseIsHandedOver checks the codec's side of an encoded
// response: the very buffer goes to the transport, nothing is copied or
// allocated beyond the transport's buffer record.
func TestEncodedResponseIsHandedOver(t *testing.T) {
	c := newCodec()
	r := response{delta: true, typeURL: edsURL, nonce: "1", version: "v",
		resources: []*entry{{name: "a", version: "1", any: &anypb.Any{TypeUrl: edsURL, Value: []byte("endpoints")}}}}
	var sent mem.BufferSlice
	send := func(m any) error {
		var err error
		sent, err = c.Marshal(m)
		return err
	}
	if err := sendEncoded(sendFunc(send), &r); err != nil {
		t.Fatal(err)
	}
	want, err := proto.Marshal(r.message())
	if err != nil {
		t.Fatal(err)
	}
	if got := sent.Materialize(); !bytes.Equal(got, want) {
		t.Fatalf("sent % x, want % x", got, want)
	}
	sent.Free()
	allocs := testing.AllocsPerRun(200, func() {
		if err := sendEncoded(sendFunc(send), &r); err != nil {
			t.Fatal(err)
		}
		sent.Free()
	})
	// A message-built response allocates its message, its resources and
	// their pointers before encoding; the encoded one at most the
	// transport's pooled buffer record.
	if allocs > 1 {
		t.Errorf("an encoded response costs %.1f allocations, want at most 1", allocs)
	}
}

// sendFunc adapts a function to the SendMsg of a gRPC stream.
type sendFunc func(any) error

func (f sendFunc) SendMsg(m any) error { return f(m) }
