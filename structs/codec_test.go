package structs

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

func TestCodecRoundTrip(t *testing.T) {
	c := NewCodec()
	cases := []any{
		&RegisterRequest{Node: "n1", Address: "127.0.0.1", TaggedAddresses: map[string]string{"lan": "127.0.0.1"},
			Service: &NodeService{ID: "web1", Service: "web", Tags: []string{"a"}, Port: 80, Weights: &Weights{Passing: 1, Warning: 1},
				Proxy: ConnectProxyConfig{Config: map[string]interface{}{"protocol": "http", "nested": map[string]interface{}{"k": "v"}}}},
			Checks: HealthChecks{{Node: "n1", CheckID: "c", Status: HealthPassing, Definition: HealthCheckDefinition{Interval: Duration(time.Second)}}}},
		&KVSRequest{Op: KVSet, DirEnt: DirEntry{Key: "k", Value: []byte{0, 1, 2}, Flags: 42}},
		&SessionRequest{Op: SessionCreate, Session: Session{ID: "x", LockDelay: 15 * time.Second, NodeChecks: []string{"serfHealth"}}},
		&TxnRequest{Ops: TxnOps{{KV: &TxnKVOp{Verb: KVCAS, DirEnt: DirEntry{Key: "a", RaftIndex: RaftIndex{ModifyIndex: 3}}}}}},
		// Map values whose fields are omitted when empty: each must decode
		// into a fresh value, not into the one decoded before it.
		&ConfigEntryEnvelope{Entry: &ServiceResolverConfigEntry{Kind: ServiceResolver, Name: "r", Failover: map[string]ServiceResolverFailover{
			"*":  {Datacenters: []string{"dc2"}},
			"v1": {Service: "alternate"},
			"v3": {Targets: []ServiceResolverFailoverTarget{{Peer: "cluster-01"}}},
		}, Subsets: map[string]ServiceResolverSubset{
			"a": {Filter: "Service.Meta.v == a", OnlyPassing: true},
			"b": {},
		}}},
	}
	for _, in := range cases {
		b, err := c.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		out := reflect.New(reflect.TypeOf(in).Elem()).Interface()
		if err := c.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Errorf("round trip of %T:\n in: %#v\nout: %#v", in, in, out)
		}
	}
}

func TestCodecRejectsGarbage(t *testing.T) {
	c := NewCodec()
	for _, b := range [][]byte{{0xc1}, {0xdf, 0xff, 0xff, 0xff, 0xff}, {0x92}} {
		var r RegisterRequest
		if err := c.Unmarshal(b, &r); err == nil {
			t.Errorf("decoding %x: want error", b)
		}
	}
}

// TestCodecMapValuesDecodeFresh finds map value types that the msgpack
// decoder would decode into a shared struct (see codec.go): every struct
// map value reachable from an RPC type or a config entry kind that has an
// omitempty field must decode itself.
func TestCodecMapValuesDecodeFresh(t *testing.T) {
	selfer := reflect.TypeOf((*codec.Selfer)(nil)).Elem()
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type, string)
	walk = func(ty reflect.Type, path string) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(ty.Elem(), path)
		case reflect.Map:
			if el := ty.Elem(); el.Kind() == reflect.Struct && hasOmitempty(el) && !reflect.PointerTo(el).Implements(selfer) {
				t.Errorf("%s: map values of %s have omitempty fields but do not implement codec.Selfer", path, el)
			}
			walk(ty.Elem(), path)
		case reflect.Struct:
			for i := range ty.NumField() {
				if f := ty.Field(i); f.IsExported() {
					walk(f.Type, path+"."+f.Name)
				}
			}
		}
	}
	for _, m := range Methods() {
		walk(m.ArgsType(), m.Name())
		walk(m.ReplyType(), m.Name())
	}
	for _, kind := range ConfigEntryKinds {
		e, err := MakeConfigEntry(kind, "")
		if err != nil {
			t.Fatal(err)
		}
		walk(reflect.TypeOf(e), kind)
	}
	walk(reflect.TypeOf(CompiledDiscoveryChain{}), "CompiledDiscoveryChain")
}

func hasOmitempty(ty reflect.Type) bool {
	for i := range ty.NumField() {
		if strings.Contains(ty.Field(i).Tag.Get("json"), "omitempty") {
			return true
		}
	}
	return false
}
