package xds

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	status "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestCodec(t *testing.T) {
	base := encoding.GetCodecV2(protoenc.Name)
	c := newCodec()
	if c.Name() != base.Name() {
		t.Fatalf("name %q, want the proto codec's %q", c.Name(), base.Name())
	}
	small := &discoveryv3.DeltaDiscoveryResponse{
		TypeUrl: edsURL, Nonce: "7", SystemVersionInfo: "abc",
		Resources: []*discoveryv3.Resource{{Name: "a", Version: "1", Resource: &anypb.Any{TypeUrl: edsURL, Value: []byte("endpoints")}}},
	}
	large := proto.Clone(small).(*discoveryv3.DeltaDiscoveryResponse)
	large.Resources[0].Resource.Value = []byte(strings.Repeat("x", 5000))
	for _, tc := range []struct {
		name string
		msg  proto.Message
	}{
		{"small", small},
		{"large", large},
		{"empty", &discoveryv3.DeltaDiscoveryResponse{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := c.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			want, err := proto.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if got := data.Materialize(); string(got) != string(want) {
				t.Fatalf("encoding differs from proto.Marshal: %d bytes, want %d", len(got), len(want))
			}
			var back discoveryv3.DeltaDiscoveryResponse
			if err := c.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			data.Free()
			if !proto.Equal(&back, tc.msg) {
				t.Fatalf("round trip: %v, want %v", &back, tc.msg)
			}
		})
	}
	if _, err := c.Marshal("not a message"); err == nil {
		t.Fatal("a string was marshalled")
	}

	// The point of the codec: a small message is encoded into a pooled
	// buffer, so a response costs less garbage than with grpc-go's codec
	// (which allocates the encoding itself below 1 KiB).
	allocs := func(cd encoding.CodecV2) float64 {
		return testing.AllocsPerRun(200, func() {
			data, err := cd.Marshal(small)
			if err != nil {
				t.Fatal(err)
			}
			data.Free()
		})
	}
	got, was := allocs(c), allocs(base)
	t.Logf("allocations per small response: %.1f, grpc-go's codec %.1f", got, was)
	if got >= was {
		t.Errorf("a small response costs %.1f allocations, grpc-go's codec %.1f", got, was)
	}
}

// TestDeltaACKDecoding checks the codec's hand decoding of delta ACKs:
// what it takes, it decodes as proto.Unmarshal does, and everything else
// goes to proto.Unmarshal.
func TestDeltaACKDecoding(t *testing.T) {
	enc := func(m *discoveryv3.DeltaDiscoveryRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		in   []byte
		fast bool
	}{
		{"ack", enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResponseNonce: "42"}), true},
		{"unknown type", enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: "type.googleapis.com/x.Y", ResponseNonce: "1"}), true},
		{"type only", enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL}), true},
		{"empty", nil, true},
		{"nack", enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResponseNonce: "4", ErrorDetail: &status.Status{Message: "no"}}), false},
		{"subscribe", enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL, ResourceNamesSubscribe: []string{"a"}}), false},
		{"node", enc(&discoveryv3.DeltaDiscoveryRequest{Node: &corev3.Node{Id: "web"}, TypeUrl: edsURL}), false},
		{"repeated type", append(enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL}), enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: cdsURL})...), false},
		{"invalid utf-8", protowire.AppendString(protowire.AppendTag(nil, fieldRequestNonce, protowire.BytesType), "\xff"), false},
		{"truncated", enc(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: edsURL})[:5], false},
	}
	c := newCodec()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var fast discoveryv3.DeltaDiscoveryRequest
			if got := decodeDeltaACK(tc.in, &fast); got != tc.fast {
				t.Fatalf("decoded by hand: %v, want %v", got, tc.fast)
			}
			checkLikeProto(t, c, tc.in)
		})
	}
	// The stream reuses its request message (recvInto).
	ack := tests[0].in
	var r discoveryv3.DeltaDiscoveryRequest
	allocs := testing.AllocsPerRun(100, func() {
		if !decodeDeltaACK(ack, &r) || r.TypeUrl != edsURL {
			t.Fatal("ack not decoded")
		}
	})
	if allocs > 1 { // the nonce
		t.Errorf("an ACK costs %.1f allocations, want at most 1", allocs)
	}
}

// FuzzDeltaACKDecoding checks that the codec decodes any input as
// proto.Unmarshal does.
func FuzzDeltaACKDecoding(f *testing.F) {
	for _, m := range []*discoveryv3.DeltaDiscoveryRequest{
		{TypeUrl: edsURL, ResponseNonce: "42"},
		{TypeUrl: cdsURL},
		{ResponseNonce: "7", ErrorDetail: &status.Status{Message: "bad"}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	c := newCodec()
	f.Fuzz(func(t *testing.T, b []byte) {
		checkLikeProto(t, c, b)
	})
}

// checkLikeProto decodes b with the codec and with proto.Unmarshal and
// fails unless both agree: both fail, or both give equal messages.
func checkLikeProto(t *testing.T, c encoding.CodecV2, b []byte) {
	t.Helper()
	var want, got discoveryv3.DeltaDiscoveryRequest
	wantErr := proto.Unmarshal(b, &want)
	gotErr := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("codec error %v, proto.Unmarshal error %v", gotErr, wantErr)
	}
	if wantErr == nil && !proto.Equal(&got, &want) {
		t.Fatalf("codec decoded %v, proto.Unmarshal %v", &got, &want)
	}
}
