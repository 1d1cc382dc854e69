package xds

import (
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
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
